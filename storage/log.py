"""``PartitionLog``: one topic partition as a folder of Kafka segments.

The synchronous core (``append``, ``read``, ``offset_for_timestamp``, ``roll``,
``delete_old_segments``, ``truncate_to``, ``replace_segments``) does the file
work and is what unit tests drive.  Around it, each concern lives in a module
of its own:

* ``storage.loader``: opening a folder and recovery after a crash (LogLoader);
* ``storage.flush``: unflushed segments, the recovery point and the three
  fsync policies (``append_async`` waits as the policy requires);
* ``storage.retention``: which segments retention deletes, and their deletion;
* ``storage.cleaner``: compaction, which swaps its cleaned segments in with
  ``replace_segments``.

A ``threading.RLock`` guards the segment list, because compaction, retention
and flushes run in worker threads while appends and reads go on.  It is held
for in-memory changes and quick file work only: the steps of a structural
change that wait for the disk (a compaction swap's directory fsyncs,
retention's unlinks) run outside it, serialized by a second lock that appends
and reads never take, so the event loop never waits for the disk behind a
worker.

An I/O error (EIO, ENOSPC, ...) while writing takes the log offline, as
Kafka's LogDirFailureChannel does: ``io_failed`` reports it once to
``on_io_error`` (the log manager takes the whole log dir offline), and every
later operation raises ``KafkaStorageError``.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable, Iterator

import structlog

from kcoord.protocol import compression
from kcoord.protocol.records import (
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    Record,
    CorruptRecordError,
    batch_header,
    build_batch,
    build_control_batch,
    iter_entries,
    validate_batch,
)
from kcoord.storage.config import LogConfig
from kcoord.storage.errors import CorruptLogError, KafkaStorageError, LogClosedError, OffsetOutOfRangeError
from kcoord.storage.files import fsync_dir
from kcoord.storage.flush import LogFlusher
from kcoord.storage.loader import load_segments
from kcoord.storage import producer_load, producer_snapshot
from kcoord.storage.producer_state import ABORT, COMMIT, ProducerState
from kcoord.storage.layout import segment_name
from kcoord.storage.segment import INT32_MAX, LogSegment
from kcoord.storage.validator import (
    AppendOrigin,
    ValidatedAppend,
    own_batch,
    rebase,
    validate_and_assign,
)

log = structlog.get_logger("kcoord.storage")
# ``append_async`` validates appends at least this large in a worker thread: a
# 1 MB batch of 10,000 records takes about 20 ms to check, which would hold up
# every other client on the event loop.  Unless the batch is cheap to check and
# write: one uncompressed batch kept as it is (no recompression), of at most
# ``INLINE_RECORDS`` records and ``INLINE_BYTES`` bytes (10 KiB messages: about
# 0.2 ms to check, 0.3 ms to write a megabyte), where the hop to a worker thread
# and back costs more than the work, and much more when other clients keep the
# event loop busy (the worker then waits for the interpreter lock).
VALIDATE_IN_THREAD_BYTES = 64 * 1024
INLINE_RECORDS = 1000
INLINE_BYTES = 2 << 20
_jitter = random.Random()


def _private(records, owned: bool):
    """The buffer validation may rewrite (offsets, epoch, timestamps): ``records``
    itself when the caller gave it away and it is writable, else a copy."""
    if owned and isinstance(records, (bytearray, memoryview)) and not (
            isinstance(records, memoryview) and records.readonly):
        return records
    return bytearray(records)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    size: int
    duplicate: bool = False  # an idempotent producer's retry: nothing was written


@dataclass(slots=True)
class TimestampOffset:
    timestamp: int
    offset: int


class PartitionLog:
    """A partition's segments, offsets and the operations Kafka's UnifiedLog offers."""

    def __init__(
        self,
        directory: str,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        cleaner_offset: int | None = None,
        clean_shutdown: bool = False,
        clock: Callable[[], int] = wall_clock_ms,
        on_io_error: Callable[["PartitionLog", OSError], None] | None = None,
    ):
        self.directory = directory
        self._name: str | None = None  # the folder's name, ``name``
        self.config = config or LogConfig()
        self.clock = clock
        self.on_io_error = on_io_error
        self._lock = threading.RLock()
        # Held across a structural change whose file work waits for the disk (a
        # compaction swap's directory fsyncs, retention's unlinks), so that such
        # changes never interleave, while the partition lock above, which the
        # event loop takes to append and read, is held only for the in-memory
        # part.  Order: ``_structure`` before ``_lock``, never the other way.
        self._structure = threading.RLock()
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.recovery_point = recovery_point
        self.cleaner_offset = cleaner_offset
        self.closed = False
        self.offline = False
        self.flusher = LogFlusher(self)
        self.earliest_delete_horizon: int | None = None
        # Idempotent producers (storage.producer_state), rebuilt from the batch
        # headers on first need after an open (``load_producer_state``).
        self.producers = ProducerState()
        self.producers_loaded = False
        self._producer_load = None
        if not os.path.isdir(directory):
            os.makedirs(directory, exist_ok=True)
        self._load(clean_shutdown, log_start_offset)
        self.producers_loaded = self.segments[-1].size == 0 and len(self.segments) == 1
        # The producer state a clean shutdown left (its snapshot at the log end
        # offset) spares the replay of every batch header.
        snapshot = producer_snapshot.load(directory, self.log_end_offset, self.segments,
                                          self.log_start_offset)
        if snapshot is not None and not self.producers_loaded:
            self.producers = snapshot
            self.producers_loaded = True

    # --- naming ----------------------------------------------------------------------

    @property
    def name(self) -> str:
        name = self._name
        if name is None:
            name = self._name = os.path.basename(os.path.normpath(self.directory))
        return name

    # --- opening and recovery -----------------------------------------------------

    def _load(self, clean_shutdown: bool, log_start_offset: int | None) -> None:
        for segment in load_segments(self.directory, self.config,
                                     recovery_point=self.recovery_point,
                                     clean_shutdown=clean_shutdown, name=self.name):
            self._append_segment(segment)
            if segment.next_offset > self.recovery_point:
                # Bytes past the recovery point may not be on disk yet (they
                # survived a process crash in the page cache): the next flush
                # covers them before the recovery point moves past them.
                self.flusher.written(segment)
        # A segment that holds nothing after the previous one's end is still the active one.
        found = bool(self.segments)  # else a new log: nothing was there to recover
        if not found:
            start = log_start_offset or 0
            self._append_segment(self._new_segment(start))
        self.segments[-1].next_offset = max(
            self.segments[-1].next_offset, self.segments[-1].base_offset
        )
        self.log_start_offset = max(log_start_offset or 0, self.segments[0].base_offset)
        if self.log_start_offset > self.log_end_offset:
            self.log_start_offset = self.log_end_offset
        if self.cleaner_offset is not None and self.cleaner_offset > self.log_end_offset:
            self.cleaner_offset = None
        log.info(
            "log_opened",
            log=self.name,
            segments=len(self.segments),
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
            size=self.size_bytes,
            recovered=found and not clean_shutdown,
        )

    def _append_segment(self, segment: LogSegment) -> None:
        if self._bases and segment.base_offset <= self._bases[-1]:
            raise ValueError("segments must be added in offset order")
        self.segments.append(segment)
        self._bases.append(segment.base_offset)

    def _new_segment(self, base_offset: int) -> LogSegment:
        segment = LogSegment(
            self.directory, base_offset, index_interval_bytes=self.config.index_interval_bytes
        )
        segment.next_offset = base_offset
        segment.roll_jitter_ms = self.config.random_segment_jitter(_jitter)
        if segment.size:
            # A stale file at this base (e.g. after truncation) must not leak into the log.
            os.ftruncate(segment.fd, 0)
            segment.size = 0
            segment.offset_index.reset()
            segment.time_index.reset()
        log.debug("segment_opened", log=self.name, segment=segment_name(base_offset))
        return segment

    # --- offsets -------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        # A single node: every appended record is replicated everywhere it needs to be.
        return self.log_end_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def _check_open(self) -> None:
        if self.offline:
            raise KafkaStorageError(f"the log dir of {self.name} is offline")
        if self.closed:
            raise LogClosedError(self.directory)

    def io_failed(self, exc: OSError, action: str) -> KafkaStorageError:
        """Take the log offline after an I/O error; returns the error to raise."""
        first = not self.offline
        self.offline = True
        if first:
            log.error("log_io_error", log=self.name, action=action, error=str(exc),
                      errno=getattr(exc, "errno", None))
            if self.on_io_error is not None:
                self.on_io_error(self, exc)
        return KafkaStorageError(f"I/O error during {action} of {self.name}: {exc}")

    def unlocked_io_failed(self, exc: OSError, action: str):
        """An error of file work done without the partition lock: the log was
        closed meanwhile (its topic deleted, its folder gone: the maintenance pass
        skips it) or the disk failed (the log goes offline)."""
        with self._lock:
            if self.closed and not self.offline:
                return LogClosedError(f"{self.name} was closed during {action}: {exc}")
        return self.io_failed(exc, action)

    def set_offline(self) -> None:
        """The log dir went offline elsewhere: refuse every further operation."""
        self.offline = True

    # --- append ---------------------------------------------------------------------------

    def append(
        self,
        records,
        *,
        now_ms: int | None = None,
        leader_epoch: int | None = None,
        assign_offsets: bool = True,
        origin: AppendOrigin | None = None,
        validated: tuple[int, ValidatedAppend] | None = None,
        owned: bool = False,
    ) -> AppendInfo:
        """Validate and append v2 batches (``storage.validator``), assigning offsets
        from the log end offset.

        ``origin`` says who wrote the batches (``CLIENT`` by default: every
        check applies).  With ``assign_offsets=False`` (``REPLICATION``) the
        batches keep their offsets, which must move forward.  Nothing is
        written unless every check passes.  ``validated`` is ``(log end offset
        then, result)`` of a validation done beforehand (``append_async``).
        ``owned``: the caller gives ``records`` (a writable buffer) away, so it
        is validated and written in place instead of copied first.
        """
        if origin is None:
            origin = AppendOrigin.CLIENT if assign_offsets else AppendOrigin.REPLICATION
        buf = _private(records, owned) if validated is None else None
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            if validated is not None:
                checked = rebase(validated[1], self.log_end_offset - validated[0])
            else:
                checked = validate_and_assign(
                    buf, tp=self.name, config=self.config, next_offset=self.log_end_offset,
                    now=now, origin=origin, leader_epoch=leader_epoch)
            data = checked.records
            header = batch_header(data, 0)
            if header.producer_id >= 0 and origin is not AppendOrigin.REPLICATION:
                if not self.producers_loaded:
                    self._replay_producers()
                # Only a client retries a batch (UnifiedLog.analyzeAndValidateProducerState).
                duplicate = self.producers.find_duplicate(header) \
                    if origin is AppendOrigin.CLIENT else None
                if duplicate is not None:
                    return AppendInfo(
                        first_offset=duplicate.first_offset, last_offset=duplicate.last_offset,
                        max_timestamp=duplicate.timestamp,
                        offset_of_max_timestamp=duplicate.last_offset,
                        log_append_time=duplicate.timestamp if self.config.log_append_time else -1,
                        log_start_offset=self.log_start_offset, size=0, duplicate=True)
                if origin is AppendOrigin.CLIENT:
                    self.producers.check(header, checked.first_offset, self.name)
            return self._write(checked, now, header.producer_id >= 0
                               or origin is AppendOrigin.REPLICATION)

    def append_own(self, records: list[tuple[bytes | None, bytes | None]], *, now_ms: int,
                   leader_epoch: int | None = None) -> AppendInfo:
        """Append ``(key, value)`` records that the broker writes itself (the group
        coordinator's), as one batch timestamped ``now_ms``: exactly what
        ``append(build_batch(records), origin=COORDINATOR)`` does, built at the
        log end offset instead of validated after the fact (``own_batch``)."""
        with self._lock:
            self._check_open()
            checked = own_batch(records, tp=self.name, config=self.config,
                                next_offset=self.log_end_offset, now=now_ms,
                                leader_epoch=leader_epoch)
            if checked is None:
                batch = build_batch([Record(i, now_ms, key, value)
                                     for i, (key, value) in enumerate(records)])
                return self.append(batch, now_ms=now_ms, leader_epoch=leader_epoch,
                                   origin=AppendOrigin.COORDINATOR)
            return self._write(checked, now_ms, False)

    def _write(self, checked: ValidatedAppend, now: int, producer_batches: bool) -> AppendInfo:
        """Write validated batches (under the lock); ``producer_batches``: replay
        their headers into the producer state."""
        data = checked.records
        try:
            segment = self._maybe_roll(len(data), checked.max_timestamp, checked.first_offset,
                                       checked.last_offset, now)
            segment.append(data, checked.last_offset, checked.max_timestamp,
                           checked.offset_of_max_timestamp)
        except OSError as exc:
            raise self.io_failed(exc, "append") from exc
        self.flusher.written(segment, checked.last_offset - checked.first_offset + 1)
        if producer_batches:
            for pos, size, _magic in iter_entries(data):
                header = batch_header(data, pos)
                if header.is_control:
                    self.producers.replay(header, producer_load.marker_of(
                        memoryview(data)[pos:pos + size]))
                else:
                    self.producers.replay(header)
        return AppendInfo(
            first_offset=checked.first_offset,
            last_offset=checked.last_offset,
            max_timestamp=checked.max_timestamp,
            offset_of_max_timestamp=checked.offset_of_max_timestamp,
            log_append_time=checked.log_append_time,
            log_start_offset=self.log_start_offset,
            size=len(data),
        )

    def _maybe_roll(self, size: int, max_ts: int, first: int, last: int, now: int) -> LogSegment:
        """Roll before an append (UnifiedLog.maybeRoll / LogSegment.shouldRoll)."""
        seg = self.segments[-1]
        if seg.size == 0:
            if first > seg.base_offset:
                # Batches that keep their offsets may start past an empty active
                # segment's base: the segment is renamed after its first batch.
                self._replace_empty_active(first)
            return self.segments[-1]
        cfg = self.config
        if seg.first_batch_timestamp is not None and seg.first_batch_timestamp >= 0:
            waited = max_ts - seg.first_batch_timestamp
        else:
            waited = now - seg.created_ms
        if (
            seg.size > cfg.segment_bytes - size
            or waited > cfg.max_segment_ms - seg.roll_jitter_ms
            or seg.offset_index.is_full(cfg.segment_index_bytes)
            or seg.time_index.is_full(cfg.segment_index_bytes)
            or last - seg.base_offset > INT32_MAX
        ):
            return self._roll_to(first)
        return seg

    def _replace_empty_active(self, base: int) -> None:
        old = self.segments.pop()
        self._bases.pop()
        self.flusher.forget([old])
        old.delete()
        self._append_segment(self._new_segment(base))

    def _roll_to(self, base: int) -> LogSegment:
        old = self.segments[-1]
        old.on_become_inactive()
        new = self._new_segment(base)
        self._append_segment(new)
        log.info("segment_rolled", log=self.name, old=segment_name(old.base_offset),
                 old_size=old.size, new=segment_name(base))
        return new

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        with self._lock:
            self._check_open()
            if self.segments[-1].size == 0:
                return self.segments[-1]
            try:
                return self._roll_to(self.log_end_offset)
            except OSError as exc:
                raise self.io_failed(exc, "roll") from exc

    # --- async append and flush -------------------------------------------------------

    async def append_async(self, records, **kwargs) -> AppendInfo:
        """``append``, then wait for durability as the flush policy requires.

        A large client append runs in a worker thread: it is validated there
        without the lock (appends made meanwhile move it to the new log end), then
        written under the lock, so the event loop does neither; unless it is cheap
        to check (``INLINE_RECORDS``), which is done here.
        """
        origin = kwargs.get("origin") or AppendOrigin.CLIENT
        owned = kwargs.get("owned", False)
        segments_before = len(self.segments)
        if len(records) >= VALIDATE_IN_THREAD_BYTES and origin is not AppendOrigin.REPLICATION \
                and kwargs.get("assign_offsets", True) and not self._cheap_to_check(records):
            now = kwargs.get("now_ms")
            kwargs["now_ms"] = now = self.clock() if now is None else now
            start = self.log_end_offset
            kwargs.pop("owned", None)

            def validate_and_append() -> AppendInfo:
                checked = validate_and_assign(
                    _private(records, owned), tp=self.name, config=self.config, next_offset=start,
                    now=now, origin=origin, leader_epoch=kwargs.get("leader_epoch"))
                return self.append(records, validated=(start, checked), **kwargs)

            info = await asyncio.get_running_loop().run_in_executor(None, validate_and_append)
        else:
            info = self.append(records, **kwargs)
        await self.flusher.after_append(rolled=len(self.segments) != segments_before)
        return info

    def _cheap_to_check(self, records) -> bool:
        """One uncompressed batch of few records that the validator keeps as it is
        (see ``INLINE_RECORDS``)."""
        if len(records) > INLINE_BYTES or len(records) < RECORD_BATCH_OVERHEAD \
                or records[MAGIC_OFFSET] != 2:
            return False
        header = batch_header(records, 0)
        if header.size != len(records) or header.compression != compression.NONE \
                or not 0 <= header.records_count <= INLINE_RECORDS:
            return False
        target = self.config.compression_type
        return target == "producer" or \
            compression.BY_NAME.get(target, compression.NONE) == compression.NONE

    async def flush_async(self) -> None:
        """fsync everything written so far, in a worker thread."""
        await self.flusher.flush_async()

    def flush(self) -> None:
        """fsync everything written so far (synchronously)."""
        self.flusher.flush()

    # --- transactions ------------------------------------------------------------------

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, *,
                      coordinator_epoch: int, now_ms: int | None = None,
                      leader_epoch: int | None = None) -> AppendInfo:
        """Append the end marker of the producer's transaction (a control batch)
        and close it in the producer state (UnifiedLog.appendAsLeader with
        AppendOrigin.COORDINATOR)."""
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            if not self.producers_loaded:
                self._replay_producers()
            self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch,
                                        self.name)
            offset = self.log_end_offset
            batch = build_control_batch(
                COMMIT if commit else ABORT, producer_id=producer_id,
                producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                timestamp=now, base_offset=offset,
                partition_leader_epoch=-1 if leader_epoch is None else leader_epoch)
            info = self._write(ValidatedAppend(batch, offset, offset, now, offset, -1), now,
                               False)
            aborted = self.producers.end_txn(producer_id, producer_epoch,
                                             COMMIT if commit else ABORT, coordinator_epoch,
                                             offset, now)
            if aborted is not None:
                try:  # the marker's segment lists it (Kafka's .txnindex)
                    self.segments[-1].txn_index.append(
                        aborted.producer_id, aborted.first_offset, aborted.last_offset,
                        aborted.last_stable_offset)
                except OSError as exc:
                    raise self.io_failed(exc, "append") from exc
            return info

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, or the high
        watermark (the producer state must be loaded: ``load_producer_state``)."""
        unstable = self.producers.first_unstable_offset()
        high = self.high_watermark
        return high if unstable is None or unstable > high else unstable

    def aborted_transactions(self, start: int, end: int) -> list:
        """The aborted transactions overlapping [start, end), for a read_committed
        fetch of that range."""
        return self.producers.aborted_between(start, end)

    # --- idempotent producers ---------------------------------------------------------

    def _replay_producers(self) -> None:
        """Rebuild the producer state from every batch header (under the lock)."""
        self._adopt_producers(producer_load.replay(self.segments))

    def _adopt_producers(self, state) -> None:
        """Take a producer state rebuilt from the log (under the lock), and list in
        each segment's ``.txnindex`` the aborted transactions whose markers the
        segment holds but its index does not yet: a marker written just before a
        crash whose entry was not (Kafka's LogSegment.recover rebuilds the index
        from the markers the same way).  The index grows at its end only, so what
        it lacks is what follows its last entry; were it left out, the next start
        from a producer snapshot (which takes its aborted transactions from the
        indexes) would hand the aborted records to read_committed readers."""
        for txn in state.aborted:
            segment = self.segments[self._segment_index_for(txn.last_offset)]
            index = segment.txn_index
            if not segment.base_offset <= txn.last_offset < segment.next_offset or \
                    (index.entries and txn.last_offset <= index.entries[-1][2]):
                continue
            try:
                index.append(txn.producer_id, txn.first_offset, txn.last_offset,
                             txn.last_stable_offset)
            except OSError as exc:
                raise self.io_failed(exc, "producer state load") from exc
        self.producers = state
        self.producers_loaded = True

    async def load_producer_state(self) -> None:
        """Rebuild the producer state once after an open, in a worker thread
        (``storage.producer_load``): appends and reads of this partition on the
        event loop never wait for the whole scan."""
        if self.producers_loaded:
            return
        if self._producer_load is None:
            self._producer_load = asyncio.get_running_loop().run_in_executor(
                None, self._scan_producers)
        load = self._producer_load
        try:
            await asyncio.shield(load)
        finally:
            if load.done() and self._producer_load is load:
                self._producer_load = None

    def _scan_producers(self) -> None:
        producer_load.scan(self)

    # --- read --------------------------------------------------------------------------

    def _segment_index_for(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> bytes:
        """Whole batches from the one containing ``offset``, up to ``max_bytes``.

        Like Kafka, a read serves one segment and never cuts a batch; the first
        batch is returned even if it is larger than ``max_bytes`` (unless
        ``min_one_batch`` is false).  ``max_offset`` (exclusive, e.g. the high
        watermark) stops before batches starting at or after it.  Reading at the
        log end offset gives ``b""``; outside [log start, log end] raises
        ``OffsetOutOfRangeError``.
        """
        with self._lock:
            self._check_open()
            if offset < self.log_start_offset or offset > self.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}]"
                )
            limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
            if offset >= limit:
                return b""
            i = self._segment_index_for(offset)
            while i < len(self.segments):
                segment = self.segments[i]
                found = segment.translate_offset(offset)
                if found is not None:
                    return self._read_from(segment, found[0], found[1], max_bytes, limit,
                                           min_one_batch)
                i += 1
            return b""

    @staticmethod
    def _read_from(segment, position, first, max_bytes, limit, min_one) -> bytes:
        if first.base_offset >= limit:
            return b""
        if first.size > max_bytes:
            return segment.read(position, first.size) if min_one else b""
        data = segment.read(position, min(max_bytes, segment.size - position))
        end = 0
        while end + RECORD_BATCH_OVERHEAD <= len(data):
            header = batch_header(data, end)
            if header.base_offset >= limit or end + header.size > len(data):
                break
            end += header.size
        return data[:end] if end < len(data) else data

    def batches(self, start_offset: int | None = None, *, chunk_bytes: int = 1 << 20) -> Iterator[bytes]:
        """Every batch from ``start_offset`` (default: log start) to the end, one by one."""
        offset = self.log_start_offset if start_offset is None else start_offset
        while offset < self.log_end_offset:
            data = self.read(offset, chunk_bytes)
            if not data:
                return
            for pos, size, _magic in iter_entries(data):
                header = batch_header(data, pos)
                yield data[pos : pos + size]
                offset = header.next_offset

    def verified_batches(self, *, chunk_bytes: int = 1 << 20) -> Iterator[bytes]:
        """Every batch from the log start to the end, each checked (v2 layout,
        CRC-32C, offsets that never go back) and no byte of any segment passed
        over: the read of a log whose every record matters, such as a
        coordinator loading its state (Kafka's loader refuses a partition it
        cannot read whole).  Raises ``CorruptLogError`` at the first damage.

        Walks the segments by file position rather than by offset, so that
        damage cannot pass for a compaction gap.  A segment the cleaner replaces
        meanwhile is read on in its replacement, from the offset reached.
        """
        chunk_bytes = max(chunk_bytes, RECORD_BATCH_OVERHEAD)
        offset = segment = None
        while True:
            found: list[bytes] = []
            error = None
            with self._lock:
                self._check_open()
                if offset is None:
                    offset = self.log_start_offset
                if segment is None or not self._holds(segment):
                    if not self.segments:
                        return
                    # Batches before ``offset`` in the segment found are passed over.
                    segment = self.segments[self._segment_index_for(offset)]
                    position, relocated = 0, segment.base_offset < offset
                if position >= segment.size:
                    following = bisect_right(self._bases, segment.base_offset)
                    if following >= len(self.segments):
                        return
                    segment, position = self.segments[following], 0
                    continue
                data = segment.read(position, min(chunk_bytes, segment.size - position))
                pos = 0
                if not data:
                    error = self._damage(segment, position, offset,
                                         "a segment file shorter than its size")
                while pos < len(data):
                    at, header = position + pos, None
                    damage = None
                    if len(data) - pos < RECORD_BATCH_OVERHEAD:
                        if pos > 0 and position + len(data) < segment.size:
                            break  # the next chunk starts with this batch
                        damage = f"{segment.size - at} stray bytes"
                    else:
                        size = batch_header(data, pos).size  # validate_batch checks the magic
                        if size < RECORD_BATCH_OVERHEAD or at + size > segment.size:
                            damage = f"a batch length of {size} bytes"
                        elif pos + size > len(data):
                            if pos > 0:
                                break
                            data = segment.read(position, size)  # larger than a chunk
                            if len(data) == size:
                                continue
                            damage = "a segment file shorter than its size"
                    if damage is None:
                        try:
                            header = validate_batch(data, pos, size)
                        except CorruptRecordError as exc:
                            damage = str(exc)
                        else:
                            if header.base_offset < offset and not relocated:
                                damage = (f"offset {header.base_offset} after offset "
                                          f"{offset - 1}")
                    if damage is not None:
                        error = self._damage(segment, at, offset, damage)
                        break
                    if header.next_offset > offset:
                        if header.next_offset > self.log_start_offset:
                            found.append(data[pos : pos + size])
                        offset = header.next_offset
                        relocated = False
                    pos += size
                position += pos
            yield from found
            if error is not None:
                raise error

    def _holds(self, segment: LogSegment) -> bool:
        """Whether ``segment`` is still one of this log's (not swapped out or deleted)."""
        i = bisect_right(self._bases, segment.base_offset) - 1
        return i >= 0 and self.segments[i] is segment

    def _damage(self, segment: LogSegment, at: int, offset: int, what: str) -> CorruptLogError:
        """What ``verified_batches`` raises for ``what`` found at byte ``at``."""
        return CorruptLogError(
            f"{self.name}: {what} at byte {at} of segment {segment_name(segment.base_offset)}.log: "
            f"the log cannot be read from offset {offset} on ({segment.size - at} bytes to the end "
            f"of that segment)", offset=offset, segment=segment.base_offset, position=at,
            bytes_after=segment.size - at)

    # --- timestamps ----------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record with a timestamp >= ``timestamp`` (ListOffsets by time)."""
        with self._lock:
            self._check_open()
            start = self.log_start_offset
            for segment in self.segments:
                if segment.max_timestamp >= timestamp and segment.next_offset > start:
                    found = segment.find_offset_for_timestamp(timestamp, start)
                    if found is not None:
                        return TimestampOffset(found[1], found[0])
            return None

    def read_batch_at(self, offset: int) -> bytes:
        """The whole batch holding ``offset`` while a segment still does, even below
        the log start offset (records DeleteRecords put out of reach stay in their
        segment until retention deletes it, and Kafka's ListOffsets for the largest
        timestamp still reads them there); ``b""`` where none does."""
        with self._lock:
            self._check_open()
            if offset < self.segments[0].base_offset or offset >= self.log_end_offset:
                return b""
            segment = self.segments[self._segment_index_for(offset)]
            found = segment.translate_offset(offset)
            if found is None or found[1].base_offset > offset:
                return b""  # not in this segment (compacted away)
            return self._read_from(segment, found[0], found[1], 1, self.log_end_offset, True)

    def max_timestamp_offset(self) -> TimestampOffset | None:
        """Timestamp and offset of the largest timestamp (ListOffsets -3)."""
        with self._lock:
            best = None
            for segment in self.segments:
                if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.timestamp):
                    best = TimestampOffset(segment.max_timestamp, segment.offset_of_max_timestamp)
            return best

    # --- retention and truncation -----------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None, *,
                            below_start_only: bool = False) -> int:
        """One retention pass (``storage.retention.delete_old_segments``): the
        segments retention.ms, retention.bytes or the log start (``below_start_only``:
        only that, as after DeleteRecords) condemn go.  Returns how many went."""
        from kcoord.storage.retention import delete_old_segments

        return delete_old_segments(self, self.clock() if now_ms is None else now_ms,
                                   below_start_only)

    def structural_change(self) -> threading.RLock:
        """The lock that serializes changes to the segment list that wait for the
        disk (retention's unlinks, a compaction swap): appends and reads never take it."""
        return self._structure

    def detach_oldest(self, doomed: Callable[[list[LogSegment], int], int]) -> list[LogSegment]:
        """Take the ``doomed(segments, log_start_offset)`` oldest segments out of the
        log (the caller holds ``structural_change()`` and deletes their files): the
        log start moves up to the first segment kept, and producer state with it.
        Like Kafka, when every segment goes (a non-empty active segment that
        expired), a new empty active segment is rolled at the log end first, so the
        log end offset is kept."""
        with self._lock:
            self._check_open()
            count = doomed(self.segments, self.log_start_offset)
            if not count:
                return []
            try:
                if count == len(self.segments):
                    self._roll_to(self.log_end_offset)
                gone = self.segments[:count]
                del self.segments[:count]
                del self._bases[:count]
                self.flusher.forget(gone)
                for seg in gone:
                    seg.close()
            except OSError as exc:
                raise self.io_failed(exc, "retention") from exc
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            self.producers.truncate_head(self.log_start_offset)
            return gone

    def advance_log_start_offset(self, offset: int) -> None:
        """Move the log start forward (DeleteRecords); whole segments below it go at the next retention pass."""
        with self._lock:
            if offset > self.log_end_offset:
                raise OffsetOutOfRangeError(f"{offset} is beyond the log end offset")
            if offset > self.log_start_offset:
                self.log_start_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after the batch containing ``offset`` (LocalLog.truncateTo)."""
        with self._structure, self._lock:
            self._check_open()
            if offset >= self.log_end_offset:
                return
            if offset <= self.segments[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return
            try:
                while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
                    seg = self.segments.pop()
                    self._bases.pop()
                    self.flusher.forget([seg])
                    seg.delete()
                active = self.segments[-1]
                # Whole batches go: the log end becomes the end of what is left (Kafka
                # sets it to ``offset`` even inside a batch, which a reopen would undo).
                removed = active.truncate_to(offset)
            except OSError as exc:
                raise self.io_failed(exc, "truncation") from exc
            self.flusher.written(active)
            # ProducerStateManager.truncateAndReload: rebuilt from what is left.
            self.producers = ProducerState()
            self.producers_loaded = False
            end = self.log_end_offset
            self.recovery_point = min(self.recovery_point, end)
            # LocalLog.truncateTo: the log start never stays above the new end.
            self.log_start_offset = min(self.log_start_offset, end)
            if self.cleaner_offset is not None and self.cleaner_offset > end:
                self.cleaner_offset = None
            log.info("log_truncated", log=self.name, offset=offset, bytes=removed)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start an empty log at ``offset``."""
        with self._structure, self._lock:
            self._check_open()
            try:
                for seg in self.segments:
                    seg.delete()
                self.segments.clear()
                self._bases.clear()
                self.flusher.clear()
                self._append_segment(self._new_segment(offset))
            except OSError as exc:
                raise self.io_failed(exc, "truncation") from exc
            self.log_start_offset = offset
            self.recovery_point = offset
            self.cleaner_offset = None
            self.producers = ProducerState()
            self.producers_loaded = True
            log.info("log_reset", log=self.name, offset=offset)

    # --- compaction -------------------------------------------------------------------------

    def dirty_ratio(self, now_ms: int | None = None) -> float:
        from kcoord.storage.cleaner import cleanable_range

        with self._lock:
            r = cleanable_range(self, self.clock() if now_ms is None else now_ms)
        return r.dirty_ratio if r else 0.0

    def compact(self, now_ms: int | None = None, *, force: bool = False):
        """Compact the non-active segments if the dirty ratio calls for it (or ``force``).

        Returns the cleaner's statistics, or ``None`` when nothing was done.
        """
        from kcoord.storage.cleaner import clean_log

        return clean_log(self, self.clock() if now_ms is None else now_ms, force=force)

    def _present(self, old: list[LogSegment]) -> bool:
        present = {id(s) for s in self.segments[:-1]}
        return not (self.closed or self.offline or any(id(s) not in present for s in old))

    def replace_segments(self, old: list[LogSegment], new: LogSegment, swap) -> bool:
        """Put ``new`` in the place of the consecutive non-active segments ``old``.

        ``swap`` does the crash-safe file work (the cleaner's swap protocol) in
        three steps: ``prepare()`` commits the swap on disk (directory fsync
        included) and ``sync(commit())`` finishes it; only ``commit()``, a few
        renames, runs with the partition lock held, together with the
        in-memory swap, so appends and reads on the event loop never wait for
        the disk.  Returns False, doing nothing, when the log moved on (closing,
        a failed log dir) before the swap was committed in memory.
        """
        with self._structure:
            with self._lock:
                if not self._present(old):
                    return False
            try:
                swap.prepare()
            except OSError as exc:
                raise self.unlocked_io_failed(exc, "compaction swap") from exc
            with self._lock:
                if not self._present(old):
                    return False  # closed or failed meanwhile: the next start finishes it
                try:
                    doomed = swap.commit()
                except OSError as exc:
                    raise self.io_failed(exc, "compaction swap") from exc
                self.flusher.forget(old)
                first = self.segments.index(old[0])
                self.segments[first : first + len(old)] = [new]
                self._bases[first : first + len(old)] = [new.base_offset]
            try:
                swap.sync(doomed)
            except OSError as exc:
                raise self.unlocked_io_failed(exc, "compaction swap") from exc
            return True

    async def compact_async(self, now_ms: int | None = None, *, force: bool = False):
        """``compact`` in a worker thread; appends and reads go on meanwhile."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: self.compact(now_ms, force=force))

    # --- closing ------------------------------------------------------------------------

    def close(self) -> None:
        """Flush everything and close the files (a clean shutdown)."""
        with self._structure, self._lock:
            if self.closed:
                return
            if self.offline:
                # Nothing more is written to a failed log dir: its logs are
                # recovered at the next start.
                self.close_files()
                return
            try:
                for seg in self.segments:
                    seg.on_become_inactive()
                for seg in self.segments:
                    seg.flush()
                if self.producers_loaded:
                    producer_snapshot.write(self.directory, self.log_end_offset, self.producers,
                                            sync_dir=False)
                fsync_dir(self.directory)
            except OSError as exc:
                self.close_files()
                raise self.io_failed(exc, "close") from exc
            self.recovery_point = self.log_end_offset
            self.flusher.clear()
            for seg in self.segments:
                seg.close()
            self.closed = True

    def close_files(self) -> None:
        """Close the files without flushing (the log is being deleted)."""
        with self._lock:
            for seg in self.segments:
                seg.close()
            self.closed = True

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.directory}, start={getattr(self, 'log_start_offset', None)}, "
            f"end={self.log_end_offset if self.segments else None}, segments={len(self.segments)})"
        )

