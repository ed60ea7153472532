"""Compaction: crash-safe swaps, dirty ratio, concurrency with appends, LogManager."""

from __future__ import annotations

import asyncio
import os

import pytest

from kcoord.protocol import records as R
from kcoord.storage import LogConfig, PartitionLog
from kcoord.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager, read_checkpoint
from tests.storage.helpers import all_records

CFG = LogConfig(segment_bytes=1_500, cleanup_policy="compact", delete_retention_ms=100)


def _fill(plog, n, keys=5, start=0):
    for i in range(start, start + n):
        plog.append(R.build_batch([R.Record(None, 1_000 + i, b"k%d" % (i % keys), b"v%d" % i * 10)]))


class _Crash(Exception):
    pass


@pytest.mark.parametrize("fail_at", range(0, 37))
def test_a_crash_at_any_step_of_the_swap_leaves_old_or_new(tmp_path, monkeypatch, fail_at):
    path = str(tmp_path / "c-0")
    plog = PartitionLog(path, CFG)
    _fill(plog, 60)
    plog.roll()
    old = all_records(plog)
    latest = {}
    for o, _t, k, v in old:
        latest[k] = (o, v)
    calls = {"n": 0}
    real_rename, real_unlink = os.rename, os.unlink

    def counting(real):
        def wrapper(*args, **kwargs):
            if calls["n"] == fail_at:
                raise _Crash()
            calls["n"] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(os, "rename", counting(real_rename))
    monkeypatch.setattr(os, "unlink", counting(real_unlink))
    try:
        plog.compact(now_ms=10_000, force=True)
        crashed = False
    except _Crash:
        crashed = True
    monkeypatch.setattr(os, "rename", real_rename)
    monkeypatch.setattr(os, "unlink", real_unlink)
    # Reopen as after a crash: whatever the files say.
    for seg in plog.segments:
        seg.close()
    reopened = PartitionLog(path, CFG)
    after = all_records(reopened)
    leftovers = [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert leftovers == []
    # Each segment is either the old one or its cleaned replacement: the latest
    # value of every key is there, offsets are unchanged, nothing is duplicated.
    by_offset = {o: (t, k, v) for o, t, k, v in old}
    assert [o for o, *_ in after] == sorted({o for o, *_ in after})
    for o, t, k, v in after:
        assert by_offset[o] == (t, k, v)
    assert {k: (o, v) for o, _t, k, v in after} == latest
    assert reopened.log_end_offset == 60
    if not crashed:
        assert len(after) == len(latest)


def test_dirty_ratio_triggers_cleaning_and_checkpoint_moves(tmp_path):
    cfg = LogConfig(segment_bytes=1_500, cleanup_policy="compact", min_cleanable_dirty_ratio=0.5)
    plog = PartitionLog(str(tmp_path / "d-0"), cfg)
    _fill(plog, 60)
    assert plog.dirty_ratio(now_ms=0) == 1.0
    stats = plog.compact(now_ms=0)
    assert stats is not None and stats.bytes_after < stats.bytes_before
    assert plog.cleaner_offset == plog.active_segment.base_offset
    assert plog.compact(now_ms=0) is None  # nothing dirty any more
    _fill(plog, 5, start=60)
    assert plog.dirty_ratio(now_ms=0) < 0.5 or plog.compact(now_ms=0) is not None


def test_min_compaction_lag_holds_back_recent_segments(tmp_path):
    cfg = LogConfig(segment_bytes=1_500, cleanup_policy="compact", min_compaction_lag_ms=500)
    plog = PartitionLog(str(tmp_path / "l-0"), cfg)
    _fill(plog, 60)  # timestamps 1000..1059
    assert plog.compact(now_ms=1_100, force=True) is None
    assert plog.compact(now_ms=10_000, force=True) is not None


def test_tombstones_get_a_delete_horizon_then_go(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), CFG)
    _fill(plog, 20)
    plog.append(R.build_batch([R.Record(None, 5_000, b"k1", None)]))
    plog.roll()
    plog.compact(now_ms=10_000, force=True)
    batches = [R.batch_header(b) for b in plog.batches()]
    tomb = [h for h in batches if h.has_delete_horizon]
    assert len(tomb) == 1 and tomb[0].delete_horizon_ms == 10_000 + 100
    assert (20, 5_000, b"k1", None) in all_records(plog)
    # The pending horizon makes the next pass eligible by itself.
    assert plog.compact(now_ms=10_050) is None
    assert plog.compact(now_ms=10_100) is not None
    assert all(k != b"k1" for _o, _t, k, _v in all_records(plog))


async def test_appends_and_reads_go_on_while_compaction_runs(tmp_path):
    cfg = LogConfig(segment_bytes=64_000, cleanup_policy="compact")
    plog = PartitionLog(str(tmp_path / "a-0"), cfg)
    value = b"x" * 200
    for i in range(40):
        recs = [R.Record(None, 1_000 + i, b"k%d" % (j % 300), value) for j in range(100)]
        plog.append(R.build_batch(recs, compression_type=1))
    plog.roll()
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(plog.compact_async(now_ms=10_000, force=True))
    worst = 0.0
    appended = 0
    last = loop.time()
    while not task.done():
        await asyncio.sleep(0)
        now = loop.time()
        worst = max(worst, now - last)
        last = now
        plog.append(R.build_batch([R.Record(None, 9_000, b"new", b"v")]))
        plog.read(plog.log_end_offset - 1, 1_000)
        appended += 1
    stats = await task
    assert stats is not None and stats.records_read == 4_000
    assert appended > 0
    # The loop kept turning: no step of the cleaner held it for long.
    assert worst < 0.1
    assert all_records(plog)[-1][2] == b"new"


