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

from storage.producer_state import ProducerState


def replay(segments) -> ProducerState:
    """The state every batch header of ``segments`` leaves."""
    state = ProducerState()
    for segment in segments:
        for _pos, header in segment.headers():
            state.replay(header)
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
                for _pos, header in segment.headers(0, size):
                    state.replay(header)
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
                    for _pos, header in segment.headers(start):
                        if header.last_offset >= end:
                            state.replay(header)
            except OSError as exc:
                raise plog.io_failed(exc, "producer state load") from exc
            plog.producers = state
            plog.producers_loaded = True
            return
    with plog._lock:
        if not plog.producers_loaded:
            plog._replay_producers()
