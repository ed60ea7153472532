"""PartitionLog: layout on disk, reads, rolling, retention, truncation, recovery, fsync policies."""

from __future__ import annotations

import asyncio
import os
import struct
import threading

import pytest

from kcoord.protocol import records as R
from kcoord.storage import (
    InvalidRecordError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
)
from kcoord.storage.errors import CorruptBatchError
from kcoord.storage.validator import AppendOrigin
from tests.storage.helpers import all_records, batch, batch_offsets


@pytest.fixture
def logdir(tmp_path):
    return str(tmp_path / "topic-0")


def _spec_read_segment(path_prefix):
    """A reader written from the format description: .log batches, .index and .timeindex entries."""
    with open(path_prefix + ".log", "rb") as f:
        log_bytes = f.read()
    batches = []
    pos = 0
    while pos < len(log_bytes):
        base_offset, length = struct.unpack_from(">qi", log_bytes, pos)
        magic = log_bytes[pos + 16]
        assert magic == 2
        last_delta = struct.unpack_from(">i", log_bytes, pos + 23)[0]
        max_ts = struct.unpack_from(">q", log_bytes, pos + 35)[0]
        batches.append((pos, base_offset, base_offset + last_delta, max_ts, length + 12))
        pos += length + 12
    with open(path_prefix + ".index", "rb") as f:
        index = list(struct.iter_unpack(">ii", f.read()))
    with open(path_prefix + ".timeindex", "rb") as f:
        timeindex = list(struct.iter_unpack(">qi", f.read()))
    return batches, index, timeindex


def _expected_indexes(batches, base, interval):
    """Kafka's rule: index the batch that follows more than ``interval`` unindexed bytes."""
    index, timeindex = [], []
    since = 0
    max_ts, max_off = -1, base
    for pos, _b, last, ts, size in batches:
        if ts > max_ts:
            max_ts, max_off = ts, last
        if since > interval:
            index.append((last - base, pos))
            if not timeindex or max_ts > timeindex[-1][0]:
                timeindex.append((max_ts, max_off - base))
            since = 0
        since += size
    # The final entry a segment gets when it stops being active.
    if max_ts >= 0 and (not timeindex or max_ts > timeindex[-1][0]):
        timeindex.append((max_ts, max_off - base))
    return index, timeindex


def test_segment_files_follow_kafka_layout(logdir):
    cfg = LogConfig(segment_bytes=4_000, index_interval_bytes=500)
    plog = PartitionLog(logdir, cfg)
    for i in range(120):
        plog.append(batch([b"v" * (i % 50)] * (1 + i % 3), ts=10_000 + i * 7))
    plog.close()
    names = sorted(os.listdir(logdir))
    # (and the producer snapshot at the log end offset a clean shutdown leaves)
    bases = sorted({int(n.split(".")[0]) for n in names if not n.endswith(".snapshot")})
    assert len(bases) > 1
    for n in names:
        stem, ext = n.split(".", 1)
        assert len(stem) == 20 and ext in ("log", "index", "timeindex", "snapshot")
    next_offset = 0
    for base in bases:
        batches, index, timeindex = _spec_read_segment(os.path.join(logdir, f"{base:020d}"))
        assert batches[0][1] == base == next_offset
        for _pos, first, last, _ts, _size in batches:
            assert first == next_offset
            next_offset = last + 1
        assert (index, timeindex) == _expected_indexes(batches, base, 500)
        assert index, "sparse index entries expected"
    assert next_offset == 120 * 2


