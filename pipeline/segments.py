"""Segment folders read without a broker: where the batches are and which are whole.

A data dir (kcoord's ``--data-dir`` or one of a Kafka broker's ``log.dirs``)
holds one folder per partition, ``<topic>-<partition>``, each a run of
segment files ``<base offset>.log`` with their indexes.  The pipeline cuts
that into *splits*: one per segment file, and a large segment into byte
ranges that start and end at batch boundaries (found through the segment's
offset index, then a walk over batch headers), so that Spark reads them in
parallel and no batch is read twice.

Paths go through ``pyarrow.fs``: a local folder, or any URI pyarrow reads
(``s3://``, ``gs://``, ``hdfs://``, ...), so the same job runs on a laptop
and on a cluster whose executors see the store.

Reading a store the broker is writing: a split ends where the file ended when
it was planned, and reading stops at the first batch that is cut short or
fails its CRC (a torn tail), as Kafka's own recovery does.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from typing import Iterator

from protocol.records import (
    LEGACY_HEADER_SIZE,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    batch_header,
    crc_valid,
    decode_batch,
    decode_legacy_entry,
)

PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")
# Folders that are not user topics or are on their way out: KRaft's metadata log,
# and Kafka's "-delete", "-future" and "-stray" folders (their names do not end
# in "-<partition>" and fail PARTITION_DIR anyway).
SKIPPED_TOPICS = frozenset({"__cluster_metadata"})
OFFSETS_TOPIC = "__consumer_offsets"

SPLIT_BYTES = 64 * 1024 * 1024
READ_WINDOW = 8 * 1024 * 1024

_OFFSET_LENGTH = struct.Struct(">qi")
_INDEX_ENTRY = struct.Struct(">ii")


def filesystem(path: str):
    """(pyarrow filesystem, path inside it) for a local folder or a URI."""
    from pyarrow import fs as pafs

    if "://" not in path:
        return pafs.LocalFileSystem(), os.path.abspath(path)
    return pafs.FileSystem.from_uri(path)


@dataclass(frozen=True)
class SegmentFile:
    data_dir: str  # as given by the user: executors reopen it
    path: str  # the .log file inside the data dir's filesystem
    topic: str
    partition: int
    base_offset: int
    size: int


@dataclass(frozen=True)
class Split:
    """Bytes ``[start, end)`` of one segment file; ``start`` is a batch boundary and
    the split owns every batch that starts before ``end``."""

    segment: SegmentFile
    start: int
    end: int


def partition_dirs(data_dirs: list[str], topics=None) -> list[tuple[str, str, str, int]]:
    """(data dir, folder path, topic, partition) of every partition folder, sorted.

    ``topics``: a set of topic names to keep (None keeps every topic except the
    skipped ones)."""
    from pyarrow import fs as pafs

    found = []
    for data_dir in data_dirs:
        fs, root = filesystem(data_dir)
        info = fs.get_file_info(root)
        if info.type != pafs.FileType.Directory:
            raise FileNotFoundError(f"no such data dir: {data_dir}")
        for entry in fs.get_file_info(pafs.FileSelector(root)):
            if entry.type != pafs.FileType.Directory:
                continue
            m = PARTITION_DIR.match(entry.base_name)
            if not m or m.group("topic") in SKIPPED_TOPICS:
                continue
            topic = m.group("topic")
            if topics is not None and topic not in topics:
                continue
            found.append((data_dir, entry.path, topic, int(m.group("partition"))))
    found.sort(key=lambda row: (row[2], row[3], row[0]))
    return found


def segment_files(data_dirs: list[str], topics=None) -> list[SegmentFile]:
    """Every segment file of the partition folders, in (topic, partition, offset) order."""
    from pyarrow import fs as pafs

    out = []
    for data_dir, folder, topic, partition in partition_dirs(data_dirs, topics):
        fs, _ = filesystem(data_dir)
        for entry in fs.get_file_info(pafs.FileSelector(folder)):
            m = SEGMENT_LOG.match(entry.base_name)
            if m and entry.type == pafs.FileType.File:
                out.append(SegmentFile(data_dir, entry.path, topic, partition,
                                       int(m.group(1)), entry.size))
    out.sort(key=lambda s: (s.topic, s.partition, s.data_dir, s.base_offset))
    return out


def _index_positions(fs, segment: SegmentFile) -> list[tuple[int, int]]:
    """(offset, position) entries of the segment's offset index that look right:
    increasing and inside the file (an active segment's index is preallocated
    with zeros after its last entry)."""
    index_path = segment.path[: -len(".log")] + ".index"
    try:
        with fs.open_input_file(index_path) as f:
            raw = f.read()
    except (FileNotFoundError, OSError):
        return []
    entries, last_offset, last_position = [], -1, -1
    for i in range(len(raw) // _INDEX_ENTRY.size):
        relative, position = _INDEX_ENTRY.unpack_from(raw, i * _INDEX_ENTRY.size)
        if relative <= last_offset or position <= last_position or position >= segment.size:
            break
        entries.append((segment.base_offset + relative, position))
        last_offset, last_position = relative, position
    return entries


def _read_header(f, pos: int, size: int) -> tuple[int, int, int] | None:
    """(base offset, entry size, magic) of the entry at ``pos``, or None when the
    bytes there cannot start a whole entry."""
    if size - pos < LOG_OVERHEAD + 5:
        return None
    raw = f.read_at(LOG_OVERHEAD + 5, pos)
    base, length = _OFFSET_LENGTH.unpack_from(raw, 0)
    magic = raw[LOG_OVERHEAD + 4]
    if magic not in (0, 1, 2):
        return None
    minimum = RECORD_BATCH_OVERHEAD if magic == 2 else LOG_OVERHEAD + LEGACY_HEADER_SIZE[magic]
    entry = length + LOG_OVERHEAD
    if entry < minimum or pos + entry > size:
        return None
    return base, entry, magic


def _boundary_at_or_after(f, target: int, hints: list[tuple[int, int]], size: int,
                          base_offset: int) -> int:
    """The position of the first batch that starts at or after ``target`` (``size``
    when none does), walking headers from the nearest index entry that points at
    a whole, valid batch holding its offset (or from the start of the file)."""
    start = 0
    for offset, position in reversed(hints):
        if position > target:
            continue
        header = _read_header(f, position, size)
        if (header is not None and base_offset <= header[0] <= offset
                and _valid(f.read_at(header[1], position), header[2])):
            start = position
        break
    pos = start
    while pos < target:
        header = _read_header(f, pos, size)
        if header is None:
            return size
        pos += header[1]
    return min(pos, size)


def plan_splits(data_dirs: list[str], topics=None, split_bytes: int = SPLIT_BYTES) -> list[Split]:
    """The splits of every segment of ``data_dirs`` (see the module docstring)."""
    splits = []
    for segment in segment_files(data_dirs, topics):
        if segment.size <= split_bytes:
            splits.append(Split(segment, 0, segment.size))
            continue
        fs, _ = filesystem(segment.data_dir)
        hints = _index_positions(fs, segment)
        with fs.open_input_file(segment.path) as f:
            cuts = [0]
            for target in range(split_bytes, segment.size, split_bytes):
                cut = _boundary_at_or_after(f, target, hints, segment.size, segment.base_offset)
                if cut > cuts[-1]:
                    cuts.append(cut)
        cuts.append(segment.size)
        splits.extend(Split(segment, a, b) for a, b in zip(cuts, cuts[1:]) if b > a)
    return splits


@dataclass
class Entry:
    """One whole, valid batch (or legacy message set entry) of a split."""

    data: bytes  # the entry's bytes
    magic: int

    def header(self) -> BatchHeader:
        return batch_header(self.data)

    def decode(self):
        """The decoded batch, records included (legacy entries expanded)."""
        if self.magic == 2:
            return decode_batch(self.data, verify=False)
        return decode_legacy_entry(self.data, verify=False)


def _valid(data: bytes, magic: int) -> bool:
    if magic == 2:
        return crc_valid(data)
    try:
        decode_legacy_entry(data, verify=True)
    except (CorruptRecordError, ValueError):
        return False
    return True


def read_split(split: Split, *, verify: bool = True, stats: dict | None = None) -> Iterator[Entry]:
    """The whole entries of a split, in file order; stops at a torn or corrupt
    entry (counted in ``stats["torn"]``)."""
    segment = split.segment
    fs, _ = filesystem(segment.data_dir)
    with fs.open_input_file(segment.path) as f:
        size = min(segment.size, f.size())  # a file cut since planning ends earlier
        pos = split.start
        while pos < split.end:
            window = f.read_at(min(READ_WINDOW, size - pos), pos)
            offset = 0
            while pos + offset < split.end:
                if len(window) - offset < LOG_OVERHEAD + 5:
                    break
                (length,) = struct.unpack_from(">i", window, offset + 8)
                magic = window[offset + LOG_OVERHEAD + 4]
                entry_size = length + LOG_OVERHEAD
                minimum = (RECORD_BATCH_OVERHEAD if magic == 2
                           else LOG_OVERHEAD + LEGACY_HEADER_SIZE.get(magic, 1 << 31))
                if magic not in (0, 1, 2) or entry_size < minimum or pos + offset + entry_size > size:
                    _torn(stats)
                    return
                if offset + entry_size > len(window):
                    if offset == 0:  # one entry larger than the window
                        window = f.read_at(entry_size, pos)
                        continue
                    break
                data = bytes(window[offset:offset + entry_size])
                if verify and not _valid(data, magic):
                    _torn(stats)
                    return
                yield Entry(data, magic)
                offset += entry_size
            if offset == 0 and pos < split.end:
                _torn(stats)  # fewer bytes left than an entry header
                return
            pos += offset


def _torn(stats: dict | None) -> None:
    if stats is not None:
        stats["torn"] = stats.get("torn", 0) + 1
