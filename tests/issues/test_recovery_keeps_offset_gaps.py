"""Recovery called an offset gap corruption whenever the log was not configured
``compact`` and no cleaner checkpoint existed.  Appending to a compacted log,
compacting it and crashing before any checkpoint was written, then reopening
under the default (delete) policy, truncated segment 0 to nothing and deleted
every later segment: the log end offset fell from thousands to 0.  Kafka's
recovery only ends a log at an invalid batch; compacted logs, logs whose policy
changed and folders copied from a Kafka broker all have gaps."""

from __future__ import annotations

import os

from kcoord.storage.config import LogConfig
from kcoord.storage.manager import CLEANER_FILE, RECOVERY_POINT_FILE, LogManager
from tests.storage.helpers import all_records, batch

COMPACT = LogConfig(cleanup_policy=("compact",), segment_bytes=2_000, min_cleanable_dirty_ratio=0.0)


def test_a_compacted_log_crashed_before_any_checkpoint_reopens_whole_under_delete(tmp_path):
    manager = LogManager(str(tmp_path), COMPACT)
    plog = manager.get_or_create("c", 0)
    for i in range(300):
        plog.append(batch([b"v%d" % i] * 3, keys=[b"k%d" % (i % 7)] * 3))
    plog.roll()
    assert plog.compact(force=True) is not None
    survivors = all_records(plog)
    end = plog.log_end_offset
    assert end == 900 and len(survivors) < 100  # gaps everywhere
    # SIGKILL: no close, no checkpoint file, no clean-shutdown marker.
    assert not os.path.exists(tmp_path / CLEANER_FILE)
    assert not os.path.exists(tmp_path / RECOVERY_POINT_FILE)

    for policy in (("delete",), ("compact",), ("compact", "delete")):
        reopened = LogManager(str(tmp_path), LogConfig(cleanup_policy=policy))
        again = reopened.get_or_create("c", 0)
        assert again.log_end_offset == end, policy
        assert all_records(again) == survivors, policy
        for other in reopened.logs.values():
            other.close_files()


def test_recovery_still_ends_the_log_at_a_batch_that_goes_back(tmp_path):
    manager = LogManager(str(tmp_path))
    plog = manager.get_or_create("d", 0)
    plog.append(batch([b"a", b"b"]))
    plog.append(batch([b"c"]))
    # A batch whose base offset (outside the CRC) points back into the log.
    bad = bytearray(batch([b"z"]))
    bad[0:8] = (1).to_bytes(8, "big")
    with open(os.path.join(plog.directory, "00000000000000000000.log"), "ab") as f:
        f.write(bad)
    again = LogManager(str(tmp_path)).get_or_create("d", 0)
    assert again.log_end_offset == 3
    assert [v for _o, _t, _k, v in all_records(again)] == [b"a", b"b", b"c"]
