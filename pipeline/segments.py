"""Segment folders read without a broker: where the batches are and which are whole.

A data dir (kcoord's ``--data-dir`` or one of a Kafka broker's ``log.dirs``)
holds one folder per partition, ``<topic>-<partition>``, each a run of
segment files ``<base offset>.log`` with their indexes.  The pipeline cuts
that into *splits*: one per segment file, and a large segment into byte
ranges that start and end at batch boundaries (found through the segment's
offset index, then a walk over batch headers), so that Spark reads them in
parallel and no batch is read twice.

Paths: a local folder, a ``file://`` URI or Hadoop's ``file:/`` form, and
``s3a://`` and ``s3n://`` (Hadoop's S3 schemes, which Spark users write) read
as pyarrow's ``s3://``.  S3 credentials and region come from pyarrow's own
settings (the AWS environment variables, or ``?region=`` and
``?endpoint_override=`` in the URI), not from Spark's ``fs.s3a.*`` ones;
without a region pyarrow asks S3 for the bucket's.  Any other URI goes to
``pyarrow.fs`` as it is: ``gs://``, ``abfs://`` and ``abfss://`` are
pyarrow's GCS and Azure file systems (recognised, no read tested here);
``hdfs://`` needs Java and Hadoop's libhdfs where the job runs; pyarrow
refuses a scheme it does not know (``wasbs://`` among them) with
"Unrecognized filesystem type".

Reading a store the broker is writing: a split ends where the file ended when
it was planned, and reading stops at the first batch that is cut short or
fails its CRC (a torn tail), as Kafka's own recovery does.

Reading a store the broker rewrites: splits are planned in Spark's driver and
read later, at different times, by its workers, while the broker's cleaner
swaps merged segments in (the merged file written as ``<first>.log.swap``, the
segments it replaces deleted, then renamed to ``<first>.log``: a new file
under the first segment's name; Apache Kafka's cleaner swaps the same way),
retention deletes old segments and truncation cuts the log.  Each local
segment file is planned with its identity (device and inode; a ``.swap``
file's when one is there, as it becomes the segment), and each split with the
range of offsets it owns: from the offset of its first entry to that of the
next split's first entry (the next segment's base offset for a segment's last
split, no end for a partition's last segment).  A read opens the file and
checks the identity of the open file:

* the same file: its planned byte range is read (still there if the file is
  deleted after it was opened);
* a file replaced or deleted since planning: the split's offset range is read
  from the files that hold it now (the one with the greatest base offset at or
  below the range's start, then those starting inside the range, a ``.swap``
  file taking its segment's place), all opened and then checked against a
  second listing of the folder, so that they are one state of the log.

Records the broker removed meanwhile may be missing; nothing still in the log
is skipped, and an entry may be read by two splits (the jobs count each
(partition, offset) once).  Files on remote file systems (``s3://`` and the
like) are taken to be static copies of a store, which no broker writes: they
have no identity and are read at their planned byte ranges.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from typing import Iterator

from kcoord.protocol.records import (
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
from kcoord.storage.layout import (
    CLEANER_FILE,
    LOG_SUFFIX,
    OFFSET_INDEX_ENTRY,
    OFFSETS_TOPIC,
    PARTITION_DIR,
    SEGMENT_LOG_OR_SWAP,
    segment_name,
)

# Folders that are not user topics or are on their way out: KRaft's metadata log,
# and Kafka's "-delete", "-future" and "-stray" folders (their names do not end
# in "-<partition>" and fail PARTITION_DIR anyway).
SKIPPED_TOPICS = frozenset({"__cluster_metadata"})

SPLIT_BYTES = 64 * 1024 * 1024
READ_WINDOW = 8 * 1024 * 1024

_OFFSET_LENGTH = struct.Struct(">qi")


_HADOOP_S3 = re.compile(r"^s3[an]://", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def pyarrow_uri(path: str) -> str:
    """``path`` as ``pyarrow.fs`` names it: Hadoop's ``s3a://`` and ``s3n://``
    become ``s3://``, and Hadoop's ``file:/x`` (no authority) the local path
    ``/x``; anything else is left as it is."""
    if _HADOOP_S3.match(path):
        return "s3" + path[3:]
    if path[:5].lower() == "file:" and not path[5:7] == "//":
        return path[5:]
    return path


def filesystem(path: str):
    """(pyarrow filesystem, path inside it) for a local folder or a URI."""
    from pyarrow import fs as pafs

    path = pyarrow_uri(path)
    if not _SCHEME.match(path):
        return pafs.LocalFileSystem(), os.path.abspath(path)
    return pafs.FileSystem.from_uri(path)


def _is_local(fs) -> bool:
    from pyarrow import fs as pafs

    return isinstance(fs, pafs.LocalFileSystem)


class _LocalFile:
    """A local file opened for positioned reads; ``identity`` is the (device,
    inode) of the open file, whatever happens to its name afterwards."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_RDONLY)
        try:
            st = os.fstat(self.fd)
        except BaseException:
            os.close(self.fd)
            raise
        self.identity = (st.st_dev, st.st_ino)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def read_at(self, nbytes: int, position: int) -> bytes:
        return os.pread(self.fd, nbytes, position)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _open(fs, path: str):
    """The file at ``path`` for ``read_at``/``size`` (a ``_LocalFile`` when local)."""
    return _LocalFile(path) if _is_local(fs) else fs.open_input_file(path)