def test_read_starts_at_the_containing_batch_and_never_cuts(logdir):
    plog = PartitionLog(logdir)
    for _ in range(10):
        plog.append(batch([b"x" * 100] * 5))  # 5 offsets per batch
    size = len(batch([b"x" * 100] * 5))
    data = plog.read(12, size * 2 + 10)
    assert batch_offsets(data) == [(10, 14), (15, 19)]
    # The first batch comes back even when it is larger than max_bytes.
    assert batch_offsets(plog.read(7, 1)) == [(5, 9)]
    assert plog.read(7, 1, min_one_batch=False) == b""
    # max_offset (exclusive) holds back batches starting at or after it.
    assert batch_offsets(plog.read(0, 10_000, max_offset=15)) == [(0, 4), (5, 9), (10, 14)]
    assert plog.read(50, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(51, 100)


def test_append_assigns_offsets_and_rewrites_epoch(logdir):
    plog = PartitionLog(logdir)
    info = plog.append(batch([b"a", b"b", b"c"], ts=500), leader_epoch=3)
    assert (info.first_offset, info.last_offset, info.max_timestamp) == (0, 2, 502)
    with pytest.raises(InvalidRecordError, match="more than one batch"):
        plog.append(batch([b"d"]) + batch([b"e", b"f"]))  # one batch per client append
    info = plog.append(batch([b"d"]) + batch([b"e", b"f"]), origin=AppendOrigin.COORDINATOR)
    assert (info.first_offset, info.last_offset) == (3, 5)
    assert plog.log_end_offset == 6
    data = plog.read(0, 1 << 20)
    assert R.batch_header(data).partition_leader_epoch == 3
    assert [v for _o, _t, _k, v in all_records(plog)] == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_append_rejects_bad_batches(logdir):
    plog = PartitionLog(logdir, LogConfig(max_message_bytes=200))
    bad = bytearray(batch([b"v"]))
    bad[-1] ^= 1
    with pytest.raises(CorruptBatchError, match="Record is corrupt"):
        plog.append(bytes(bad))
    with pytest.raises(InvalidRecordError):
        plog.append(R.build_legacy([R.Record(None, 1, b"k", b"v")], magic=1))
    with pytest.raises(RecordTooLargeError):
        plog.append(batch([b"x" * 300]))
    assert plog.log_end_offset == 0 and plog.size_bytes == 0


def test_log_append_time(logdir):
    plog = PartitionLog(logdir, LogConfig(message_timestamp_type="LogAppendTime"))
    info = plog.append(batch([b"a", b"b"], ts=5), now_ms=777)
    assert info.log_append_time == 777
    assert [t for _o, t, _k, _v in all_records(plog)] == [777, 777]


def test_roll_by_size_and_time(logdir):
    plog = PartitionLog(logdir, LogConfig(segment_bytes=1000, segment_ms=60_000))
    one = batch([b"x" * 200])
    for _ in range(10):
        plog.append(one)
    assert [s.base_offset for s in plog.segments] == [0, 3, 6, 9]
    assert all(s.size <= 1000 for s in plog.segments)
    plog2 = PartitionLog(logdir + "b", LogConfig(segment_ms=60_000))
    plog2.append(batch([b"a"], ts=1_000))
    plog2.append(batch([b"b"], ts=50_000))
    assert len(plog2.segments) == 1
    plog2.append(batch([b"c"], ts=61_001))
    assert [s.base_offset for s in plog2.segments] == [0, 2]


def test_offset_for_timestamp_and_max_timestamp(logdir):
    plog = PartitionLog(logdir, LogConfig(segment_bytes=400, index_interval_bytes=50))
    for i in range(30):
        plog.append(batch([b"v", b"w"], ts=1_000 + i * 10, ts_step=3))
    found = plog.offset_for_timestamp(1_101)
    assert (found.offset, found.timestamp) == (21, 1_103)
    assert plog.offset_for_timestamp(0).offset == 0
    assert plog.offset_for_timestamp(10_000) is None
    top = plog.max_timestamp_offset()
    assert (top.timestamp, top.offset) == (1_293, 59)


def test_a_batch_below_the_log_start_is_read_while_its_segment_holds_it(logdir):
    """What ListOffsets reads for the largest timestamp after DeleteRecords."""
    plog = PartitionLog(logdir, LogConfig(segment_bytes=400, index_interval_bytes=50))
    for i in range(30):
        plog.append(batch([b"v", b"w"], ts=1_000 + i * 10))
    plog.advance_log_start_offset(60)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(21, 1)
    data = plog.read_batch_at(21)
    header = R.batch_header(data, 0)
    assert (header.base_offset, header.last_offset, len(data)) == (20, 21, header.size)
    assert plog.read_batch_at(60) == b"" and plog.read_batch_at(-1) == b""
    plog.delete_old_segments(below_start_only=True)  # its segment gone: nothing to read
    assert plog.read_batch_at(21) == b""


def test_retention_by_time_bytes_and_log_start(logdir):
    cfg = LogConfig(segment_bytes=500, retention_ms=10_000)
    plog = PartitionLog(logdir, cfg)
    for i in range(20):
        plog.append(batch([b"x" * 100], ts=1_000 + i * 1_000))
    segments = len(plog.segments)
    assert segments > 3
    # Segments whose newest record is older than retention.ms go; the active one stays.
    deleted = plog.delete_old_segments(now_ms=1_000 + 14_000)
    assert deleted > 0 and plog.log_start_offset == plog.segments[0].base_offset
    assert all(1_000 + 14_000 - s.max_timestamp <= 10_000 for s in plog.segments[:-1])
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(0, 100)
    # retention.bytes
    plog.config = LogConfig(segment_bytes=500, retention_ms=-1, retention_bytes=600)
    plog.delete_old_segments(now_ms=0)
    assert plog.size_bytes - plog.segments[0].size < 600
    # DeleteRecords-style log start moves.
    plog.advance_log_start_offset(19)
    plog.delete_old_segments(now_ms=0)
    assert plog.log_start_offset == 19 and plog.segments[0].base_offset <= 19
    assert all_records(plog)[-1][0] == 19


def test_truncate_to(logdir):
    plog = PartitionLog(logdir, LogConfig(segment_bytes=500))
    for _ in range(20):
        plog.append(batch([b"x" * 50, b"y"]))
    plog.truncate_to(21)  # inside the batch [20, 21]: the whole batch goes
    assert plog.log_end_offset == 20
    assert all_records(plog)[-1][0] == 19
    info = plog.append(batch([b"z"]))
    assert info.first_offset == 20
    plog.truncate_to(0)
    assert plog.log_end_offset == 0 and plog.size_bytes == 0
    plog.close()
    plog = PartitionLog(logdir)
    assert plog.log_end_offset == 0


def test_reopen_after_clean_close_keeps_everything(logdir):
    plog = PartitionLog(logdir, LogConfig(segment_bytes=700, index_interval_bytes=100))
    for i in range(40):
        plog.append(batch([b"v%d" % i], ts=i))
    before = all_records(plog)
    plog.close()
    plog = PartitionLog(logdir, LogConfig(segment_bytes=700), clean_shutdown=True)
    assert all_records(plog) == before
    assert plog.log_end_offset == 40
    assert plog.append(batch([b"next"])).first_offset == 40


def test_recovery_truncates_a_torn_tail_and_rebuilds_indexes(logdir):
    cfg = LogConfig(segment_bytes=2_000, index_interval_bytes=100)
    plog = PartitionLog(logdir, cfg)
    for i in range(30):
        plog.append(batch([b"v%d" % i * 10]))
    plog.close()
    last = plog.segments[-1]
    index_bytes = open(last.offset_index.path, "rb").read()
    first_index = open(plog.segments[0].offset_index.path, "rb").read()
    # Tear the last batch, drop an index and damage another.
    with open(last.log_path, "r+b") as f:
        f.truncate(os.path.getsize(last.log_path) - 5)
    os.unlink(last.offset_index.path)
    with open(plog.segments[0].offset_index.path, "ab") as f:
        f.write(b"\x00\x00\x00")
    reopened = PartitionLog(logdir, cfg)
    assert reopened.log_end_offset == 29
    assert [v for _o, _t, _k, v in all_records(reopened)] == [b"v%d" % i * 10 for i in range(29)]
    assert open(reopened.segments[0].offset_index.path, "rb").read() == first_index
    rebuilt = open(reopened.segments[-1].offset_index.path, "rb").read()
    assert index_bytes.startswith(rebuilt)
    assert reopened.append(batch([b"again"])).first_offset == 29


def _flip_byte(path: str, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x55]))