def test_log_manager_opens_partitions_and_keeps_checkpoints(tmp_path):
    data_dir = str(tmp_path / "data")
    mgr = LogManager(data_dir, LogConfig(segment_bytes=1_000))
    mgr.open_all()
    a = mgr.get_or_create("orders", 0)
    b = mgr.get_or_create("__consumer_offsets", 3, CFG)
    _fill(a, 30)
    _fill(b, 30)
    b.compact(now_ms=5_000, force=True)
    with open(os.path.join(data_dir, "meta.properties"), "w") as f:
        f.write("version=1\n")
    os.makedirs(os.path.join(data_dir, "gone-1.abc-delete"))
    mgr.close()
    assert os.path.exists(os.path.join(data_dir, CLEAN_SHUTDOWN_FILE))
    rp = read_checkpoint(os.path.join(data_dir, "recovery-point-offset-checkpoint"))
    assert rp == {("orders", 0): 30, ("__consumer_offsets", 3): 30}
    cleaner = read_checkpoint(os.path.join(data_dir, "cleaner-offset-checkpoint"))
    assert ("__consumer_offsets", 3) in cleaner
    mgr = LogManager(
        data_dir,
        LogConfig(segment_bytes=1_000),
        config_for=lambda topic: CFG if topic.startswith("__") else None,
    )
    assert mgr.clean_shutdown
    opened = {(p.name) for p in mgr.open_all()}
    assert opened == {"orders-0", "__consumer_offsets-3"}
    assert not os.path.exists(os.path.join(data_dir, CLEAN_SHUTDOWN_FILE))
    assert mgr.get("orders", 0).log_end_offset == 30
    assert mgr.get("__consumer_offsets", 3).config.compact
    assert mgr.get("__consumer_offsets", 3).cleaner_offset == cleaner[("__consumer_offsets", 3)]
    mgr.delete("orders", 0)
    assert not os.path.exists(os.path.join(data_dir, "orders-0"))


def test_a_batch_its_codec_cannot_read_is_reported_as_corrupt(tmp_path):
    """A compressed batch whose data its codec refuses (the CRC is not checked
    when compacting) stops the pass as a corrupt batch, as a read reports it,
    not with the codec's own error."""
    from kcoord.protocol import compression
    plog = PartitionLog(str(tmp_path / "t-0"), CFG)
    batch = R.build_batch([R.Record(None, 1, b"k", b"v" * 50)] * 3, base_offset=0,
                          compression_type=compression.GZIP)
    plog.append(batch)
    _fill(plog, 20)
    plog.roll()
    # the first batch's compressed records overwritten on disk
    os.pwrite(plog.segments[0].fd, b"\x00" * (len(batch) - R.RECORD_BATCH_OVERHEAD),
              R.RECORD_BATCH_OVERHEAD)
    with pytest.raises(R.CorruptRecordError):
        plog.compact(force=True)
    plog.close()


@pytest.mark.parametrize("run", ["sync", "async"])
def test_the_cleaner_applies_retention_to_compacted_and_deleted_logs(tmp_path, run):
    """Kafka's log cleaner runs retention on every ``compact,delete`` log after
    each of its passes: expired records go at the cleaner's pace, not only at
    the retention check.  A compact-only log keeps them, and a delete-only log
    is left to the retention check."""
    mgr = LogManager(str(tmp_path / "data"), LogConfig(segment_bytes=1_500))
    mgr.open_all()
    both = LogConfig(segment_bytes=1_500, cleanup_policy="compact,delete", retention_ms=5_000)
    logs = {"both": mgr.get_or_create("both", 0, both),
            "compact": mgr.get_or_create("compact", 0, CFG),
            "delete": mgr.get_or_create("delete", 0, LogConfig(segment_bytes=1_500,
                                                                retention_ms=5_000))}
    for plog in logs.values():
        _fill(plog, 30, keys=30)  # timestamps 1,000 to 1,029: expired at 7,000
    # A compact-only log whose start DeleteRecords moved keeps the segments
    # below it until the retention check: Kafka's cleaner leaves such a log be.
    trimmed = mgr.get_or_create("trimmed", 0, CFG)
    _fill(trimmed, 30, keys=30)
    trimmed.advance_log_start_offset(20)
    below = len(trimmed.segments)
    assert trimmed.segments[0].base_offset == 0 and below > 1

    def cleaner_pass(now):
        if run == "sync":
            mgr.run_cleaner(now_ms=now)
        else:
            asyncio.run(mgr.run_cleaner_async(now_ms=now))

    cleaner_pass(2_000)  # compacts what is dirty; nothing has expired yet
    assert logs["both"].log_start_offset == 0
    cleaner_pass(7_000)  # nothing left to compact: retention alone
    assert {name: plog.log_start_offset for name, plog in logs.items()} == {
        "both": 30, "compact": 0, "delete": 0}
    assert logs["both"].log_end_offset == 30
    assert trimmed.segments[0].base_offset == 0
    assert mgr.run_retention(now_ms=7_000) >= 1  # the retention check takes them
    assert trimmed.segments[0].base_offset > 0
    # The new log start is checkpointed by the pass itself, not only at close.
    starts = read_checkpoint(str(tmp_path / "data" / "log-start-offset-checkpoint"))
    assert starts[("both", 0)] == 30
    mgr.close()
