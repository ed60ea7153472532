"""Drives the pure coordinator core with a manual clock: requests go in with a
ticket, answers come back per ticket, and ``__consumer_offsets`` writes wait
until the test makes them durable (or fail them)."""

from __future__ import annotations

import itertools

from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from kcoord.broker.groups.common import CoordinatorConfig, JoinRequest
from kcoord.broker.groups.consumer_membership import HeartbeatRequest
from kcoord.broker.groups.coordinator import GroupCoordinator
from kcoord.broker.runtime.outcome import Outcome
from kcoord.broker.groups.offsets import OffsetAndMetadata
from kcoord.broker.runtime.timers import ManualClock
from kcoord.protocol.errors import ErrorCode as E


def subscription(*topics: str) -> bytes:
    """The subscription bytes a real consumer sends (built by kafka-python)."""
    return ConsumerProtocolSubscription(version=0, topics=list(topics), user_data=None
                                        ).encode(version=0)


class Ticket:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Ticket({self.name})"


class Harness:
    def __init__(self, **config):
        self.clock = ManualClock(1_000_000)
        ids = itertools.count(1)
        self.core = GroupCoordinator(CoordinatorConfig(**config), now=self.clock.now,
                                     new_uuid=lambda: f"uuid{next(ids)}")
        self.answers: dict[Ticket, list] = {}
        self.pending = []  # writes not yet durable
        self.durable = []  # every record made durable, in order
        self._names = itertools.count()

    @property
    def now(self) -> int:
        return self.clock.now

    def _take(self, outcome: Outcome) -> None:
        for ticket, response in outcome.answers:
            self.answers.setdefault(ticket, []).append(response)
        self.pending.extend(outcome.writes)

    def ticket(self, name=None) -> Ticket:
        return Ticket(name or f"t{next(self._names)}")

    def answer(self, ticket: Ticket):
        """The one answer of ``ticket`` (None while it is parked)."""
        got = self.answers.get(ticket)
        if got is None:
            return None
        assert len(got) == 1, f"{ticket} answered {len(got)} times: {got}"
        return got[0]

    # -- requests ---------------------------------------------------------------

    def join(self, group="g", member="", *, protocols=None, instance=None, session=10_000,
             rebalance=30_000, version=9, client="c", protocol_type="consumer") -> Ticket:
        ticket = self.ticket()
        req = JoinRequest(group, member, protocol_type,
                          protocols if protocols is not None else [("range", subscription("t"))],
                          session, rebalance, instance, client, "/127.0.0.1", version)
        self._take(self.core.join(ticket, req, self.now))
        return ticket

    def join_new(self, group="g", **kwargs) -> tuple[str, Ticket]:
        """The two-step join of a dynamic member: its id, and its parked JoinGroup."""
        first = self.join(group, **kwargs)
        assert self.answer(first)["error_code"] == E.MEMBER_ID_REQUIRED
        member_id = self.answer(first)["member_id"]
        return member_id, self.join(group, member_id, **kwargs)

    def sync(self, group, generation, member, assignments=(), *, instance=None,
             protocol_type=None, protocol_name=None) -> Ticket:
        ticket = self.ticket()
        self._take(self.core.sync(ticket, group, generation, member, instance, protocol_type,
                                  protocol_name, list(assignments), self.now))
        return ticket

    def heartbeat(self, group, generation, member, instance=None) -> E:
        return self.core.heartbeat(group, generation, member, instance, self.now)

    def leave(self, group, *members):
        code, errors, outcome = self.core.leave(
            group, [m if isinstance(m, tuple) else (m, None, None) for m in members], self.now)
        self._take(outcome)
        return code, errors

    def commit(self, group, offsets, generation=-1, member="", instance=None,
               version=9, retention=-1) -> Ticket:
        ticket = self.ticket()
        self._take(self.core.commit(
            ticket, group, generation, member, instance,
            {tp: OffsetAndMetadata(o, -1, m) for tp, (o, m) in offsets.items()},
            self.now, version=version, retention_ms=retention))
        return ticket

    def consumer_heartbeat(self, group="g", member="m1", epoch=0, *, instance=None, rack=None,
                           rebalance=None, topics=None, regex=None, assignor=None,
                           owned=None, version=1, settle=True,
                           describable=None) -> dict | None:
        """A ConsumerGroupHeartbeat; a join (epoch 0) sends what a client sends on
        its first heartbeat.  Settles the writes and returns the answer."""
        if epoch == 0:
            rebalance = 300_000 if rebalance is None else rebalance
            owned = [] if owned is None else owned
            topics = ["t"] if topics is None and regex is None else topics
        ticket = self.ticket()
        req = HeartbeatRequest(group, member, epoch, instance, rack,
                               -1 if rebalance is None else rebalance, topics, regex, assignor,
                               owned, "client", "/127.0.0.1", version, describable)
        self._take(self.core.consumer_heartbeat(ticket, req, self.now))
        if settle:
            self.settle()
        return self.answer(ticket)

    def delete_groups(self, *groups) -> Ticket:
        ticket = self.ticket()
        self._take(self.core.delete_groups(ticket, list(groups), self.now))
        return ticket

    def delete_offsets(self, group, partitions) -> Ticket:
        ticket = self.ticket()
        self._take(self.core.delete_offsets(ticket, group, list(partitions), self.now))
        return ticket

    # -- time and writes ----------------------------------------------------------

    def advance(self, ms: int) -> None:
        """Move the clock and run the timers due, tick after tick, as the shell's
        loop timer would with no request arriving in between."""
        self.clock.advance(ms)
        for _ in range(1000):
            self._take(self.core.tick(self.now))
            due = self.core.next_deadline()
            if due is None or due > self.now:
                return
        raise AssertionError("timers kept firing at the same instant")

    def settle(self, error: E = E.NONE) -> int:
        """Make every pending write durable (or fail it); returns how many."""
        count = 0
        while self.pending:
            write = self.pending.pop(0)
            count += 1
            if error is E.NONE:
                self.durable.extend(write.records)
            if write.done is not None:
                self._take(write.done(error, self.now))
        return count

    def stable_group(self, group="g", members=1, **kwargs) -> list[str]:
        """A Stable group of ``members`` dynamic members; returns their ids, leader first."""
        ids, tickets = [], []
        for _ in range(members):
            member_id, ticket = self.join_new(group, **kwargs)
            ids.append(member_id)
            tickets.append(ticket)
        self.advance(0)  # the initial delay (0 by default) ends the join phase
        self.settle()
        joined = [self.answer(t) for t in tickets]
        assert all(j is not None and j["error_code"] == E.NONE for j in joined), joined
        generation = joined[0]["generation_id"]
        leader = joined[0]["leader"]
        syncs = [self.sync(group, generation, m,
                           [(x, x.encode()) for x in ids] if m == leader else ())
                 for m in ids]
        self.settle()
        assert all(self.answer(s)["error_code"] == E.NONE for s in syncs)
        return [leader] + [m for m in ids if m != leader]
