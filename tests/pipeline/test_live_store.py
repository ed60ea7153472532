"""Reading a store the broker rewrites between planning and reading, without Spark.

Splits are planned in Spark's driver and read later by its workers.  Meanwhile
the broker's cleaner swaps merged segments in (a new file under the first
segment's name, the others deleted), retention deletes old segments and
truncation cuts the log.  Every planned split is read after (or around) such a
rewrite: no read fails, and every record still in the log is read (records the
broker removed may be missing; a record read twice is counted once by the jobs).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from kcoord.pipeline import rows, segments
from kcoord.protocol import group_records as G
from kcoord.protocol.records import Record, build_batch, decode_batch
from kcoord.storage.config import LogConfig
from kcoord.storage.log import PartitionLog
from kcoord.storage.validator import AppendOrigin

T0 = 1_700_000_000_000
GROUPS = 4
TOPIC_PARTITIONS = 6


def _commits(first: int, count: int) -> list[Record]:
    """``count`` offset commits: every other one of a key of its own (kept by
    compaction wherever it is), the others cycling over a few keys committed
    again and again (compaction keeps the latest of each)."""
    out = []
    for i in range(first, first + count):
        if i % 2:
            key = G.offset_commit_key(f"g{i % GROUPS}", "orders", (i // GROUPS) % TOPIC_PARTITIONS)
        else:
            key = G.offset_commit_key(f"once-{i}", "orders", 0)
        out.append(Record(None, T0 + i, key, G.offset_commit_value(i, "m" * (i % 23), T0 + i)))
    return out


@pytest.fixture
def opened():
    """The logs a test opens, closed after it."""
    logs: list[PartitionLog] = []
    yield logs
    for log in logs:
        log.close()


def _offsets_log(data_dir: Path, opened: list) -> PartitionLog:
    """An open ``__consumer_offsets-0`` log (cleanup.policy=compact) of ten rolled
    segments of twelve batches each, and an active one."""
    cfg = LogConfig(cleanup_policy=("compact",), segment_bytes=12_000, index_interval_bytes=256)
    log = PartitionLog(str(data_dir / "__consumer_offsets-0"), cfg)
    opened.append(log)
    n = 0
    for _ in range(10):
        for _ in range(12):
            log.append(build_batch(_commits(n, 5)), origin=AppendOrigin.CLIENT, now_ms=T0)
            n += 5
        log.roll()
    log.append(build_batch(_commits(n, 5)), origin=AppendOrigin.CLIENT, now_ms=T0)
    return log


def _write(log: PartitionLog, batches: int, key: bytes, size: int) -> None:
    """``batches`` batches of 5 records (keys ``<key><batch>``, ``size`` random bytes
    each), a new segment after every sixth."""
    for b in range(batches):
        log.append(build_batch([Record(None, T0, key + b"%d" % b, os.urandom(size))
                                for _ in range(5)]),
                   origin=AppendOrigin.CLIENT, now_ms=T0)
        if b % 6 == 5:
            log.roll()


def _in_log(log: PartitionLog) -> set[tuple[int, bytes]]:
    """(offset, key) of every record in the log's segments, read by the storage engine."""
    out = set()
    for seg in log.segments:
        for _pos, _header, data in seg.scan(0):
            out.update((r.offset, r.key) for r in decode_batch(data, verify=False).records)
    return out


def _read(splits) -> set[tuple[int, bytes]]:
    """(offset, key) of every offset commit the splits read, the key re-encoded
    from the decoded group, topic and partition."""
    got = set()
    for split in splits:
        batches = list(rows.read("offsets", split))
        table = pa.Table.from_batches(batches, schema=rows.OFFSETS).to_pylist() if batches else []
        for r in table:
            assert r["record_type"] == "offset_commit"
            got.add((r["source_offset"],
                     G.offset_commit_key(r["group"], r["topic"], r["partition"])))
    return got


def _log_files(log: PartitionLog) -> dict[str, int]:
    return {name: os.stat(os.path.join(log.directory, name)).st_ino
            for name in os.listdir(log.directory) if name.endswith(".log")}


def _plan(data_dir: Path, split_bytes: int):
    splits = segments.plan_splits([str(data_dir)], {segments.OFFSETS_TOPIC}, split_bytes)
    files = {s.segment.path for s in splits}
    assert len(files) == 11 and len(splits) > 2 * len(files)  # segments cut into several splits
    return splits


def test_splits_planned_before_the_cleaner_merged_their_segments_read_every_record_left(
        tmp_path, opened):
    log = _offsets_log(tmp_path, opened)
    written = _in_log(log)
    splits = _plan(tmp_path, split_bytes=1500)
    before = _log_files(log)
    stats = log.compact(T0, force=True)
    # The cleaner merged groups of segments into new files under the first one's name
    # and deleted the others.
    after = _log_files(log)
    assert stats is not None and stats.segments_after < stats.segments_before
    assert len(after) < len(before)
    assert any(before[name] != inode for name, inode in after.items())
    kept = _in_log(log)
    assert kept < written  # the cleaner removed superseded commits
    got = _read(splits)
    assert kept <= got <= written


@pytest.mark.parametrize("first_read", [0, 1])
def test_splits_read_some_before_and_some_after_the_cleaner_swapped_miss_nothing(
        tmp_path, first_read, opened):
    """Spark's workers read splits at different times: one split of a segment
    before the swap, the next after it, or a segment read whole before it was
    merged away into the file of the segment before, read after."""
    log = _offsets_log(tmp_path, opened)
    written = _in_log(log)
    splits = _plan(tmp_path, split_bytes=1500)
    early = [s for i, s in enumerate(splits) if i % 2 == first_read]
    late = [s for i, s in enumerate(splits) if i % 2 != first_read]
    got = _read(early)
    assert log.compact(T0, force=True) is not None
    got |= _read(late)
    assert _in_log(log) <= got <= written


