"""Time for the coordinators: clocks and one heap of deadlines.

A shard never reads the time itself and never sleeps: it is given ``now``
(milliseconds) by the runtime, which uses ``WallClock``; unit tests use
``ManualClock`` and advance it.

``Deadlines`` holds every timer (session expiry, rebalance timeout, initial
delay, pending-member and pending-sync timeouts, offset expiry) in one heap
keyed by what the timer is for, e.g. ``("join", group)``.
Re-arming a key replaces its deadline (a consumer-group heartbeat pushes its
session expiry back) and cancelling forgets it; stale heap entries are skipped lazily, so
either costs O(log n) and nothing is scanned.  The runtime keeps one heap for
every shard (each sees it through ``ShardTimers``), arms a single loop timer
for ``next_deadline()`` and, when it fires, takes the due keys one at a time.
"""

from __future__ import annotations

import heapq
import time
from typing import Any, Hashable


class MonotonicClock:
    """Milliseconds from the monotonic clock (never goes back)."""

    def __call__(self) -> int:
        return time.monotonic_ns() // 1_000_000


class WallClock:
    """Wall-clock milliseconds that never go back: the time of day at start-up,
    moved on by the monotonic clock.  Kafka stamps commits and state changes
    with the time of day, and its timers must not jump with it."""

    def __init__(self) -> None:
        # In nanoseconds: two readings rounded to milliseconds apart could put
        # the stamps up to 1 ms ahead of the time of day, so that a commit
        # acknowledged before a record was produced would seem to come after it.
        self._base_ns = time.time_ns() - time.monotonic_ns()

    def __call__(self) -> int:
        return (self._base_ns + time.monotonic_ns()) // 1_000_000


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, now: int = 0):
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("a clock does not go back")
        self.now += ms
        return self.now


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._armed: dict[Hashable, tuple[int, int, Any]] = {}  # key -> (when, seq, payload)
        self._next_seq = 0

    def __len__(self) -> int:
        return len(self._armed)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._armed

    def schedule(self, key: Hashable, when: int, payload: Any = None,
                 seq: int | None = None) -> None:
        """Arm ``key`` for ``when``, replacing any deadline it had.  ``seq`` (from
        ``next_seq``) places it among deadlines at the same instant as if armed
        then: a timer standing for several deadlines (a group's sessions) keeps
        each one's place."""
        fresh = self.next_seq()  # moves mark() on, which says "scheduled since"
        if seq is None:
            seq = fresh
        self._armed[key] = (when, seq, payload)
        heapq.heappush(self._heap, (when, seq, key))
        if len(self._heap) > 2 * len(self._armed) + 64:
            self._compact()

    def cancel(self, key: Hashable) -> bool:
        return self._armed.pop(key, None) is not None

    def deadline(self, key: Hashable) -> int | None:
        armed = self._armed.get(key)
        return None if armed is None else armed[0]

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def next_seq(self) -> int:
        """A place in the order of deadlines armed at the same instant."""
        seq = self._next_seq
        self._next_seq += 1
        return seq

    def peek(self) -> tuple[int, int] | None:
        """``(when, seq)`` of the deadline that comes up next, or None."""
        self._drop_stale()
        return self._heap[0][:2] if self._heap else None

    def pop_due(self, now: int) -> list[tuple[Hashable, Any]]:
        """Every key due at ``now`` (deadline <= now), earliest first; they are disarmed."""
        due = []
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now:
                return due
            _when, _seq, key = heapq.heappop(self._heap)
            _w, _s, payload = self._armed.pop(key)
            due.append((key, payload))

    def mark(self) -> int:
        """A bound for ``pop_next_due``: deadlines armed after this call are newer."""
        return self._next_seq

    def pop_next_due(self, now: int, armed_before: int | None = None
                     ) -> tuple[Hashable, Any] | None:
        """The earliest key due at ``now`` (and armed before ``armed_before``, a
        ``mark``), disarmed; None if none is.  Taking them one at a time lets
        firing one cancel another that is also due."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now:
            return None
        if armed_before is not None and self._heap[0][1] >= armed_before:
            return None
        _when, _seq, key = heapq.heappop(self._heap)
        _w, _s, payload = self._armed.pop(key)
        return key, payload

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            when, seq, key = heap[0]
            armed = self._armed.get(key)
            if armed is not None and armed[1] == seq:
                return
            heapq.heappop(heap)

    def _compact(self) -> None:
        """Rebuild the heap from the armed deadlines when stale entries pile up
        (heartbeats re-arm the same keys again and again)."""
        self._heap = [(when, seq, key) for key, (when, seq, _p) in self._armed.items()]
        heapq.heapify(self._heap)


class ShardTimers:
    """One shard's view of the runtime's ``Deadlines``: its keys carry the shard's
    partition, so one heap holds the timers of every shard and the runtime
    knows which shard a due key belongs to."""

    __slots__ = ("_deadlines", "_partition")

    def __init__(self, deadlines: Deadlines, partition: int):
        self._deadlines = deadlines
        self._partition = partition

    def __contains__(self, key: Hashable) -> bool:
        return (self._partition, key) in self._deadlines

    def schedule(self, key: Hashable, when: int, payload: Any = None,
                 seq: int | None = None) -> None:
        self._deadlines.schedule((self._partition, key), when, payload, seq)

    def next_seq(self) -> int:
        return self._deadlines.next_seq()

    def peek(self) -> tuple[int, int] | None:
        return self._deadlines.peek()

    def cancel(self, key: Hashable) -> bool:
        return self._deadlines.cancel((self._partition, key))

    def deadline(self, key: Hashable) -> int | None:
        return self._deadlines.deadline((self._partition, key))
