"""Fetch sessions (KIP-227), as Kafka's FetchSession.scala keeps them.

A full fetch with session epoch 0 creates a session holding the partitions it
asked for, with what was last sent of each (high watermark, last stable
offset, log start offset); its answer carries the new session id and the
session's epoch becomes 1.  An incremental fetch (the session id and its
current epoch) adds or updates the partitions it names, drops its forgotten
ones, and is answered with only the partitions that have something new:
records, an error, or a changed offset (``CachedPartition``'s
``maybeUpdateResponseData``).  Partitions that returned records move to the
end of the session, so that every partition gets its turn under the byte
limits.

Errors, as Kafka: an unknown session id is FETCH_SESSION_ID_NOT_FOUND, a wrong
epoch INVALID_FETCH_SESSION_EPOCH, and a session made with topic names asked
by topic ids (or the reverse) FETCH_SESSION_TOPIC_ID_ERROR.  A full fetch naming
a session closes it; epoch -1 closes it without making a new one.

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions; when
it is full, the least recently used session is evicted if it has been idle for
two minutes (Kafka's internal ``min.incremental.fetch.session.eviction.ms``),
otherwise no session is made
and the client goes on with full fetches (session id 0), as Kafka does.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from dataclasses import dataclass

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch: 1 after 0, wrapping back to 1 after Integer.MAX_VALUE."""
    return 1 if epoch >= INT32_MAX or epoch < 0 else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """A partition of a session: what the client asked last, what was last sent."""

    name: str | None
    topic_id: object
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def update_request(self, part) -> None:
        self.fetch_offset = part.fetch_offset
        self.partition_max_bytes = part.partition_max_bytes
        self.current_leader_epoch = part.current_leader_epoch

    def must_respond(self, answer: dict) -> bool:
        """Whether an incremental answer includes this partition; remembers what is sent."""
        respond = bool(answer["records"]) or answer["error_code"] != 0
        # An error answer carries -1 offsets, so once the error is gone the
        # partition differs from what was sent and is answered again.
        for field in ("high_watermark", "last_stable_offset", "log_start_offset"):
            if getattr(self, field) != answer[field]:
                respond = True
                setattr(self, field, answer[field])
        return respond


class FetchSession:
    __slots__ = ("session_id", "epoch", "partitions", "uses_topic_ids", "last_used")

    def __init__(self, session_id: int, uses_topic_ids: bool, now: float):
        self.session_id = session_id
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.partitions: OrderedDict[tuple, CachedPartition] = OrderedDict()
        self.uses_topic_ids = uses_topic_ids
        self.last_used = now


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, eviction_ms: int = 120_000,
                 clock=time.monotonic, rng: random.Random | None = None):
        self.max_slots = max_slots
        self.eviction_s = eviction_ms / 1000
        self.clock = clock
        self.rng = rng or random.Random()
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def touch(self, session: FetchSession) -> None:
        session.last_used = self.clock()
        self.sessions.move_to_end(session.session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def create(self, uses_topic_ids: bool) -> FetchSession | None:
        """A new session, or None when the cache is full of sessions still in use."""
        if self.max_slots <= 0:
            return None
        now = self.clock()
        if len(self.sessions) >= self.max_slots:
            oldest = next(iter(self.sessions.values()))
            if now - oldest.last_used < self.eviction_s:
                return None
            del self.sessions[oldest.session_id]
        while True:
            session_id = self.rng.randint(1, INT32_MAX)
            if session_id not in self.sessions:
                break
        session = FetchSession(session_id, uses_topic_ids, now)
        self.sessions[session_id] = session
        return session
