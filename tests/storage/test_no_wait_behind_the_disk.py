"""Appends and reads, which the event loop makes, never wait for a lock that a
worker holds while it waits for the disk.  The cleaner's swap held the
partition lock across two directory fsyncs, and retention across unlinking
whole segments, so a commit on the loop stalled every client for as long as
the disk took.  Now only renames and the in-memory swap hold the partition
lock; the fsyncs and unlinks run beside it, serialized by a second lock that
appends and reads never take.  Each test holds the slow step in a worker and
checks that an append and a read finish meanwhile, then that the result is
whole."""

from __future__ import annotations

import threading

from kcoord.protocol import records as R
from kcoord.storage import LogConfig, PartitionLog, cleaner, segment
from tests.storage.helpers import all_records

CFG = LogConfig(segment_bytes=1_500, cleanup_policy="compact", delete_retention_ms=100)


def _fill(plog, n, keys=5, start=0):
    for i in range(start, start + n):
        plog.append(R.build_batch([R.Record(None, 1_000 + i, b"k%d" % (i % keys), b"v%d" % i * 10)]))


class Held:
    """A stand-in for a slow disk call: call number ``which`` (from 0) waits
    until released; the others go straight through."""

    def __init__(self, real, which: int = 0):
        self.real = real
        self.which = which
        self.calls = 0
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls - 1 == self.which:
            self.entered.set()
            assert self.release.wait(30)
        return self.real(*args, **kwargs)


def _meanwhile(fn, timeout: float = 10):
    """Run ``fn`` in a thread; its result, or fail if it did not finish in time."""
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", fn()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "blocked behind the slow disk call"
    return out["value"]


def _in_worker(fn):
    errors = []

    def run():
        try:
            fn()
        except BaseException as exc:  # surfaced to the test below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def test_appends_and_reads_go_on_while_a_compaction_swap_syncs_the_folder(tmp_path, monkeypatch):
    plog = PartitionLog(str(tmp_path / "c-0"), CFG)
    _fill(plog, 60)
    plog.roll()
    before = all_records(plog)
    for step in (0, 1):  # the fsync that commits the swap, then the one that finishes it
        held = Held(cleaner.fsync_dir, which=step)
        monkeypatch.setattr(cleaner, "fsync_dir", held)
        _fill(plog, 30, start=60 + 30 * step)
        plog.roll()
        worker, errors = _in_worker(lambda: plog.compact(now_ms=10_000, force=True))
        assert held.entered.wait(10)
        end = plog.log_end_offset
        info = _meanwhile(lambda: plog.append(R.build_batch([R.Record(None, 5_000, b"new", b"x")])))
        assert info.first_offset == end
        assert _meanwhile(lambda: plog.read(0, 1 << 20))
        held.release.set()
        worker.join(10)
        assert not worker.is_alive() and errors == []
        assert held.calls >= 2  # the swap synced its folder twice
    after = {k: v for _o, _t, k, v in all_records(plog)}
    assert after[b"new"] == b"x"
    assert set(after) == {k for _o, _t, k, _v in before} | {b"new"}
    plog.close()


def test_appends_go_on_while_retention_removes_segment_files(tmp_path, monkeypatch):
    config = LogConfig(segment_bytes=1_500, retention_ms=1_000)
    plog = PartitionLog(str(tmp_path / "r-0"), config)
    _fill(plog, 40, keys=40)
    plog.roll()
    doomed = len(plog.segments) - 1
    held = Held(segment.LogSegment.delete)
    monkeypatch.setattr(segment.LogSegment, "delete", lambda seg: held(seg))
    results = []
    worker, errors = _in_worker(lambda: results.append(plog.delete_old_segments(now_ms=10**9)))
    assert held.entered.wait(10)
    end = plog.log_end_offset
    info = _meanwhile(lambda: plog.append(R.build_batch([R.Record(None, 10**9, b"k", b"v")])))
    assert info.first_offset == end
    held.release.set()
    worker.join(10)
    assert not worker.is_alive() and errors == []
    assert results == [doomed]
    assert [r[0] for r in all_records(plog)] == [end]
    plog.close()


def test_a_topic_deleted_during_a_swap_is_skipped_not_a_disk_failure(tmp_path, monkeypatch):
    """The swap's fsyncs run without the partition lock, so a topic deletion
    (which closes the log's files and removes its folder) can come in between:
    the swap gives up as for any log deleted during a maintenance pass, and the
    log dir is not taken offline."""
    import shutil

    from kcoord.storage.errors import LogClosedError

    failures = []
    for step in (0, 1):  # deleted while the swap commits, then while it finishes
        path = tmp_path / f"d{step}-0"
        plog = PartitionLog(str(path), CFG, on_io_error=lambda log, exc: failures.append(exc))
        _fill(plog, 60)
        plog.roll()
        held = Held(cleaner.fsync_dir, which=step)
        monkeypatch.setattr(cleaner, "fsync_dir", held)
        worker, errors = _in_worker(lambda: plog.compact(now_ms=10_000, force=True))
        assert held.entered.wait(10)
        _meanwhile(plog.close_files)
        shutil.rmtree(path)
        held.release.set()
        worker.join(10)
        assert not worker.is_alive()
        assert [type(e) for e in errors] in ([LogClosedError], [])
        assert not plog.offline
    assert failures == []
