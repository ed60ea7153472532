"""Appends that Kafka refuses were accepted: keyless records into a compacted
log (then silently removed by the cleaner), a record count that disagrees with
``last_offset_delta`` (a 1-record batch with delta 9 moved the log end offset
by 10), zero-record batches, control batches from clients, timestamps outside
``message.timestamp.before/after.max.ms``.  Configs that DescribeConfigs shows
(``max.compaction.lag.ms``, ``segment.jitter.ms``, ``message.timestamp.*.max.ms``,
``compression.type``, ``flush.messages``) were ignored.  Every append now goes
through one validation layer (``storage.validator``), as Kafka's LogValidator."""

from __future__ import annotations

import asyncio

import pytest

from kcoord.protocol import compression
from kcoord.protocol import records as R
from kcoord.protocol.records.format import _rewrite_crc as rewrite_crc
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.config import LogConfig
from kcoord.storage.errors import InvalidRecordError, InvalidTimestampError
from kcoord.storage.log import PartitionLog
from kcoord.storage.validator import AppendOrigin
from tests.storage.helpers import all_records, batch

NOW = 1_700_000_000_000


def _log(tmp_path, name="t-0", **config):
    return PartitionLog(str(tmp_path / name), LogConfig(**config), clock=lambda: NOW)


def _refused(plog, data, error=InvalidRecordError, match=None, **kwargs):
    end, size = plog.log_end_offset, plog.size_bytes
    with pytest.raises(error, match=match) as info:
        plog.append(data, **kwargs)
    assert (plog.log_end_offset, plog.size_bytes) == (end, size)  # nothing written
    return info.value


def test_keyless_records_are_refused_by_a_compacted_log(tmp_path):
    plog = _log(tmp_path, "c-0", cleanup_policy="compact")
    mixed = R.build_batch([R.Record(None, NOW, b"k", b"v"), R.Record(None, NOW, None, b"v")])
    err = _refused(plog, mixed)
    assert err.code == ErrorCode.INVALID_RECORD
    assert err.record_errors == [
        (1, "Compacted topic cannot accept message without key in topic partition c-0")]
    assert "1 record errors in total" in str(err)
    plog.append(batch([b"v"], keys=[b"k"], ts=NOW))
    assert plog.log_end_offset == 1


def test_a_record_count_that_disagrees_with_the_offset_delta_is_refused(tmp_path):
    plog = _log(tmp_path)
    lying = R.build_batch([R.Record(None, NOW, b"k", b"v")], last_offset_delta=9)
    _refused(plog, lying, match=r"Inconsistent batch offset range \[0, 9\] and count of records 1 "
                                r"in topic partition t-0")
    empty = R.build_batch([])
    _refused(plog, empty, match="Invalid reported count for record batch: 0 in topic partition t-0")


def test_a_declared_count_must_match_the_records_present(tmp_path):
    plog = _log(tmp_path)
    two = bytearray(R.build_batch([R.Record(None, NOW, b"a", b"1"), R.Record(None, NOW, b"b", b"2")]))
    # Claim three records (and a matching offset range); the CRC is recomputed.
    two[23:27] = (2).to_bytes(4, "big")
    two[57:61] = (3).to_bytes(4, "big")
    rewrite_crc(two, 0, len(two))
    _refused(plog, bytes(two), match="truncated record")


def test_control_batches_and_missing_sequences_from_clients_are_refused(tmp_path):
    plog = _log(tmp_path)
    control = R.build_control_batch(1, producer_id=7, producer_epoch=0, coordinator_epoch=0,
                                    timestamp=NOW)
    _refused(plog, control, match="Clients are not allowed to write control records")
    # The coordinator writes control batches (transaction markers) itself.
    plog.append(control, origin=AppendOrigin.COORDINATOR)
    no_seq = R.build_batch([R.Record(None, NOW, b"k", b"v")], producer_id=5, producer_epoch=0,
                           base_sequence=-1)
    _refused(plog, no_seq, match="Invalid sequence number -1 in record batch with producerId 5")


def test_a_client_batch_must_start_at_offset_zero(tmp_path):
    plog = _log(tmp_path)
    _refused(plog, R.build_batch([R.Record(None, NOW, b"k", b"v")], base_offset=4),
             match="should be 0, but it is 4")


