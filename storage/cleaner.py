"""Log compaction (cleanup.policy=compact), after Kafka's LogCleaner.

1. The cleanable range is ``[first dirty, first uncleanable)``: the first dirty
   offset is the cleaner checkpoint (or the log start); the first uncleanable
   offset is the active segment's base, or the base of the first segment with
   records newer than ``min.compaction.lag.ms``.  A pass runs when
   ``dirty bytes / cleanable bytes >= min.cleanable.dirty.ratio``, or when a
   tombstone's delete horizon has passed.
2. An offset map (key -> last offset) is built over the dirty range.
3. Every cleanable segment is recopied, in groups of consecutive segments that
   fit in ``segment.bytes``, into one new segment per group named after its
   first base offset.  A record is kept iff it has a key, no later record has
   that key, and it is not a tombstone past its batch's delete horizon.
   Batches left untouched are copied byte for byte; changed ones are rebuilt
   with their codec, producer fields, base offset and last offset delta (so
   offsets never change and gaps appear).  A tombstone's batch gets attribute
   bit 6 and ``baseTimestamp = now + delete.retention.ms`` the first time it is
   recopied; a later pass after that time drops the tombstone.
4. Each group is swapped in crash-safely: ``.cleaned`` files are written and
   fsynced, renamed to ``.swap`` (the ``.log`` last: that rename is the commit
   point), the replaced segments are deleted and the ``.swap`` files renamed to
   their final names.  ``complete_interrupted_swaps`` (run when a log opens)
   deletes ``.cleaned`` files and finishes any committed swap, so a crash
   leaves the old segments or the new one, never a mix.

Deviation from Kafka, written down here: the last batch of every group is
kept, as an empty batch if all its records went, so that the cleaned
segment's last offset equals the group's and an interrupted swap knows
exactly which segments it replaces.  Kafka keeps empty batches for other
reasons (producer state); consumers skip them either way.

The work runs in a worker thread (``PartitionLog.compact_async``); the log's
lock is taken only to snapshot the segment list and to swap files, so appends
and reads go on meanwhile.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import structlog

from kcoord.protocol.records import (
    CorruptRecordError,
    DELETE_HORIZON_FLAG,
    LOG_APPEND_TIME,
    RECORD_BATCH_OVERHEAD,
    batch_header,
    batch_payload,
    build_batch,
    decode_records_fast,
    empty_batch,
    record_keys,
)
from kcoord.storage import producer_load
from kcoord.storage.files import fsync_dir
from kcoord.storage.layout import SEGMENT_FILE, SWAP_FILE, is_segment_file, segment_name
from kcoord.storage.segment import LogSegment

log = structlog.get_logger("kcoord.storage.cleaner")



@dataclass(slots=True)
class CleanableRange:
    first_dirty: int
    first_uncleanable: int
    segments: list  # every cleanable segment, clean ones first
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanStats:
    bytes_before: int
    bytes_after: int
    segments_before: int
    segments_after: int
    records_read: int
    records_kept: int
    first_dirty: int
    first_uncleanable: int
    seconds: float


def cleanable_range(plog, now: int) -> CleanableRange | None:
    """The cleanable range of ``plog`` (call with its lock held)."""
    segments = plog.segments[:-1]  # never the active segment
    if not segments:
        return None
    lag = plog.config.min_compaction_lag_ms
    first_uncleanable = plog.segments[-1].base_offset
    # An open transaction's data may still be aborted: nothing from its first
    # offset on is cleaned (LogCleanerManager's first unstable offset).
    unstable = plog.producers.first_unstable_offset() if plog.producers_loaded else None
    usable = []
    for seg in segments:
        if lag > 0 and seg.max_timestamp >= 0 and seg.max_timestamp > now - lag:
            first_uncleanable = seg.base_offset
            break
        if unstable is not None and seg.next_offset > unstable:
            first_uncleanable = seg.base_offset
            break
        usable.append(seg)
    if not usable:
        return None
    first_dirty = max(plog.cleaner_offset or 0, plog.log_start_offset)
    clean = sum(s.size for s in usable if s.next_offset <= first_dirty)
    dirty = sum(s.size for s in usable if s.next_offset > first_dirty)
    return CleanableRange(first_dirty, first_uncleanable, usable, clean, dirty)


def _compaction_lag_exceeded(plog, rng: CleanableRange, now: int) -> bool:
    """LogCleanerManager.maxCompactionDelay: a dirty segment whose first batch is
    older than max.compaction.lag.ms is cleaned whatever the dirty ratio."""
    stamps = [s.first_batch_timestamp for s in rng.segments
              if s.next_offset > rng.first_dirty and s.first_batch_timestamp
              and s.first_batch_timestamp > 0]
    return bool(stamps) and min(stamps) < now - max(plog.config.max_compaction_lag_ms, 0)


def clean_log(plog, now: int, *, force: bool = False) -> CleanStats | None:
    started = time.monotonic()
    if plog.config.compact and not plog.producers_loaded:
        producer_load.scan(plog)  # open transactions bound the cleanable range
    with plog._lock:
        plog._check_open()
        if not plog.config.compact:
            return None
        rng = cleanable_range(plog, now)
        if rng is None:
            return None
        horizon_due = (
            plog.earliest_delete_horizon is not None and plog.earliest_delete_horizon <= now
        )
        if not force and not horizon_due and not _compaction_lag_exceeded(plog, rng, now) and (
            rng.dirty_bytes == 0 or rng.dirty_ratio < plog.config.min_cleanable_dirty_ratio
        ):
            return None
        segments = list(rng.segments)
        aborted = _Aborted(plog.producers.aborted)
    # Everything below runs without the lock: non-active segments never change
    # except by retention, truncation or another cleaner, which the swap detects.
    offset_map = _build_offset_map(segments, rng.first_dirty, aborted)
    groups = _group_segments(segments, plog.config.segment_bytes)
    stats = CleanStats(
        bytes_before=sum(s.size for s in segments),
        bytes_after=0,
        segments_before=len(segments),
        segments_after=0,
        records_read=0,
        records_kept=0,
        first_dirty=rng.first_dirty,
        first_uncleanable=rng.first_uncleanable,
        seconds=0.0,
    )
    earliest_horizon = None
    for group in groups:
        if all(s.size == 0 for s in group):
            continue
        cleaned, horizon = _clean_group(plog, group, offset_map, now, stats, aborted)
        if horizon is not None and (earliest_horizon is None or horizon < earliest_horizon):
            earliest_horizon = horizon
        if not _swap_in(plog, group, cleaned):
            log.info("compaction_aborted", log=plog.name, reason="segments changed meanwhile")
            return None
        stats.bytes_after += cleaned.size
        stats.segments_after += 1
    with plog._lock:
        plog.cleaner_offset = rng.first_uncleanable
        plog.earliest_delete_horizon = earliest_horizon
    stats.seconds = time.monotonic() - started
    log.info(
        "log_compacted",
        log=plog.name,
        bytes_before=stats.bytes_before,
        bytes_after=stats.bytes_after,
        segments_before=stats.segments_before,
        segments_after=stats.segments_after,
        records_read=stats.records_read,
        records_kept=stats.records_kept,
        first_dirty=stats.first_dirty,
        first_uncleanable=stats.first_uncleanable,
        seconds=round(stats.seconds, 4),
    )
    return stats


class _Aborted:
    """Which transactional batches were aborted, from the aborted transactions
    known when the cleaning began (their data is dropped, never kept as a key's
    latest value: LogCleaner's abortedTransactions)."""

    def __init__(self, aborted) -> None:
        self.by_producer: dict[int, list[tuple[int, int]]] = {}
        self.by_marker: dict[int, tuple[int, int, int, int]] = {}
        for txn in list(aborted):
            self.by_producer.setdefault(txn.producer_id, []).append(
                (txn.first_offset, txn.last_offset))
            self.by_marker[txn.last_offset] = (txn.producer_id, txn.first_offset,
                                               txn.last_offset, txn.last_stable_offset)

    def __call__(self, header) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        ranges = self.by_producer.get(header.producer_id)
        return bool(ranges) and any(first <= header.base_offset <= last
                                    for first, last in ranges)


def _payload(data: bytes, header) -> bytes:
    """The decompressed records of a batch; a codec's failure is a corrupt batch,
    as ``decode_batch`` reports it."""
    try:
        return batch_payload(data, header=header)
    except CorruptRecordError:
        raise
    except (ValueError, OSError) as exc:
        raise CorruptRecordError(f"undecodable records: {exc}") from exc


def _build_offset_map(segments, first_dirty: int, aborted=None) -> dict:
    offset_map: dict = {}
    for seg in segments:
        if seg.next_offset <= first_dirty:
            continue
        for _pos, header, data in seg.scan(0):
            if header.is_control or header.last_offset < first_dirty:
                continue
            if aborted is not None and aborted(header):
                continue
            base = header.base_offset
            payload = _payload(data, header)
            for delta, key, _tombstone in record_keys(payload, header.records_count):
                if key is not None and base + delta >= first_dirty:
                    offset_map[key] = base + delta
    return offset_map


def _group_segments(segments, max_bytes: int) -> list[list]:
    groups: list[list] = []
    current: list = []
    size = 0
    for seg in segments:
        if current and size + seg.size > max_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(seg)
        size += seg.size
    if current:
        groups.append(current)
    return groups


def _clean_group(plog, group, offset_map, now: int, stats: CleanStats, aborted=None):
    directory = plog.directory
    base = group[0].base_offset
    for suffix in (".log.cleaned", ".index.cleaned", ".timeindex.cleaned", ".txnindex.cleaned"):
        try:
            os.unlink(os.path.join(directory, segment_name(base) + suffix))
        except FileNotFoundError:
            pass
    out = LogSegment(
        directory,
        base,
        index_interval_bytes=plog.config.index_interval_bytes,
        suffix=".cleaned",
    )
    try:
        return _fill_cleaned(plog, group, offset_map, now, stats, out, aborted)
    except BaseException:
        out.delete()  # e.g. the log was deleted under the cleaner: leave nothing behind
        raise


def _fill_cleaned(plog, group, offset_map, now: int, stats: CleanStats, out: LogSegment,
                  aborted=None):
    batches = [(seg, pos, header, data) for seg in group for pos, header, data in seg.scan(0)]
    horizon_min = None
    for n, (_seg, _pos, header, data) in enumerate(batches):
        is_last = n == len(batches) - 1
        if header.is_control:
            # Markers are kept: they are small, and a read_uncommitted reader or
            # a replay still learns from them where a transaction ended; an
            # abort's entry in the transaction index goes with it.
            out.append(data, header.last_offset, header.max_timestamp, header.last_offset)
            txn = aborted.by_marker.get(header.base_offset) if aborted is not None else None
            if txn is not None:
                out.txn_index.append(*txn)
            continue
        # Decided on keys and offsets alone; the records are decoded only when
        # the batch is rebuilt from some of them.
        base = header.base_offset
        payload = _payload(data, header)
        keys = record_keys(payload, header.records_count)
        stats.records_read += len(keys)
        horizon = header.delete_horizon_ms
        kept: list[int] = []  # indexes into keys
        has_tombstones = False
        if not (aborted is not None and aborted(header)):  # an aborted transaction's data goes
            get = offset_map.get
            for i, (delta, key, tombstone) in enumerate(keys):
                if key is None:
                    continue
                latest = get(key)
                if latest is not None and base + delta < latest:
                    continue
                if tombstone:
                    if horizon is not None and now >= horizon:
                        continue
                    has_tombstones = True
                kept.append(i)
        stats.records_kept += len(kept)
        if len(kept) == len(keys) and (not has_tombstones or horizon is not None):
            out.append(data, header.last_offset, header.max_timestamp, header.last_offset)
            if has_tombstones:
                horizon_min = _min(horizon_min, horizon)
            continue
        if not kept:
            if is_last:
                new = empty_batch(
                    base_offset=header.base_offset,
                    last_offset_delta=header.last_offset_delta,
                    timestamp=header.max_timestamp,
                    attributes=header.attributes & ~DELETE_HORIZON_FLAG,
                    producer_id=header.producer_id,
                    producer_epoch=header.producer_epoch,
                    base_sequence=header.base_sequence,
                    partition_leader_epoch=header.partition_leader_epoch,
                )
                out.append(new, header.last_offset, header.max_timestamp, header.last_offset)
            continue
        new_horizon = None
        if has_tombstones:
            new_horizon = horizon if horizon is not None else now + plog.config.delete_retention_ms
            horizon_min = _min(horizon_min, new_horizon)
        log_append = header.timestamp_type == LOG_APPEND_TIME
        records = decode_records_fast(payload, header.records_count, base,
                                      header.base_timestamp,
                                      header.max_timestamp if log_append else None)
        kept_records = [records[i] for i in kept]
        new = build_batch(
            kept_records,
            base_offset=header.base_offset,
            compression_type=header.compression,
            timestamp_type=header.timestamp_type,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            transactional=header.is_transactional,
            partition_leader_epoch=header.partition_leader_epoch,
            last_offset_delta=header.last_offset_delta,
            max_timestamp=header.max_timestamp if log_append else None,
            delete_horizon_ms=new_horizon,
        )
        max_ts = header.max_timestamp if log_append else max(r.timestamp for r in kept_records)
        out.append(new, header.last_offset, max_ts, header.last_offset)
    out.on_become_inactive()
    out.flush()
    return out, horizon_min


def _min(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


class _Swap:
    """The swap of a cleaned segment for the segments it replaces, in the three
    steps ``PartitionLog.replace_segments`` runs: ``prepare`` and ``sync`` wait
    for the disk without the partition lock, ``commit`` only renames."""

    def __init__(self, directory: str, group: list[LogSegment], cleaned: LogSegment):
        self.directory = directory
        self.group = group
        self.cleaned = cleaned
        self.prefix = os.path.join(directory, segment_name(cleaned.base_offset))

    def prepare(self) -> None:
        # .cleaned -> .swap, the .log last: once it is renamed and the folder
        # synced the swap is committed (a crash from here on finishes it).
        cleaned, prefix = self.cleaned, self.prefix
        cleaned.offset_index.rename(prefix + ".index.swap")
        cleaned.time_index.rename(prefix + ".timeindex.swap")
        cleaned.txn_index.rename(prefix + ".txnindex.swap")
        os.rename(cleaned.log_path, prefix + ".log.swap")
        cleaned.log_path = prefix + ".log.swap"
        fsync_dir(self.directory)

    def commit(self) -> list[str]:
        """The replaced segments' files renamed aside (``.deleted``, removed at
        ``sync`` or by the next start), the ``.swap`` files to their names."""
        doomed = []
        for seg in self.group:
            seg.close()
            for path in seg.paths():
                if os.path.exists(path):
                    os.rename(path, path + ".deleted")
                    doomed.append(path + ".deleted")
        cleaned, prefix = self.cleaned, self.prefix
        cleaned.offset_index.rename(prefix + ".index")
        cleaned.time_index.rename(prefix + ".timeindex")
        cleaned.txn_index.rename(prefix + ".txnindex")
        os.rename(cleaned.log_path, prefix + ".log")
        cleaned.log_path = prefix + ".log"
        cleaned.suffix = ""
        return doomed

    def sync(self, doomed: list[str]) -> None:
        fsync_dir(self.directory)
        for path in doomed:
            os.unlink(path)


def _swap_in(plog, group, cleaned: LogSegment) -> bool:
    """Replace ``group`` by ``cleaned`` in the folder and in the log; False if the log moved on."""
    if plog.replace_segments(group, cleaned, _Swap(plog.directory, group, cleaned)):
        return True
    cleaned.delete()
    return False


def complete_interrupted_swaps(directory: str) -> None:
    """Finish or roll back compaction swaps cut short by a crash (LogLoader, step 1).

    ``.cleaned`` files were never committed: delete them.  A ``.log.swap`` is a
    committed cleaned segment: delete the segments it replaces (those whose base
    offset lies within its offsets), then give it its final name, with its
    ``.txnindex.swap`` if it has one; its other indexes are rebuilt when the
    segment opens.  Stray index ``.swap`` files without their
    ``.log.swap`` and ``.deleted`` files are removed.
    """
    names = os.listdir(directory)
    for fname in names:
        if fname.endswith(".cleaned") or fname.endswith(".deleted"):
            os.unlink(os.path.join(directory, fname))
    names = os.listdir(directory)
    swapped_logs = sorted(
        int(m.group(1)) for m in map(SWAP_FILE.match, names) if m and m.group(2) == "log"
    )
    for fname in names:
        m = SWAP_FILE.match(fname)
        if m and m.group(2) != "log" and int(m.group(1)) not in swapped_logs:
            os.unlink(os.path.join(directory, fname))
    for base in swapped_logs:
        swap_path = os.path.join(directory, segment_name(base) + ".log.swap")
        last = _last_offset(swap_path, base)
        for fname in os.listdir(directory):
            m = SEGMENT_FILE.match(fname)
            if m and is_segment_file(fname) and base <= int(m.group(1)) <= last:
                os.unlink(os.path.join(directory, fname))
        for suffix in (".index.swap", ".timeindex.swap"):
            try:
                os.unlink(os.path.join(directory, segment_name(base) + suffix))
            except FileNotFoundError:
                pass
        txn_swap = os.path.join(directory, segment_name(base) + ".txnindex.swap")
        if os.path.exists(txn_swap):  # kept: the log alone cannot say what was aborted
            os.rename(txn_swap, os.path.join(directory, segment_name(base) + ".txnindex"))
        os.rename(swap_path, os.path.join(directory, segment_name(base) + ".log"))
        log.warning("compaction_swap_completed", directory=directory, segment=segment_name(base))


def _last_offset(path: str, base: int) -> int:
    """The last offset of the complete batches in a segment file."""
    last = base
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = 0
        while pos + RECORD_BATCH_OVERHEAD <= size:
            header = batch_header(os.pread(fd, RECORD_BATCH_OVERHEAD, pos))
            if header.size < RECORD_BATCH_OVERHEAD or pos + header.size > size:
                break
            last = header.last_offset
            pos += header.size
    finally:
        os.close(fd)
    return last
