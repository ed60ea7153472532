"""Kafka's segment indexes: ``.index`` (offsets), ``.timeindex`` (timestamps)
and ``.txnindex`` (aborted transactions).

Entries are big-endian and strictly increasing:

* ``.index``: int32 offset relative to the segment base + int32 byte position of a
  batch in the ``.log`` (OffsetIndex.java);
* ``.timeindex``: int64 timestamp + int32 relative offset (TimeIndex.java);
* ``.txnindex``: one entry per transaction aborted by a marker in the segment:
  int16 version 0, int64 producer id, first offset, last offset (the marker's)
  and last stable offset (TransactionIndex.java, AbortedTxn.java).  Its file
  exists only once it has an entry, as Kafka creates it lazily.

Kafka preallocates index files and trims them to their used size when the
segment stops being active; kcoord appends entries instead, which leaves the
same bytes as a trimmed Kafka index.  Both files are caches of the ``.log``:
recovery rebuilds them and nothing checksums them.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right

from kcoord.storage.layout import OFFSET_INDEX_ENTRY as _OFFSET_ENTRY
from kcoord.storage.layout import TIME_INDEX_ENTRY as _TIME_ENTRY
from kcoord.storage.layout import TXN_INDEX_ENTRY as _TXN_ENTRY


class _Index:
    entry_size: int

    def __init__(self, path: str, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        # Entries live in memory; the file is opened (and created) on the first
        # write, so a segment without index entries holds no descriptor.
        self.fd = -1
        self.dirty = False  # written since the last fsync
        self._load()

    def _load(self) -> None:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def _read_all(self) -> bytes:
        data = b""
        try:
            if os.stat(self.path).st_size:  # a stat costs far less than a failed open
                with open(self.path, "rb") as f:
                    data = f.read()
        except FileNotFoundError:
            pass
        self.file_size = len(data)
        usable = len(data) - len(data) % self.entry_size
        return data[:usable]

    def _open(self) -> int:
        if self.fd < 0:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self.fd

    def _write(self, raw: bytes, position: int) -> None:
        os.pwrite(self._open(), raw, position)
        self.dirty = True
        self.file_size = max(self.file_size, position + len(raw))

    def _truncate(self, size: int) -> None:
        if self.fd >= 0 or self.file_size > size:
            os.ftruncate(self._open(), size)
            self.dirty = True
        self.file_size = size

    def reset(self) -> None:
        self._truncate(0)
        self._clear()

    def _clear(self) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        if self.fd >= 0 and self.dirty:
            # Cleared first: an entry written during the fsync (a flush runs in a
            # worker thread, appends on the loop) is left dirty for the next one.
            self.dirty = False
            try:
                os.fsync(self.fd)
            except OSError:
                self.dirty = True
                raise

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def rename(self, path: str) -> None:
        """Rename the file, creating it (empty) if no entry made it yet: the rename
        must replace any index already at ``path`` (the cleaner's swap)."""
        if not os.path.exists(self.path):
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644))
        os.rename(self.path, path)
        self.path = path

    def is_full(self, max_bytes: int) -> bool:
        return len(self) >= max_bytes // self.entry_size


class OffsetIndex(_Index):
    entry_size = 8

    def _load(self) -> None:
        data = self._read_all()
        self.relative = array("i")
        self.positions = array("i")
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            self.relative.append(rel)
            self.positions.append(pos)

    def _clear(self) -> None:
        self.relative = array("i")
        self.positions = array("i")

    def __len__(self) -> int:
        return len(self.relative)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.relative[-1] if self.relative else self.base_offset

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.relative and rel <= self.relative[-1]:
            raise ValueError(f"offset index entry {offset} is not after {self.last_offset}")
        self._write(_OFFSET_ENTRY.pack(rel, position), len(self.relative) * 8)
        self.relative.append(rel)
        self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The greatest entry with an offset <= ``offset``, else (base offset, 0)."""
        i = bisect_right(self.relative, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative[i], self.positions[i]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries with an offset >= ``offset`` (OffsetIndex.truncateTo)."""
        i = bisect_right(self.relative, offset - self.base_offset - 1)
        del self.relative[i:]
        del self.positions[i:]
        self._truncate(i * 8)

    def is_sane(self, log_size: int) -> bool:
        rel, pos = self.relative, self.positions
        if self.file_size % 8:
            return False
        for i in range(len(rel)):
            if rel[i] < 0 or pos[i] < 0 or pos[i] >= max(log_size, 1):
                return False
            if i and (rel[i] <= rel[i - 1] or pos[i] <= pos[i - 1]):
                return False
        return True