@dataclass(frozen=True)
class SegmentFile:
    data_dir: str  # as given by the user: executors reopen it
    path: str  # the .log file inside the data dir's filesystem
    topic: str
    partition: int
    base_offset: int
    size: int
    # (device, inode) of a local file when it was planned; None on remote file
    # systems, whose files are taken to be static copies.
    identity: tuple[int, int] | None = None
    # The base offset of the next segment file of the folder when planned (None
    # for the last): this file held the offsets [base_offset, next_base).
    next_base: int | None = None


@dataclass(frozen=True)
class Split:
    """Bytes ``[start, end)`` of one segment file; ``start`` is a batch boundary and
    the split owns every batch that starts before ``end``.

    ``[first_offset, end_offset)`` (no end when None) is the same split as a
    range of the offsets that start its entries (a batch's base offset, a legacy
    entry's offset): what is read instead when the file was replaced or deleted
    since planning."""

    segment: SegmentFile
    start: int
    end: int
    first_offset: int = 0
    end_offset: int | None = None


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
        local = _is_local(fs)
        listed: dict[int, dict] = {}
        for entry in fs.get_file_info(pafs.FileSelector(folder)):
            m = SEGMENT_LOG_OR_SWAP.match(entry.base_name)
            if m and entry.type == pafs.FileType.File and (local or not m.group(2)):
                listed.setdefault(int(m.group(1)), {})[bool(m.group(2))] = entry
        found = []
        for base, entries in sorted(listed.items()):
            path = os.path.join(folder, segment_name(base) + LOG_SUFFIX) if local \
                else entries[False].path
            if not local:
                found.append((base, path, entries[False].size, None))
                continue
            # Size and identity of one and the same file: a cleaner's committed
            # ``.swap`` (renamed to ``path`` next, keeping its inode) or the file.
            for candidate in ([entries[True].path] if True in entries else []) + [path]:
                try:
                    st = os.stat(candidate)
                except FileNotFoundError:  # renamed, merged into an earlier segment, deleted
                    continue
                found.append((base, path, st.st_size, (st.st_dev, st.st_ino)))
                break
        for i, (base, path, size, identity) in enumerate(found):
            next_base = found[i + 1][0] if i + 1 < len(found) else None
            out.append(SegmentFile(data_dir, path, topic, partition, base, size, identity,
                                   next_base))
    out.sort(key=lambda s: (s.topic, s.partition, s.data_dir, s.base_offset))
    return out


def _index_positions(fs, segment: SegmentFile) -> list[tuple[int, int]]:
    """(offset, position) entries of the segment's offset index that look right:
    increasing and inside the file (an active segment's index is preallocated
    with zeros after its last entry)."""
    return _index_entries(fs, segment.path, segment.base_offset, segment.size)