def test_recovery_stops_at_a_bad_crc_and_drops_later_segments(logdir):
    cfg = LogConfig(segment_bytes=600)
    plog = PartitionLog(logdir, cfg)
    for i in range(30):
        plog.append(batch([b"v%d" % i * 20]))
    plog.close()
    victim = plog.segments[1]
    _flip_byte(victim.log_path, 200)
    reopened = PartitionLog(logdir, cfg)
    offsets = [o for o, _t, _k, _v in all_records(reopened)]
    assert offsets == list(range(len(offsets)))
    assert victim.base_offset <= reopened.log_end_offset < 30
    assert len(reopened.segments) == 2


def test_a_crash_while_recovery_drops_later_segments_never_leaves_a_gap(logdir, monkeypatch):
    """The start after a crash finds a damaged segment and is itself killed while
    it deletes the segments after it: the start after that still ends the log at
    the damage, with no offset gap and nothing from after it."""
    from kcoord.storage.segment import LogSegment

    cfg = LogConfig(segment_bytes=600)
    plog = PartitionLog(logdir, cfg)
    for i in range(40):
        plog.append(batch([b"v%d" % i * 20]))
    plog.close()
    assert len(plog.segments) >= 4
    victim = plog.segments[1]
    _flip_byte(victim.log_path, 200)

    class Killed(BaseException):
        pass

    real_delete = LogSegment.delete
    deleted = []

    def delete_then_die(segment):
        if deleted:
            raise Killed
        deleted.append(segment.base_offset)
        real_delete(segment)

    monkeypatch.setattr(LogSegment, "delete", delete_then_die)
    with pytest.raises(Killed):
        PartitionLog(logdir, cfg)
    monkeypatch.setattr(LogSegment, "delete", real_delete)

    reopened = PartitionLog(logdir, cfg)
    offsets = [o for o, _t, _k, _v in all_records(reopened)]
    assert offsets == list(range(reopened.log_end_offset))
    assert victim.base_offset <= reopened.log_end_offset < plog.segments[2].base_offset
    assert [s.base_offset for s in reopened.segments] == [s.base_offset
                                                          for s in plog.segments[:2]]
    assert reopened.append(batch([b"again"])).first_offset == offsets[-1] + 1


