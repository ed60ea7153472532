"""One log segment: ``<base offset>.log`` plus its ``.index``, ``.timeindex``
and, once a transaction is aborted in it, ``.txnindex``.

Mirrors Kafka's LogSegment.java: appends go to the end of the ``.log`` with one
``os.write`` (acknowledged once the OS has the bytes), the sparse indexes get an
entry when more than ``index.interval.bytes`` were appended since the last one,
and ``recover`` re-reads every batch, checks it, rebuilds both indexes and cuts
the file after the last valid batch.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Iterator

from kcoord.protocol.records import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    batch_header,
    crc_valid,
)
from kcoord.storage.files import PREALLOCATE_MIN, preallocate
from kcoord.storage.index import OffsetIndex, TimeIndex, TransactionIndex
from kcoord.storage.layout import segment_name

INT32_MAX = (1 << 31) - 1
_SCAN_CHUNK = 1 << 20


class LogSegment:
    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        suffix: str = "",
        created_ms: int | None = None,
    ):
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.suffix = suffix
        prefix = os.path.join(directory, segment_name(base_offset))
        self.log_path = prefix + ".log" + suffix
        self._fd = -1
        try:
            self.size = os.stat(self.log_path).st_size
        except FileNotFoundError:
            os.close(os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644))
            self.size = 0
        self.offset_index = OffsetIndex(prefix + ".index" + suffix, base_offset)
        self.time_index = TimeIndex(prefix + ".timeindex" + suffix, base_offset)
        self.txn_index = TransactionIndex(prefix + ".txnindex" + suffix, base_offset)
        self.bytes_since_index_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None  # for segment.ms (rollingBasedTimestamp)
        self.next_offset = base_offset  # offset after the last batch (valid once loaded)
        self.created_ms = int(time.time() * 1000) if created_ms is None else created_ms
        self.roll_jitter_ms = 0  # segment.jitter.ms, drawn when the segment is created
        self.closed = False

    @property
    def fd(self) -> int:
        """The ``.log`` file descriptor, opened on first use: an empty partition
        holds no descriptor, so thousands of idle topics fit in the open-file limit."""
        if self._fd < 0:
            if self.closed:
                raise OSError(9, "segment is closed", self.log_path)
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    # --- loading ---------------------------------------------------------------------

    def load(self) -> None:
        """Trust the files as they are (clean shutdown): derive the in-memory state."""
        if not self.offset_index.is_sane(self.size) or not self.time_index.is_sane():
            self.rebuild_indexes()
            return
        ts, offset = self.time_index.last_entry
        self.max_timestamp, self.offset_of_max_timestamp = ts, offset
        self.next_offset = self.base_offset
        _idx_offset, position = self.offset_index.lookup(1 << 62)
        last = None
        for pos, header in self.headers(position):
            last = (pos, header)
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        if last is not None:
            self.next_offset = last[1].next_offset
            self.bytes_since_index_entry = last[0] + last[1].size - position
        self._load_first_timestamp()

    def _load_first_timestamp(self) -> None:
        if self.size >= RECORD_BATCH_OVERHEAD:
            self.first_batch_timestamp = batch_header(
                os.pread(self.fd, RECORD_BATCH_OVERHEAD, 0)
            ).max_timestamp

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the batch headers (no CRC check)."""
        self._reindex(verify=False)

    def recover(self, before_cut: Callable[[], None] | None = None) -> int:
        """Validate every batch, rebuild the indexes, cut after the last valid batch.

        Returns the number of bytes truncated (LogSegment.recover).  The base
        offset lies outside the CRC, so offsets are cross-checked as well: a
        batch may follow a gap (compaction leaves them) but never go back.
        ``before_cut`` runs once the segment is known to need cutting, before
        its file is cut.
        """
        return self._reindex(verify=True, before_cut=before_cut)

    def _reindex(self, *, verify: bool, before_cut: Callable[[], None] | None = None) -> int:
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        valid = 0
        last_entry_pos = 0
        expected = self.base_offset
        for pos, header, data in self.scan(0, verify=verify):
            if (
                header.base_offset < expected
                or header.last_offset - self.base_offset > INT32_MAX
            ):
                break
            if verify and not crc_valid(data, 0, header.size):
                break
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            if pos - last_entry_pos > self.index_interval_bytes:
                self.offset_index.append(header.last_offset, pos)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                last_entry_pos = pos
            valid = pos + header.size
            expected = header.next_offset
        truncated = self.size - valid
        if truncated > 0:
            if before_cut is not None:
                before_cut()
            os.ftruncate(self.fd, valid)
            self.size = valid
        self.txn_index.truncate_to(expected)  # aborts whose markers were cut off
        # A cleanly closed segment ends with an entry for its max timestamp; so does a recovered one.
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.next_offset = expected
        self.bytes_since_index_entry = valid - last_entry_pos
        self.first_batch_timestamp = None
        self._load_first_timestamp()
        return truncated

    # --- scanning ------------------------------------------------------------------------

    def scan(self, start: int = 0, end: int | None = None, *, verify: bool = True,
             chunk: int = _SCAN_CHUNK) -> Iterator[tuple[int, BatchHeader, bytes]]:
        """Yield (position, header, batch bytes) from ``start``; stops at the first bad entry.

        ``verify`` only controls whether the bytes of each batch are returned
        (callers check CRCs); the walk always stops at a truncated or
        malformed entry.
        """
        end = self.size if end is None else end
        fd = self.fd
        buf = b""
        buf_start = start
        pos = start
        while pos < end:
            off = pos - buf_start
            if len(buf) - off < RECORD_BATCH_OVERHEAD:
                buf = os.pread(fd, min(max(chunk, RECORD_BATCH_OVERHEAD), end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < RECORD_BATCH_OVERHEAD:
                    return
            if buf[off + MAGIC_OFFSET] != 2:
                return
            header = batch_header(buf, off)
            size = header.batch_length + LOG_OVERHEAD
            if size < RECORD_BATCH_OVERHEAD or pos + size > end:
                return
            if verify:
                if len(buf) - off < size:
                    buf = os.pread(fd, max(chunk, size), pos)
                    buf_start, off = pos, 0
                    if len(buf) < size:
                        return
                data = buf[off : off + size]
            else:
                data = b""
            yield pos, header, data
            pos += size

    def headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        for pos, header, _ in self.scan(start, end, verify=False, chunk=64 * 1024):
            yield pos, header

    def translate_offset(self, offset: int, start_position: int = 0):
        """The first batch whose last offset >= ``offset``: (position, header), or None."""
        _o, position = self.offset_index.lookup(offset)
        position = max(position, start_position)
        for pos, header in self.headers(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    # --- writing -----------------------------------------------------------------------

    def append(self, data, last_offset: int, max_timestamp: int, offset_of_max: int) -> int:
        """Write batches at the end of the file; returns their position."""
        position = self.size
        if last_offset - self.base_offset > INT32_MAX:
            raise ValueError("offset does not fit in the segment's relative offsets")
        view = memoryview(data)
        if len(view) >= PREALLOCATE_MIN:
            preallocate(self.fd, position, len(view))
        written = 0
        while written < len(view):
            written += os.pwrite(self.fd, view[written:], position + written)
        self.size += len(view)
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = offset_of_max
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_timestamp
        # LogSegment.append: index the append that follows more than
        # index.interval.bytes of unindexed data, keyed by its last offset.
        if self.bytes_since_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += len(view)
        self.next_offset = last_offset + 1
        return position

    def on_become_inactive(self) -> None:
        """Force the final time index entry (LogSegment.onBecomeInactiveSegment)."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset >= ``offset``; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        os.ftruncate(self.fd, position)
        self.size = position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # Recompute the in-memory figures from what is left.
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.next_offset = self.base_offset
        last_entry_pos = self.offset_index.positions[-1] if len(self.offset_index) else 0
        for pos, header in self.headers(0):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            self.next_offset = header.next_offset
        self.bytes_since_index_entry = self.size - last_entry_pos
        if self.size == 0:
            self.first_batch_timestamp = None
        return removed

    def find_offset_for_timestamp(self, timestamp: int, start_offset: int):
        """(offset, timestamp) of the first record at or after ``start_offset`` with ts >= target."""
        from kcoord.protocol.records import decode_batch

        _ts, indexed_offset = self.time_index.lookup(timestamp)
        _o, position = self.offset_index.lookup(max(indexed_offset, start_offset))
        for pos, header, data in self.scan(position):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            for record in decode_batch(data, verify=False).records:
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.offset, record.timestamp
        return None

    @property
    def largest_timestamp(self) -> int:
        """Max timestamp, or the file's modification time when there is none (Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    def flush(self) -> None:
        """fsync the log and both indexes (LogSegment.flush)."""
        if not self.closed:
            if self._fd >= 0:
                os.fsync(self._fd)
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self.offset_index.close()
            self.time_index.close()
            self.txn_index.close()

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path,
                     self.txn_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def paths(self) -> list[str]:
        return [self.offset_index.path, self.time_index.path, self.txn_index.path,
                self.log_path]

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size}, next={self.next_offset})"
