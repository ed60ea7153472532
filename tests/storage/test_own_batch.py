"""``PartitionLog.append_own`` (the group coordinator's writes) against the
general path it stands for: ``append(build_batch(records), origin=COORDINATOR)``.

Two logs with the same config take the same appends, one through each path;
every append must give the same offsets and timestamps or the same error, and
the segment files must end up byte for byte the same.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol.records import Record, build_batch
from kcoord.storage.config import LogConfig
from kcoord.storage.log import PartitionLog
from kcoord.storage.validator import AppendOrigin

configs = st.builds(
    LogConfig,
    cleanup_policy=st.sampled_from([("delete",), ("compact",), ("compact", "delete")]),
    max_message_bytes=st.one_of(st.integers(60, 400), st.just(1024 * 1024 + 12)),
    segment_bytes=st.one_of(st.integers(60, 600), st.just(1 << 30)),
    message_timestamp_type=st.sampled_from(["CreateTime", "LogAppendTime"]),
    message_timestamp_before_max_ms=st.sampled_from([-1, 0, 5, 1 << 62]),
    message_timestamp_after_max_ms=st.sampled_from([-1, 0, 5, 1 << 62]),
    compression_type=st.sampled_from(["producer", "uncompressed", "gzip", "zstd"]),
)
# Keys are rarely missing (the coordinator always writes one), and an empty
# append is rare: the interesting cases are the sizes and the config.
key_values = st.one_of(
    st.lists(st.tuples(st.binary(min_size=1, max_size=30),
                       st.one_of(st.none(), st.binary(max_size=60))), min_size=1, max_size=4),
    st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=30)),
                       st.one_of(st.none(), st.binary(max_size=60))), max_size=4))
appends = st.lists(st.tuples(key_values, st.integers(0, 1 << 45)), min_size=1, max_size=6)


def _outcome(call):
    try:
        info = call()
    except Exception as exc:  # noqa: BLE001 - compared between the two paths
        return type(exc), str(exc)
    return info


def _files(directory):
    return {name: open(os.path.join(directory, name), "rb").read()
            for name in sorted(os.listdir(directory)) if name.endswith(".log")}


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(config=configs, appends=appends, leader_epoch=st.sampled_from([None, 0, 7]))
def test_own_records_are_appended_as_the_general_path_appends_them(config, appends, leader_epoch):
    with tempfile.TemporaryDirectory() as root:
        general = PartitionLog(os.path.join(root, "a", "__consumer_offsets-1"), config)
        own = PartitionLog(os.path.join(root, "b", "__consumer_offsets-1"), config)
        try:
            for records, now in appends:
                expected = _outcome(lambda: general.append(
                    build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)]),
                    now_ms=now, leader_epoch=leader_epoch, origin=AppendOrigin.COORDINATOR))
                got = _outcome(lambda: own.append_own(records, now_ms=now,
                                                      leader_epoch=leader_epoch))
                assert got == expected
            assert own.log_end_offset == general.log_end_offset
            assert _files(own.directory) == _files(general.directory)
        finally:
            general.close()
            own.close()


def test_the_direct_path_is_taken_for_the_offsets_topic_defaults(monkeypatch):
    """The coordinator's usual writes do not go through the validator at all."""
    import kcoord.storage.log as log_module

    def refuse(*args, **kwargs):
        raise AssertionError("validated after the fact")

    monkeypatch.setattr(log_module, "validate_and_assign", refuse)
    with tempfile.TemporaryDirectory() as root:
        plog = PartitionLog(os.path.join(root, "__consumer_offsets-0"),
                            LogConfig(cleanup_policy=("compact",)))
        try:
            info = plog.append_own([(b"key", b"value"), (b"key-2", None)], now_ms=1_000,
                                   leader_epoch=0)
            assert (info.first_offset, info.last_offset, info.max_timestamp) == (0, 1, 1_000)
            assert plog.log_end_offset == 2
        finally:
            plog.close()