class _FsyncRecorder:
    def __init__(self, monkeypatch):
        self.events = []
        real = os.fsync

        def fsync(fd):
            self.events.append("fsync")
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)


async def test_never_policy_acknowledges_without_fsync(logdir, monkeypatch):
    rec = _FsyncRecorder(monkeypatch)
    plog = PartitionLog(logdir)
    for _ in range(5):
        await plog.append_async(batch([b"v"]))
    assert rec.events == []


async def test_always_policy_fsyncs_each_append_before_acknowledging(logdir, monkeypatch):
    rec = _FsyncRecorder(monkeypatch)
    plog = PartitionLog(logdir, LogConfig(flush_policy="always"))
    for i in range(3):
        await plog.append_async(batch([b"v"]))
        rec.events.append(f"ack{i}")
    # Each acknowledgement follows a log fsync (and the directory fsync).
    acks = [i for i, e in enumerate(rec.events) if e.startswith("ack")]
    prev = -1
    for a in acks:
        assert "fsync" in rec.events[prev + 1 : a]
        prev = a
    assert plog.recovery_point == 3


async def test_batch_policy_shares_one_fsync_among_close_appends(logdir, monkeypatch):
    rec = _FsyncRecorder(monkeypatch)
    plog = PartitionLog(logdir, LogConfig(flush_policy="batch"))
    written = []

    async def produce(i):
        info = await plog.append_async(batch([b"v%d" % i]))
        # By now an fsync that started after this write has finished.
        written.append((info.first_offset, plog.recovery_point))
        rec.events.append(f"ack{i}")

    await asyncio.gather(*(produce(i) for i in range(20)))
    fsyncs = rec.events.count("fsync")
    assert 1 <= fsyncs < 20 * 2  # shared: far fewer than one (log + dir) per append
    assert rec.events[0] == "fsync"
    assert all(rp > off for off, rp in written)


async def test_async_fsync_runs_off_the_event_loop(logdir, monkeypatch):
    import threading

    loop_thread = threading.get_ident()
    threads = []
    real = os.fsync

    def fsync(fd):
        threads.append(threading.get_ident())
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    plog = PartitionLog(logdir, LogConfig(flush_policy="always"))
    await plog.append_async(batch([b"v"]))
    assert threads and loop_thread not in threads


def test_retention_deletes_an_expired_active_segment_by_rolling_first(logdir):
    plog = PartitionLog(logdir, LogConfig(retention_ms=1000))
    plog.append(batch([b"v", b"w"], ts=10_000))
    assert len(plog.segments) == 1
    assert plog.delete_old_segments(now_ms=10_500) == 0  # not expired yet
    assert plog.delete_old_segments(now_ms=20_000) == 1
    assert (plog.log_start_offset, plog.log_end_offset) == (2, 2)
    assert [s.base_offset for s in plog.segments] == [2]
    assert plog.delete_old_segments(now_ms=30_000) == 0  # the empty active segment stays
    assert plog.append(batch([b"x"], ts=30_000)).first_offset == 2