def test_timestamps_outside_the_topic_bounds_are_refused(tmp_path):
    plog = _log(tmp_path, message_timestamp_before_max_ms=1_000, message_timestamp_after_max_ms=500)
    old = R.build_batch([R.Record(None, NOW - 1_001, b"k", b"v"), R.Record(None, NOW, b"k", b"v")])
    err = _refused(plog, old, InvalidTimestampError)
    assert err.code == ErrorCode.INVALID_TIMESTAMP
    assert str(err) == "One or more records have been rejected due to invalid timestamp"
    assert err.record_errors == [(0, f"Timestamp {NOW - 1_001} of message with offset 0 is out of "
                                     f"range. The timestamp should be within [{NOW - 1_000}, "
                                     f"{NOW + 500}]")]
    _refused(plog, batch([b"v"], ts=NOW + 501), InvalidTimestampError)
    plog.append(batch([b"v"], ts=NOW + 500))
    plog.append(batch([b"v"], ts=NOW - 1_000))
    # By default, an hour ahead at most (KIP-1030), and no bound behind.
    default = _log(tmp_path, "d-0")
    _refused(default, batch([b"v"], ts=NOW + 3_600_001), InvalidTimestampError)
    default.append(batch([b"v"], ts=NOW + 3_600_000))
    default.append(batch([b"v"], ts=1))


def test_a_producer_may_not_set_log_append_time(tmp_path):
    plog = _log(tmp_path, message_timestamp_type="LogAppendTime")
    lat = R.build_batch([R.Record(None, NOW, b"k", b"v")], timestamp_type=R.LOG_APPEND_TIME)
    err = _refused(plog, lat, InvalidTimestampError)
    assert "Producer should not set timestamp type to LogAppendTime." in err.record_errors[0][1]
    assert "DefaultRecord(offset=0, timestamp=" in err.record_errors[0][1]


@pytest.mark.parametrize("target,codec", [("gzip", compression.GZIP), ("lz4", compression.LZ4),
                                          ("uncompressed", compression.NONE)])
def test_compression_type_recompresses_appends(tmp_path, target, codec):
    plog = _log(tmp_path, compression_type=target)
    plog.append(batch([b"a", b"b"], keys=[b"1", b"2"], ts=NOW, codec=compression.SNAPPY))
    plog.append(batch([b"c"], ts=NOW))
    stored = plog.read(0, 1 << 20)
    headers = [R.batch_header(stored, pos) for pos, _s, _m in R.iter_entries(stored)]
    assert [h.compression for h in headers] == [codec, codec]
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 1), (2, 2)]
    assert [v for _o, _t, _k, v in all_records(plog)] == [b"a", b"b", b"c"]


def test_producer_compression_is_kept_byte_for_byte(tmp_path):
    plog = _log(tmp_path)
    sent = batch([b"a" * 50, b"b" * 50], ts=NOW, codec=compression.ZSTD)
    plog.append(sent)
    stored = plog.read(0, 1 << 20)
    assert stored[61:] == sent[61:] and R.batch_header(stored).compression == compression.ZSTD


def test_segment_jitter_rolls_earlier(tmp_path, monkeypatch):
    import kcoord.storage.log as log_module

    class FixedJitter:
        def randrange(self, _n):
            return 400

    monkeypatch.setattr(log_module, "_jitter", FixedJitter())
    plog = _log(tmp_path, segment_ms=1_000, segment_jitter_ms=500)
    plog.append(batch([b"a"], ts=NOW))
    plog.append(batch([b"b"], ts=NOW + 601))  # 601 > 1000 - 400
    assert len(plog.segments) == 2
    steady = _log(tmp_path, "s-0", segment_ms=1_000)
    steady.append(batch([b"a"], ts=NOW))
    steady.append(batch([b"b"], ts=NOW + 601))
    assert len(steady.segments) == 1


def _compacted_once(tmp_path, name, **config):
    plog = _log(tmp_path, name, cleanup_policy="compact", min_cleanable_dirty_ratio=0.9, **config)
    for i in range(10):
        plog.append(batch([b"v%d" % i], keys=[b"same"], ts=NOW - 60_000))
    plog.roll()
    assert plog.compact(NOW, force=True) is not None
    # A little dirty data, well below the dirty ratio, in a segment of its own.
    plog.append(batch([b"newer"], keys=[b"same"], ts=NOW - 59_000))
    plog.roll()
    plog.append(batch([b"active"], keys=[b"other"], ts=NOW))
    return plog


