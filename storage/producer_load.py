"""Loading a partition's producer state (Kafka's ``ProducerStateManager``
rebuilt from the log): the producer ids, epochs and last batches that
``storage.producer_state`` keeps, replayed from every batch header.

A log opened after a restart has no state until it is needed: the first
idempotent append either waits for ``PartitionLog.load_producer_state``,
which runs ``scan`` in a worker thread, or replays the headers itself under
the lock (``replay``).  ``scan`` reads most of the log without the partition
lock, then takes it only to read what was appended meanwhile, so appends and
reads on the event loop never wait for the whole scan.
"""

from __future__ import annotations

from kcoord.protocol.records import decode_batch, decode_control_record
from kcoord.storage.producer_state import ProducerState


def marker_of(data) -> tuple[int, int] | None:
    """``(marker type, coordinator epoch)`` of a control batch's bytes (None if
    it holds no readable control record)."""
    try:
        records = decode_batch(data, verify=False).records
        return decode_control_record(records[0]) if records else None
    except Exception:  # a damaged marker (construct's errors among others): none
        return None


def replay_batch(state: ProducerState, segment, pos: int, header) -> None:
    """Fold one batch read back from ``segment`` into ``state``: its header, and
    for an end marker the marker itself."""
    if header.is_control and header.producer_id >= 0:
        state.replay(header, marker_of(segment.read(pos, header.size)))
    else:
        state.replay(header)


def replay(segments) -> ProducerState:
    """The state every batch header of ``segments`` leaves."""
    state = ProducerState()
    for segment in segments:
        for pos, header in segment.headers():
            replay_batch(state, segment, pos, header)
    return state


def scan(plog) -> None:
    """Load ``plog``'s producer state with the lock held only at the start and
    the end; a segment deleted or the log truncated meanwhile starts it again
    (three times, then once under the lock)."""
    for _attempt in range(3):
        with plog._lock:
            if plog.producers_loaded:
                return
            plog._check_open()
            segments = list(plog.segments)
            sizes = [s.size for s in segments]
            end = plog.log_end_offset
        state = ProducerState()
        try:
            for segment, size in zip(segments, sizes):
                for pos, header in segment.headers(0, size):
                    replay_batch(state, segment, pos, header)
        except (OSError, ValueError):
            continue  # a segment went away meanwhile (retention, compaction): again
        with plog._lock:
            if plog.producers_loaded:
                return
            if plog.log_end_offset < end:
                continue  # truncated meanwhile
            try:
                for segment in plog.segments:
                    if segment.next_offset <= end:
                        continue
                    start = sizes[-1] if segment is segments[-1] else 0
                    for pos, header in segment.headers(start):
                        if header.last_offset >= end:
                            replay_batch(state, segment, pos, header)
            except OSError as exc:
                raise plog.io_failed(exc, "producer state load") from exc
            plog._adopt_producers(state)
            return
    with plog._lock:
        if not plog.producers_loaded:
            plog._replay_producers()
