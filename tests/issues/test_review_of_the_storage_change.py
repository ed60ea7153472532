"""Bugs an independent review of the storage and topic-lifecycle change found,
each reproduced before it was fixed:

1. a cleaned segment small enough to have no index file left the replaced
   segment's ``.index`` in place: after a clean restart reads skipped records;
2. a flush in flight while its topic was deleted failed on the removed folder
   and took the whole log dir offline;
3. segments recovered after a crash were never fsynced before the recovery
   point moved past them;
4. a producer's batch ``maxTimestamp`` was stored as sent (Kafka sets it from
   the records), so a false one defeated retention and time lookups;
5. a journal append that failed half-way left half a line, which swallowed the
   next acknowledged topic change;
6. the event loop, forgetting a deleted topic's checkpoint entries, waited for
   a checkpoint write (three fsyncs) in progress in another thread;
7. a compaction interrupted by an error left its ``.cleaned`` files behind."""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pytest

from kcoord.protocol import records as R
from kcoord.storage import segment as S
from kcoord.storage.config import LogConfig
from kcoord.storage.log import PartitionLog
from kcoord.storage.manager import LogManager
from tests.storage.helpers import all_records, batch, batch_offsets


def test_a_small_cleaned_segment_replaces_the_old_index(tmp_path):
    path = str(tmp_path / "t-0")
    cfg = LogConfig(cleanup_policy=("compact",), index_interval_bytes=100,
                    min_cleanable_dirty_ratio=0.0)
    plog = PartitionLog(path, cfg, clock=lambda: 10_000)
    for i in range(6):
        plog.append(batch([b"v%d" % i], keys=[b"k1"], ts=1000 + i), now_ms=10_000)
    plog.append(batch([b"x" * 3000], keys=[b"k2"], ts=2000), now_ms=10_000)
    plog.roll()
    plog.append(batch([b"tail"], keys=[b"k3"], ts=3000), now_ms=10_000)
    assert len(plog.segments[0].offset_index) > 0  # the old segment had entries
    assert plog.compact(10_000, force=True) is not None
    live = all_records(plog)
    plog.close()
    again = PartitionLog(path, cfg, clean_shutdown=True, recovery_point=plog.recovery_point,
                         clock=lambda: 10_000)
    assert all_records(again) == live
    for offset, *_ in live:
        first, last = batch_offsets(again.read(offset, 1 << 20))[0]
        assert first <= offset <= last


def test_a_flush_in_flight_when_its_topic_is_deleted_is_harmless(tmp_path):
    offline = []
    manager = LogManager(str(tmp_path), on_offline=offline.append)
    [plog] = manager.create_partitions("t", 1, "AAAAAAAAAAAAAAAAAAAAAA",
                                       LogConfig(flush_policy="batch"))
    manager.register([plog])

    async def run():
        gate = threading.Event()
        segment = plog.segments[0]
        real = segment.flush

        def slow_flush():  # a slow disk: the fsync is still running...
            gate.wait(5)
            real()

        segment.flush = slow_flush
        produce = asyncio.ensure_future(plog.append_async(batch([b"v"])))
        await asyncio.sleep(0.05)
        gone = manager.detach("t", 1)  # ...when DeleteTopics removes the folder
        await asyncio.get_running_loop().run_in_executor(None, manager.remove_partitions, gone)
        gate.set()
        await produce

    asyncio.run(run())
    assert not manager.offline and offline == []


def test_segments_recovered_after_a_crash_are_fsynced_before_the_recovery_point_passes(
        tmp_path, monkeypatch):
    path = str(tmp_path / "t-0")
    cfg = LogConfig(segment_bytes=200)
    plog = PartitionLog(path, cfg)
    for _ in range(5):
        plog.append(batch([b"x" * 60]))
    # SIGKILL: nothing flushed, the last checkpointed recovery point is 0.
    again = PartitionLog(path, cfg, recovery_point=0, clean_shutdown=False)
    synced = []
    real = S.LogSegment.flush

    def spy(self):
        synced.append(self.base_offset)
        real(self)

    monkeypatch.setattr(S.LogSegment, "flush", spy)
    again.append(batch([b"y"]))
    again.flush()
    assert again.recovery_point == again.log_end_offset
    assert sorted(synced) == [s.base_offset for s in again.segments]


@pytest.mark.parametrize("claimed", [9_999_999_999_999, -1])
def test_the_batch_max_timestamp_comes_from_its_records(tmp_path, claimed):
    now = 1_700_000_000_000
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig(retention_ms=1_000), clock=lambda: now)
    lying = bytearray(R.build_batch([R.Record(None, now - 5, b"k", b"a"),
                                     R.Record(None, now, b"k", b"b")]))
    R.set_max_timestamp(lying, 0, claimed)
    info = plog.append(bytes(lying))
    assert info.max_timestamp == now
    stored = plog.read(0, 1 << 20)
    assert R.batch_header(stored).max_timestamp == now and R.crc_valid(stored, 0)
    assert plog.offset_for_timestamp(now).offset == 1
    plog.roll()
    assert plog.delete_old_segments(now_ms=now + 86_400_000) == 1  # retention works


def test_a_failed_journal_append_does_not_swallow_the_next_change(tmp_path, monkeypatch):
    from kcoord.broker.topics.store import TopicStore

    store = TopicStore(tmp_path)
    store.load()
    store.record(created=[{"name": "a", "topic_id": "A", "partitions": 1, "configs": {}}])
    real_write = os.write

    def half_write(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_write)
    with pytest.raises(OSError):
        store.record(created=[{"name": "b", "topic_id": "B", "partitions": 1, "configs": {}}])
    monkeypatch.undo()
    store.record(deleted=[{"name": "a", "topic_id": "A"}])
    assert TopicStore(tmp_path).load() == {}


def test_forgetting_a_deleted_topic_never_waits_for_a_checkpoint_write(tmp_path, monkeypatch):
    import kcoord.storage.manager as M

    manager = LogManager(str(tmp_path))
    manager.get_or_create("a", 0)
    manager.get_or_create("b", 0)
    writing, release = threading.Event(), threading.Event()
    real = M.write_checkpoint

    def slow_write(path, entries):
        writing.set()
        release.wait(10)  # an fsync on a slow disk
        real(path, entries)

    monkeypatch.setattr(M, "write_checkpoint", slow_write)
    writer = threading.Thread(target=manager.write_checkpoints)
    writer.start()
    assert writing.wait(10)
    detacher = threading.Thread(target=manager.detach, args=("a", 1))  # the event loop's part
    detacher.start()
    detacher.join(5)
    detached_while_writing = not detacher.is_alive()
    release.set()
    writer.join(10)
    detacher.join(10)
    assert detached_while_writing


def test_an_interrupted_compaction_leaves_no_cleaned_files(tmp_path, monkeypatch):
    import kcoord.storage.cleaner as C

    cfg = LogConfig(cleanup_policy=("compact",), segment_bytes=300, min_cleanable_dirty_ratio=0.0)
    plog = PartitionLog(str(tmp_path / "c-0"), cfg)
    for i in range(10):
        plog.append(batch([b"v" * 50], keys=[b"k%d" % (i % 2)]))
    plog.roll()

    def broken(*args, **kwargs):
        raise OSError(errno.EBADF, "Bad file descriptor")  # the log deleted under the cleaner

    monkeypatch.setattr(C, "build_batch", broken)
    monkeypatch.setattr(C, "empty_batch", broken)
    with pytest.raises(OSError):
        plog.compact(force=True)
    assert not [n for n in os.listdir(plog.directory) if ".cleaned" in n]
