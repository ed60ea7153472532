"""Opening a partition folder: the steps of Kafka's LogLoader.

1. Finish or roll back compaction swaps a crash cut short.
2. Delete index files that have no ``.log``.
3. After an unclean shutdown, recover every segment from the one holding the
   recovery point: validate each batch (CRC-32C, sizes, offsets that never go
   back), rebuild the indexes and cut the segment after its last valid batch;
   segments after a cut are deleted, before the cut.  Offset gaps are not corruption:
   compacted logs, logs whose policy changed and folders copied from a Kafka
   broker all have them.
4. Otherwise trust the files, rebuilding an index only if it fails its sanity
   check.
"""

from __future__ import annotations

import os
from bisect import bisect_right

import structlog

from kcoord.storage.config import LogConfig
from kcoord.storage.files import fsync_dir
from kcoord.storage.layout import SEGMENT_FILE, segment_name
from kcoord.storage.segment import LogSegment

log = structlog.get_logger("kcoord.storage")



def segment_bases(directory: str) -> list[int]:
    """Base offsets of the ``.log`` files in a folder, in order."""
    bases = set()
    for fname in os.listdir(directory):
        m = SEGMENT_FILE.match(fname)
        if m and m.group(2) == "log" and not m.group(3):
            bases.add(int(m.group(1)))
    return sorted(bases)


def remove_orphan_indexes(directory: str, bases: list[int]) -> None:
    known = set(bases)
    for fname in os.listdir(directory):
        m = SEGMENT_FILE.match(fname)
        if m and m.group(2) in ("index", "timeindex", "txnindex") and not m.group(3):
            if int(m.group(1)) not in known:
                os.unlink(os.path.join(directory, fname))


def load_segments(directory: str, config: LogConfig, *, recovery_point: int,
                  clean_shutdown: bool, name: str) -> list[LogSegment]:
    """Open (and after a crash, recover) the segments of a folder, in offset order."""
    from kcoord.storage.cleaner import complete_interrupted_swaps

    complete_interrupted_swaps(directory)
    ordered = segment_bases(directory)
    remove_orphan_indexes(directory, ordered)
    recover_from = None
    if not clean_shutdown:
        # Every segment that may hold unflushed data: the one containing the
        # recovery point and all later ones (LogLoader.recoverLog).
        i = bisect_right(ordered, recovery_point) - 1
        recover_from = ordered[max(i, 0)] if ordered else 0
    segments: list[LogSegment] = []
    for n, base in enumerate(ordered):
        segment = LogSegment(directory, base, index_interval_bytes=config.index_interval_bytes)
        if recover_from is None or base < recover_from:
            segment.load()
            segments.append(segment)
            continue
        before = segment.size

        def drop_later(n=n, base=base) -> None:
            # The segments after a cut go before the cut itself, and the folder
            # is fsynced: a crash meanwhile leaves the damaged segment as it
            # was, which the next start finds and cuts again, never a cut
            # segment followed by later ones (an offset gap, and records from
            # after the damage back in the log).
            later = ordered[n + 1:]
            for stale_base in later:
                stale = LogSegment(directory, stale_base)
                log.warning("segment_deleted_after_truncation", log=name,
                            segment=segment_name(stale_base), base_offset=stale_base,
                            bytes=stale.size,
                            reason=f"it follows invalid bytes in segment {segment_name(base)}")
                stale.delete()
            if later:
                fsync_dir(directory)

        truncated = segment.recover(before_cut=drop_later)
        segments.append(segment)
        if truncated == 0:
            log.info("segment_recovered", log=name, segment=segment_name(base),
                     bytes_valid=segment.size, bytes_truncated=0)
            continue
        # Kafka's LogSegment.recover/LogLoader: "Found invalid messages in log
        # segment ... truncating to offset ...", a warning with what is lost.
        log.warning("segment_truncated", log=name, segment=segment_name(base),
                    truncated_to_offset=segment.next_offset, bytes_valid=segment.size,
                    bytes_truncated=truncated, bytes_before=before,
                    reason=f"invalid bytes at byte {segment.size} of the segment: "
                           f"everything from offset {segment.next_offset} on is dropped")
        break
    return segments