def _index_entries(fs, log_path: str, base_offset: int, size: int) -> list[tuple[int, int]]:
    """``_index_positions`` of the log file at ``log_path`` (``.log`` or ``.log.swap``)."""
    head, _, tail = log_path.rpartition(".log")
    index_path = head + ".index" + tail
    try:
        with fs.open_input_file(index_path) as f:
            raw = f.read()
    except (FileNotFoundError, OSError):
        return []
    entries, last_offset, last_position = [], -1, -1
    for i in range(len(raw) // OFFSET_INDEX_ENTRY.size):
        relative, position = OFFSET_INDEX_ENTRY.unpack_from(raw, i * OFFSET_INDEX_ENTRY.size)
        if relative <= last_offset or position <= last_position or position >= size:
            break
        entries.append((base_offset + relative, position))
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


def _position_of_offset(f, hints: list[tuple[int, int]], size: int, base_offset: int,
                        offset: int) -> int:
    """A position at or before the first entry whose offset is ``offset`` or more:
    the nearest index entry at or below ``offset`` that points at a whole, valid
    batch holding its offset, or the start of the file."""
    for indexed, position in reversed(hints):
        if indexed > offset:
            continue
        header = _read_header(f, position, size)
        if (header is not None and base_offset <= header[0] <= indexed
                and _valid(f.read_at(header[1], position), header[2])):
            return position
        break
    return 0


def plan_splits(data_dirs: list[str], topics=None, split_bytes: int = SPLIT_BYTES) -> list[Split]:
    """The splits of every segment of ``data_dirs`` (see the module docstring)."""
    splits = []
    for segment in segment_files(data_dirs, topics):
        whole = Split(segment, 0, segment.size, segment.base_offset, segment.next_base)
        if segment.size <= split_bytes:
            splits.append(whole)
            continue
        fs, _ = filesystem(segment.data_dir)
        try:
            f = _open(fs, segment.path)
        except FileNotFoundError:  # gone since listed: read by offsets
            splits.append(whole)
            continue
        with f:
            if getattr(f, "identity", None) != segment.identity:
                splits.append(whole)  # replaced since listed: read by offsets, uncut
                continue
            hints = _index_positions(fs, segment)
            cuts = [(0, segment.base_offset)]
            for target in range(split_bytes, segment.size, split_bytes):
                cut = _boundary_at_or_after(f, target, hints, segment.size, segment.base_offset)
                if cut <= cuts[-1][0] or cut >= segment.size:
                    continue
                header = _read_header(f, cut, segment.size)
                if header is None:  # a torn tail from here on: no split starts in it
                    break
                cuts.append((cut, header[0]))
        bounds = cuts + [(segment.size, segment.next_base)]
        splits.extend(Split(segment, a, b, lo, hi) for (a, lo), (b, hi) in zip(bounds, bounds[1:]))
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
    entry (counted in ``stats["torn"]``).  A local file replaced or deleted since
    planning is read by offsets (see the module docstring)."""
    segment = split.segment
    fs, _ = filesystem(segment.data_dir)
    if segment.identity is None:  # a remote file: a static copy
        with fs.open_input_file(segment.path) as f:
            size = min(segment.size, f.size())
            yield from _entries(f, split.start, min(split.end, size), size, verify, stats)
        return
    try:
        f = _LocalFile(segment.path)
    except FileNotFoundError:
        f = None
    if f is not None and f.identity == segment.identity:
        with f:
            size = min(segment.size, f.size())  # a file cut since planning ends earlier
            yield from _entries(f, split.start, min(split.end, size), size, verify, stats)
        return
    if f is not None:
        f.close()
    yield from _read_by_offsets(fs, split, verify, stats)


def _entries(f, start: int, end: int, size: int, verify: bool, stats: dict | None,
             first_offset: int | None = None, end_offset: int | None = None) -> Iterator[Entry]:
    """The whole entries of ``f`` that start in ``[start, end)`` and end by ``size``;
    with ``first_offset``, only those whose offset lies in ``[first_offset,
    end_offset)`` (entries are in offset order: the first one past it ends the walk)."""
    pos = start
    while pos < end:
        window = f.read_at(min(READ_WINDOW, size - pos), pos)
        offset = 0
        while pos + offset < end:
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
            if first_offset is not None:
                (entry_offset,) = struct.unpack_from(">q", window, offset)
                if end_offset is not None and entry_offset >= end_offset:
                    return
                if entry_offset < first_offset:
                    offset += entry_size
                    continue
            data = bytes(window[offset:offset + entry_size])
            if verify and not _valid(data, magic):
                _torn(stats)
                return
            yield Entry(data, magic)
            offset += entry_size
        if offset == 0 and pos < end:
            _torn(stats)  # fewer bytes left than an entry header
            return
        pos += offset


# A folder changing between two listings is a cleaner swap, a retention pass or a
# truncation taking place; a read tries again, this many times at most.
_SNAPSHOT_ATTEMPTS = 50


def _read_by_offsets(fs, split: Split, verify: bool, stats: dict | None) -> Iterator[Entry]:
    """The entries in the split's offset range, from the files of its folder now."""
    folder = os.path.dirname(split.segment.path)
    lo, hi = split.first_offset, split.end_offset
    for _ in range(_SNAPSHOT_ATTEMPTS):
        files = _open_covering(folder, lo, hi)
        if files is None:
            continue
        try:
            for base, path, f in files:
                size = f.size()
                hints = _index_entries(fs, path, base, size)
                start = _position_of_offset(f, hints, size, base, lo)
                yield from _entries(f, start, size, size, verify, stats, lo, hi)
        finally:
            for _base, _path, f in files:
                f.close()
        return
    raise OSError(f"the segment files of {folder} kept changing while they were read")


def _covering(folder: str, lo: int, hi: int | None) -> list[tuple[int, str]]:
    """(base offset, path) of the segment files that hold the offsets ``[lo, hi)``:
    the one with the greatest base offset at or below ``lo``, then those starting
    inside the range.  A ``.log.swap`` file is a cleaner's committed replacement
    of the segment of its name (its final rename is still to come): it is
    taken instead of that ``.log``."""
    files: dict[int, str] = {}
    for name in os.listdir(folder):
        m = SEGMENT_LOG_OR_SWAP.match(name)
        if m and (name.endswith(".swap") or int(m.group(1)) not in files):
            files[int(m.group(1))] = os.path.join(folder, name)
    bases = sorted(files)
    below = [b for b in bases if b <= lo][-1:]
    return [(b, files[b]) for b in below + [b for b in bases
                                            if b > lo and (hi is None or b < hi)]]


def _open_covering(folder: str, lo: int, hi: int | None):
    """The files that hold ``[lo, hi)``, opened, as one state of the folder: listed
    again after opening, with the same names and identities; None when the
    folder changed meanwhile.  No folder (a deleted partition): no files."""
    try:
        listed = _covering(folder, lo, hi)
    except FileNotFoundError:
        return []
    opened = []
    try:
        for base, path in listed:
            opened.append((base, path, _LocalFile(path)))
        if _covering(folder, lo, hi) == listed and all(
                _identity(path) == f.identity for _base, path, f in opened):
            return opened
    except FileNotFoundError:
        pass
    for _base, _path, f in opened:
        f.close()
    return None


def _identity(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _torn(stats: dict | None) -> None:
    if stats is not None:
        stats["torn"] = stats.get("torn", 0) + 1


def compaction_note(data_dirs) -> str | None:
    """What the store's cleaner checkpoints say: whether compaction has already
    removed superseded commits from ``__consumer_offsets`` (the history then
    starts later than the first commit), or None."""
    from kcoord.storage.manager import read_checkpoint  # the driver only: not in Spark's workers

    cleaned = {}
    for d in data_dirs:
        if "://" in d:
            continue  # a remote store: its checkpoints are not read here
        path = os.path.join(d, CLEANER_FILE)
        if os.path.exists(path):
            cleaned.update({p: o for (t, p), o in read_checkpoint(path).items()
                            if t == OFFSETS_TOPIC and o > 0})
    if not cleaned:
        return None
    return (f"compaction has already cleaned {len(cleaned)} __consumer_offsets partition(s) "
            f"(up to offset {max(cleaned.values())}): commits superseded before then are gone, "
            "so the history of those groups starts later than their first commit")