class TimeIndex(_Index):
    entry_size = 12

    def _load(self) -> None:
        data = self._read_all()
        self.timestamps = array("q")
        self.relative = array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            self.timestamps.append(ts)
            self.relative.append(rel)

    def _clear(self) -> None:
        self.timestamps = array("q")
        self.relative = array("i")

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        if not self.timestamps:
            return -1, self.base_offset
        return self.timestamps[-1], self.base_offset + self.relative[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry only if ``timestamp`` is newer than the last (TimeIndex.maybeAppend)."""
        last_ts, last_offset = self.last_entry
        if timestamp <= last_ts:
            return
        if offset < last_offset:
            raise ValueError(f"time index offset {offset} goes back before {last_offset}")
        self._write(_TIME_ENTRY.pack(timestamp, offset - self.base_offset), len(self) * 12)
        self.timestamps.append(timestamp)
        self.relative.append(offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The greatest entry with a timestamp <= ``timestamp``, else (-1, base offset)."""
        i = bisect_right(self.timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self.timestamps[i], self.base_offset + self.relative[i]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries with an offset >= ``offset``."""
        keep = len(self.relative)
        while keep and self.base_offset + self.relative[keep - 1] >= offset:
            keep -= 1
        del self.timestamps[keep:]
        del self.relative[keep:]
        self._truncate(keep * 12)

    def is_sane(self) -> bool:
        if self.file_size % 12:
            return False
        ts, rel = self.timestamps, self.relative
        for i in range(len(ts)):
            if rel[i] < 0:
                return False
            if i and (ts[i] <= ts[i - 1] or rel[i] < rel[i - 1]):
                return False
        return True


class TransactionIndex(_Index):
    entry_size = _TXN_ENTRY.size

    def _load(self) -> None:
        data = self._read_all()
        # (producer id, first offset, last offset, last stable offset)
        self.entries: list[tuple[int, int, int, int]] = [
            _TXN_ENTRY.unpack_from(data, i)[1:] for i in range(0, len(data), self.entry_size)]

    def __len__(self) -> int:
        return len(self.entries)

    def _clear(self) -> None:
        self.entries = []

    def append(self, producer_id: int, first_offset: int, last_offset: int,
               last_stable_offset: int) -> None:
        if self.entries and last_offset <= self.entries[-1][2]:
            raise ValueError(f"aborted transaction ending at {last_offset} does not follow "
                             f"the one ending at {self.entries[-1][2]}")
        self._write(_TXN_ENTRY.pack(0, producer_id, first_offset, last_offset,
                                    last_stable_offset), len(self) * self.entry_size)
        self.entries.append((producer_id, first_offset, last_offset, last_stable_offset))

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after ``offset``."""
        keep = len(self.entries)
        while keep and self.entries[keep - 1][2] >= offset:
            keep -= 1
        if keep < len(self.entries) or self.file_size > keep * self.entry_size:
            del self.entries[keep:]
            self._truncate(keep * self.entry_size)

    def rename(self, path: str) -> None:
        """Rename the file if it exists (a segment without aborts has none)."""
        if os.path.exists(self.path):
            os.rename(self.path, path)
        self.path = path