def test_two_cleaner_passes_with_appends_between_planning_and_reading(tmp_path, opened):
    log = _offsets_log(tmp_path, opened)
    written = _in_log(log)
    splits = _plan(tmp_path, split_bytes=1500)
    got = _read(splits[: len(splits) // 3])
    assert log.compact(T0, force=True) is not None
    got |= _read(splits[len(splits) // 3: 2 * len(splits) // 3])
    end = log.log_end_offset
    for n in range(3):  # the broker goes on writing, rolls, and cleans again
        log.append(build_batch(_commits(end + 5 * n, 5)), origin=AppendOrigin.CLIENT, now_ms=T0)
        log.roll()
    assert log.compact(T0, force=True) is not None
    got |= _read(splits[2 * len(splits) // 3:])
    planned_and_kept = {(o, k) for o, k in _in_log(log) if o < end}
    assert planned_and_kept <= got
    assert {(o, k) for o, k in got if o < end} <= written


def test_segments_deleted_by_retention_after_planning_read_nothing_and_the_rest_is_read(
        tmp_path, opened):
    cfg = LogConfig(segment_bytes=12_000, index_interval_bytes=256, retention_bytes=30_000)
    log = PartitionLog(str(tmp_path / "orders-0"), cfg)
    opened.append(log)
    _write(log, 60, b"k", 200)
    offsets = {o for o, _k in _in_log(log)}
    splits = segments.plan_splits([str(tmp_path)], None, 2000)
    assert len({s.segment.path for s in splits}) == 11
    assert log.delete_old_segments(T0) > 0
    left = {o for o, _k in _in_log(log)}
    assert left and min(left) > 0
    stats = {}
    got = [r["offset"] for s in splits for b in rows.read("records", s, stats)
           for r in b.to_pylist()]
    assert left <= set(got) <= offsets
    assert len(got) == len(set(got))  # nothing read twice here: the files left are the planned ones
    assert stats == {}


def test_a_log_truncated_and_written_again_after_planning(tmp_path, opened):
    cfg = LogConfig(segment_bytes=12_000, index_interval_bytes=256)
    log = PartitionLog(str(tmp_path / "orders-0"), cfg)
    opened.append(log)
    _write(log, 60, b"old", 200)
    old = _in_log(log)
    splits = segments.plan_splits([str(tmp_path)], None, 2000)
    cut = 137  # inside the fifth segment: the later segments are deleted, that one cut
    log.truncate_to(cut)
    _write(log, 20, b"new", 150)  # a new leader's records take the offsets from the cut on
    new = _in_log(log)
    got = {(r["offset"], r["key"]) for s in splits for b in rows.read("records", s)
           for r in b.to_pylist()}
    assert {(o, k) for o, k in new if o < cut} <= got  # what the truncation left
    assert got <= old | new



def test_reads_and_planning_while_a_swap_is_half_done(tmp_path, monkeypatch, opened):
    """The cleaner renames the merged file to ``<first>.log.swap`` and renames the
    segments it replaces aside (``.deleted``) before renaming it to
    ``<first>.log``: reads and planning in between find every record in the
    ``.swap`` file."""
    log = _offsets_log(tmp_path, opened)
    written = _in_log(log)
    splits = _plan(tmp_path, split_bytes=1500)
    rename = os.rename
    at_pause: list[set] = []
    planned_at_pause = []

    def pausing_rename(src, dst):
        if str(src).endswith(".log.swap"):
            names = os.listdir(os.path.dirname(src))
            # The old first segment is already set aside: only the .swap file holds its records.
            assert os.path.basename(dst) not in names
            assert os.path.basename(dst) + ".deleted" in names
            plan = segments.plan_splits([str(tmp_path)], {segments.OFFSETS_TOPIC}, 1500)
            planned_at_pause.append(plan)
            at_pause.append(_read(splits))
            at_pause.append(_read(plan))
        rename(src, dst)

    monkeypatch.setattr(os, "rename", pausing_rename)
    stats = log.compact(T0, force=True)
    monkeypatch.undo()
    assert stats is not None and stats.segments_after < stats.segments_before
    assert len(planned_at_pause) == stats.segments_after > 1
    kept = _in_log(log)
    for got in at_pause:
        assert kept <= got <= written
    for plan in planned_at_pause:  # planned in the middle of a swap, read after it
        assert kept <= _read(plan) <= written


def test_a_listing_that_missed_a_file_renamed_meanwhile_is_taken_again(
        tmp_path, monkeypatch, opened):
    """A folder listed while a file in it is renamed may show it under neither
    name: a read by offsets lists the folder again after opening its files."""
    log = _offsets_log(tmp_path, opened)
    splits = _plan(tmp_path, split_bytes=1500)
    assert log.compact(T0, force=True) is not None
    kept = _in_log(log)
    first = min(n for n in os.listdir(log.directory) if n.endswith(".log"))
    listdir = os.listdir
    missed = []

    def racing_listdir(path):
        names = listdir(path)
        if not missed and first in names:
            missed.append(first)
            return [n for n in names if n != first]
        return names

    monkeypatch.setattr(os, "listdir", racing_listdir)
    got = _read(splits)
    monkeypatch.undo()
    assert missed and kept <= got
