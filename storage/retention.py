"""Retention (UnifiedLog.deleteOldSegments): which segments go, a pure function
(``deletable_count``), and their going (``delete_old_segments``), in one place.

The segment list changes under the partition lock (``PartitionLog.detach_oldest``);
the files are unlinked after it, with only the log's structural lock held, so
appends and reads on the event loop never wait for the disk.
"""

from __future__ import annotations

import structlog

from kcoord.storage.config import LogConfig

log = structlog.get_logger("kcoord.storage")


def delete_old_segments(plog, now: int, below_start_only: bool = False) -> int:
    """One retention pass over ``plog``: the segments ``deletable_count`` condemns
    are taken out of the log and their files deleted.  Returns how many went."""

    def doomed(segments, log_start_offset: int) -> int:
        return deletable_count(segments, log_start_offset, plog.config, now, below_start_only)

    with plog.structural_change():
        gone = plog.detach_oldest(doomed)
        if not gone:
            return 0
        # No reader reaches these segments any more: their files go without
        # the partition lock (freeing a large file's blocks takes a while).
        try:
            for seg in gone:
                seg.delete()
        except OSError as exc:
            raise plog.unlocked_io_failed(exc, "retention") from exc
        log.info("segments_deleted", log=plog.name, count=len(gone),
                 bytes=sum(s.size for s in gone), log_start_offset=plog.log_start_offset)
        return len(gone)


def deletable_count(segments, log_start_offset: int, config: LogConfig, now: int,
                    below_start_only: bool = False) -> int:
    """How many segments, from the oldest, retention deletes now.

    * segments entirely below the log start offset (DeleteRecords) go first;
    * with ``cleanup.policy`` including ``delete``: segments whose largest
      timestamp is older than ``retention.ms``, then the oldest segments while
      the log stays at least ``retention.bytes`` without them.

    ``below_start_only``: only the first (DeleteRecords moving the log start).
    Every segment may go except an empty active one (LocalLog.deletableSegments);
    like Kafka, a non-empty active segment that has expired goes too (the log
    rolls first, so its end offset is kept).
    """
    doomed = 0
    candidates = segments if segments[-1].size > 0 else segments[:-1]
    while doomed < len(segments) - 1 and segments[doomed + 1].base_offset <= log_start_offset:
        doomed += 1
    if not config.delete or below_start_only:
        return doomed
    if config.retention_ms >= 0:
        while doomed < len(candidates) and \
                now - candidates[doomed].largest_timestamp > config.retention_ms:
            doomed += 1
    if config.retention_bytes >= 0:
        excess = sum(s.size for s in segments) - config.retention_bytes
        for seg in candidates[:doomed]:
            excess -= seg.size
        while doomed < len(candidates) and excess - candidates[doomed].size >= 0:
            excess -= candidates[doomed].size
            doomed += 1
    return doomed
