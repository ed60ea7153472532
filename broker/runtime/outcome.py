"""What a shard's operation returns to the runtime (Kafka's ``CoordinatorResult``).

A shard is a pure state machine: an operation takes the request, an opaque
``ticket`` standing for the request that waits for its answer, and ``now``
(milliseconds), changes the state and returns an ``Outcome``: the answers to
give now (``(ticket, response)``) and the ``Write``s to append to the shard's
partition, each with the continuation to call once its records are durable
(or their append failed).  A continuation returns an ``Outcome`` in turn.
``effects`` is work for the coordinator's service outside the shard, which
the runtime hands to it once the answers are given (the transaction
coordinator's end markers, written to other partitions: Kafka's
TransactionMarkerChannelManager).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcoord.protocol.errors import ErrorCode


@dataclass
class Write:
    """Records for the shard's partition, appended together in one batch;
    ``done(error, now)`` is called once they are durable (``NONE``) or the
    append failed."""
    records: list[tuple[bytes, bytes | None]]
    done: Callable[[ErrorCode, int], "Outcome"] | None = None
    # A transactional producer's records ``(producer id, epoch)``: a batch of
    # their own, part of that producer's transaction (TxnOffsetCommit).
    producer: tuple[int, int] | None = None
    # Instead of records, the end marker of a producer's transaction:
    # ``(producer id, epoch, commit, coordinator epoch)``.
    marker: tuple[int, int, bool, int] | None = None


@dataclass(slots=True)
class Outcome:
    answers: list[tuple[Any, Any]] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    effects: list[Any] = field(default_factory=list)

    def answer(self, ticket, response) -> "Outcome":
        if ticket is not None:
            self.answers.append((ticket, response))
        return self

    def merge(self, other: "Outcome | None") -> "Outcome":
        if other is not None:
            self.answers.extend(other.answers)
            self.writes.extend(other.writes)
            self.effects.extend(other.effects)
        return self