def test_large_appends_get_their_blocks_before_the_write(logdir, monkeypatch):
    """An append of 256 KiB or more has its blocks allocated first, in one call,
    without the file growing before the bytes are there; smaller ones do not."""
    from kcoord.storage import files, segment

    calls = []

    def spy(fd, offset, length):
        calls.append((offset, length, os.fstat(fd).st_size))
        return files.preallocate(fd, offset, length)

    monkeypatch.setattr(segment, "preallocate", spy)
    plog = PartitionLog(logdir)
    small = batch([b"s" * 1000])
    large = batch([os.urandom(50_000) for _ in range(6)])  # 300 KB
    plog.append(small)
    plog.append(large)
    plog.append(small)
    assert calls == [(len(small), len(large), len(small))]
    path = os.path.join(logdir, f"{0:020d}.log")
    assert os.path.getsize(path) == 2 * len(small) + len(large)
    assert [v for _o, _t, _k, v in all_records(plog)] == \
        [b"s" * 1000] + [r.value for r in R.decode_batch(large).records] + [b"s" * 1000]
    plog.close()
    reopened = PartitionLog(logdir)
    assert reopened.log_end_offset == 8


def test_preallocating_keeps_the_file_size(tmp_path):
    from kcoord.storage import files

    path = tmp_path / "f"
    path.write_bytes(b"abc")
    fd = os.open(path, os.O_RDWR)
    try:
        assert files.preallocate(fd, 3, 1 << 20)
        st = os.fstat(fd)
        assert st.st_size == 3
        assert st.st_blocks * 512 >= 1 << 20
    finally:
        os.close(fd)
    assert path.read_bytes() == b"abc"


def test_appends_go_on_where_blocks_cannot_be_preallocated(logdir, monkeypatch):
    """A file system without fallocate: appends are written as before and the call
    is not tried again; a failure such as a full disk is left to the write itself."""
    import ctypes
    import errno

    from kcoord.storage import files

    tried = []

    def failing(code):
        def fallocate(fd, mode, offset, length):
            tried.append(code)
            ctypes.set_errno(code)
            return -1
        return fallocate

    monkeypatch.setattr(files, "_fallocate", failing(errno.ENOSPC))
    plog = PartitionLog(logdir)
    large = batch([b"x" * 300_000])
    plog.append(large)
    assert tried == [errno.ENOSPC] and files._fallocate is not None
    monkeypatch.setattr(files, "_fallocate", failing(errno.EOPNOTSUPP))
    plog.append(large)
    plog.append(large)
    assert tried == [errno.ENOSPC, errno.EOPNOTSUPP] and files._fallocate is None
    assert [o for o, _t, _k, _v in all_records(plog)] == [0, 1, 2]


def test_retention_waits_for_a_structural_change_in_progress(logdir):
    # A compaction swap holds the structural lock while its files move: a retention
    # pass meanwhile must not take segments out from under it.
    plog = PartitionLog(logdir, LogConfig(segment_bytes=500, retention_ms=1_000))
    for i in range(10):
        plog.append(batch([b"x" * 100], ts=1_000 + i))
    before = [s.base_offset for s in plog.segments]
    assert len(before) > 2
    done = []
    worker = threading.Thread(target=lambda: done.append(plog.delete_old_segments(now_ms=10**9)))
    with plog.structural_change():
        worker.start()
        worker.join(0.5)
        assert worker.is_alive() and not done
        assert [s.base_offset for s in plog.segments] == before
    worker.join(30)
    assert done == [len(before)]  # every segment expired: the log rolled first
    assert plog.log_start_offset == plog.log_end_offset


def test_opening_a_log_is_one_info_line_and_a_roll_another(logdir):
    """At INFO a broker's start says one line per partition (``log_opened``, as
    Kafka's one line per loaded log), not one more for the segment a new
    partition begins with; a roll is still told (``segment_rolled``)."""
    import logging

    from tests.support import captured_logs

    with captured_logs(logging.INFO) as events:
        plog = PartitionLog(logdir, LogConfig(segment_bytes=1000))
        for _ in range(5):
            plog.append(batch([b"x" * 200]))
    names = [e["event"] for e in events]
    assert names.count("log_opened") == 1 and names.count("segment_rolled") == 1, names
    assert len(plog.segments) == 2
    assert "segment_opened" not in names, names
    # a new log has nothing to recover; one opened after a crash (no clean
    # shutdown recorded) says it was recovered
    assert [e["recovered"] for e in events if e["event"] == "log_opened"] == [False]
    plog.close()
    with captured_logs(logging.INFO) as events:
        PartitionLog(logdir, LogConfig(segment_bytes=1000), clean_shutdown=False).close()
    assert [e["recovered"] for e in events if e["event"] == "log_opened"] == [True]
