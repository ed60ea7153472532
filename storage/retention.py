"""Which segments retention deletes (UnifiedLog.deleteOldSegments), as a pure function."""

from __future__ import annotations

from kcoord.storage.config import LogConfig


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