def test_max_compaction_lag_cleans_a_log_below_its_dirty_ratio(tmp_path):
    plog = _compacted_once(tmp_path, "c-0", max_compaction_lag_ms=10_000)
    assert plog.dirty_ratio(NOW) < 0.9
    assert plog.compact(NOW) is not None
    assert [v for _o, _t, _k, v in all_records(plog)] == [b"newer", b"active"]
    patient = _compacted_once(tmp_path, "p-0")
    assert patient.compact(NOW) is None


def test_max_compaction_lag_rolls_the_active_segment(tmp_path):
    plog = _log(tmp_path, "c-0", cleanup_policy="compact", max_compaction_lag_ms=10_000)
    plog.append(batch([b"a"], keys=[b"k"], ts=NOW))
    plog.append(batch([b"b"], keys=[b"k"], ts=NOW + 10_001))
    assert len(plog.segments) == 2
    plain = _log(tmp_path, "d-0", cleanup_policy="compact")
    plain.append(batch([b"a"], keys=[b"k"], ts=NOW))
    plain.append(batch([b"b"], keys=[b"k"], ts=NOW + 10_001))
    assert len(plain.segments) == 1


def test_flush_messages_makes_an_append_wait_for_its_fsync(tmp_path):
    plog = _log(tmp_path, flush_messages=1)
    asyncio.run(plog.append_async(batch([b"a"], ts=NOW)))
    assert plog.recovery_point == 1
    lazy = _log(tmp_path, "l-0")
    asyncio.run(lazy.append_async(batch([b"a"], ts=NOW)))
    assert lazy.recovery_point == 0


def test_compression_levels_are_applied_when_recompressing(tmp_path):
    sizes = {}
    for level in (1, 9):
        plog = _log(tmp_path, f"g{level}-0", compression_type="gzip", compression_gzip_level=level)
        values = [(b"%d kafka compatible broker " % (i % 97)) * 20 for i in range(200)]
        plog.append(R.build_batch([R.Record(None, NOW, b"k", v) for v in values]))
        sizes[level] = plog.size_bytes
        assert [v for _o, _t, _k, v in all_records(plog)] == values
    assert sizes[9] < sizes[1]


def test_a_compressed_record_past_max_decompressed_message_bytes_is_refused(tmp_path):
    """max.decompressed.message.bytes bounds each record's body once decompressed:
    the whole batch is refused; a record at the bound, or any uncompressed one
    (never decompressed), is appended."""
    from kcoord.protocol import compression

    plog = _log(tmp_path, max_decompressed_message_bytes=100)

    def one(value_size, codec=compression.GZIP, others=2):
        return R.build_batch([R.Record(None, NOW, b"k", b"s")] * others +
                             [R.Record(None, NOW, b"k", b"x" * value_size)],
                             compression_type=codec)
    for codec in (compression.GZIP, compression.LZ4, compression.ZSTD):
        err = _refused(plog, one(200, codec))
        assert err.code == ErrorCode.INVALID_RECORD
        assert "exceeds the configured maximum record size of 100." in str(err)
    # a body of exactly 100 bytes: the record's length varint says 100
    at_bound = next(n for n in range(60, 120)
                    if R.largest_record_body(_payload(one(n)), 3) == 100)
    plog.append(one(at_bound))
    _refused(plog, one(at_bound + 1))
    plog.append(one(500, compression.NONE))
    assert plog.log_end_offset == 6
    assert _log(tmp_path, "u-0").append(one(5_000)) is not None  # the default: no bound


def _payload(data: bytes) -> bytes:
    return R.batch_payload(data, 0, len(data))


def test_largest_record_body_refuses_lengths_past_the_data():
    from kcoord.protocol.records import CorruptRecordError

    good = _payload(R.build_batch([R.Record(None, NOW, b"k", b"v" * 10)] * 2,
                                  compression_type=1))
    assert R.largest_record_body(good, 2) > 10
    for bad in (good[:-1], b"\x01" + good[1:], b"\xff\xff\xff\xff\xff\xff"):
        with pytest.raises(CorruptRecordError):
            R.largest_record_body(bad, 2)
