"""Replaying what the coordinator wrote gives the live state (as Kafka's replay
of its records does): random sequences of joins, syncs, heartbeats, leaves, commits,
deletes, failed writes and clock advances against the core; after every write
that completes, the durable records are replayed as at start-up and compared
with what Kafka's records persist of the live groups and offsets.

What the records persist, state by state (the model the property checks):

- Stable: everything of the group, since a group becomes Stable only once the
  leader's assignment is durable and nothing changes a Stable group's
  members without another record (a static member's replacement) or a
  rebalance.
- Empty: the generation and protocol type, no protocol, leader or members, and
  the time the group became Empty (the clock of its offsets' expiry).  One
  accepted difference, as in Kafka: when the record of an emptied group fails
  to be written the live group stays Empty and the log keeps the previous
  generation (GroupMetadataManager.completeClassicGroupJoin only logs it).
- PreparingRebalance, CompletingRebalance: nothing new; the log holds the
  group as it was the last time it was Stable or Empty with no write of its
  record in flight.
- Dead or deleted: no record (a tombstone); a group of offsets only ("simple",
  generation 0, no protocol type) has no record of its own either.
- Offsets, whatever the state: exactly the live ones once no write is in flight,
  with offset, leader epoch, metadata, commit and expire timestamps.

The strategy is shaped so that most examples reach Stable groups with members
(joins are mostly compatible, a "stabilize" step runs a group's rebalance to
its end, live members heartbeat while time passes).  Measured over the 500
examples of one run (KCOORD_GROUP_STATS=1 prints it): of the group states
seen at the checks, 26% Stable, 17% Empty, 6% CompletingRebalance, 28%
PreparingRebalance and 22% no group; 488 of the examples saw a Stable group
with members, 395 a failed write, 146 an expired offset and 363 a deleted
group.
"""

from __future__ import annotations

import collections
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.broker.groups.common import JoinRequest
from kcoord.broker.groups.group import GroupState as S
from kcoord.broker.groups.loader import replay
from kcoord.broker.groups.offsets import OffsetAndMetadata
from kcoord.protocol import group_records as G
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.group_harness import Harness, subscription

GROUPS = ("g1", "g2")
PARTITIONS = [("t", 0), ("t", 1), ("u", 0), ("v", 0)]
PROTOCOLS = [
    [("range", subscription("t")), ("roundrobin", subscription("t", "u"))],
    [("roundrobin", subscription("u", "t"))],
    [("range", subscription("t", "v"))],
    [("sticky", subscription("v"))],  # shares no protocol with the others
]
SESSIONS = (6_000, 10_000, 25_000)
REBALANCES = (6_000, 30_000, 45_000)
CLIENTS = (("c0", "/127.0.0.1"), ("c1", "/10.0.0.5"))
ADVANCES = (0, 100, 1_000, 3_000, 7_000, 12_000, 30_000, 65_000, 130_000, 400_000)
# Storage errors a write can fail with (the core maps them to client errors).
FAILURES = (E.NOT_COORDINATOR, E.KAFKA_STORAGE_ERROR, E.NOT_LEADER_OR_FOLLOWER,
            E.REQUEST_TIMED_OUT, E.MESSAGE_TOO_LARGE)
RETENTION_MS = 60_000  # offsets.retention.minutes=1
STATS = collections.Counter()
AFTER = "after the group's later write"

_KINDS = (["join"] * 5 + ["static"] * 2 + ["rejoin"] * 2 + ["sync"] * 3 + ["stabilize"] * 5 +
          ["heartbeat"] + ["live"] * 3 + ["leave"] * 2 + ["leave-all"] + ["commit"] * 4 +
          ["simple-commit"] * 3 + ["advance"] * 4 + ["delete"] + ["delete-offsets"] * 2)
_WRITES = ["ok"] * 7 + ["keep", "fail", "fail"]
OPS = st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(0, 1), st.integers(0, 7),
                         st.integers(0, 9), st.sampled_from(_WRITES)), min_size=15, max_size=40)
CONFIGS = st.fixed_dictionaries({
    "initial_rebalance_delay_ms": st.sampled_from([0, 0, 3_000]),
    "offsets_retention_ms": st.just(RETENTION_MS),
    "offsets_retention_check_interval_ms": st.sampled_from([5_000, 20_000]),
})
# Members each group starts with, run to Stable before the sequence.
START = st.tuples(st.integers(0, 3), st.integers(0, 3))


def _view(group):
    """What a GroupMetadataValue carries of ``group`` (None: no record), plus the
    state a load derives from it.  (Not the subscribed topics: like Kafka's, the
    live group computes them when a generation starts, so a static member that
    replaced another with a new subscription changes them only after a
    restart.)"""
    if group is None or group.state is S.DEAD:
        return None
    members = sorted(
        (m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
         m.session_timeout_ms, m.metadata(group.protocol_name) if group.protocol_name else b"",
         m.assignment) for m in group.members.values())
    view = {"state": group.state, "protocol_type": group.protocol_type,
            "generation": group.generation, "protocol": group.protocol_name,
            "leader": group.leader_id, "members": members,
            "static": dict(group.static_members)}
    if group.state is S.EMPTY and group.protocol_type is not None:
        # The expiry clock of an Empty group's offsets.  (A Stable group's
        # record carries the time of its CompletingRebalance, which nothing
        # reads: its offsets expire by their commit timestamps.)
        view["since"] = group.current_state_timestamp
    if view == {"state": S.EMPTY, "protocol_type": None, "generation": 0, "protocol": None,
                "leader": None, "members": [], "static": {}}:
        return "simple"  # a group with no record: offsets only, or none at all
    return view


class Run(Harness):
    """The harness with the model: every write completes (or fails, or stays in
    flight) as the sequence says, and the expectation of each group's record is
    kept from what the live group was when Kafka's records describe it."""

    def __init__(self, **config):
        super().__init__(**config)
        self.config = config
        self.expected: dict[str, object] = {}  # group -> the view its records replay to
        self.stale: set[str] = set()  # groups whose emptied record failed to be written
        self.sending: dict[str, bytes] | None = None  # the leader's SyncGroup assignment
        self.kept = 0  # writes left in flight by an earlier step
        self.seen = collections.Counter()

    def _expectation(self, group_id: str):
        """What a group record written now stands for: the live group as Kafka's
        record describes it in its state (see the module docstring)."""
        group = self.core.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return None  # a tombstone
        if group.state is S.PREPARING_REBALANCE:
            return "simple"  # the record of a group JoinGroup just created
        view = _view(group)
        if group.state is S.COMPLETING_REBALANCE:
            # The leader's SyncGroup: the group as it will be once Stable.
            assert self.sending is not None, "a group record outside the leader's SyncGroup"
            view["state"] = S.STABLE
            view["members"] = sorted(m[:-1] + (self.sending.get(m[0], b""),)
                                     for m in view["members"])
        return view

    def _take(self, outcome) -> None:
        later: set[str] = set()
        for write in reversed(outcome.writes):
            mine = [g for g in GROUPS
                    if any(k == G.group_metadata_key(g) for k, _ in write.records)]
            # One call that wrote a group twice (emptied, then deleted by the
            # expiry sweep of the same tick): the live group is as the last
            # record has it; the earlier one stands for whatever the group is
            # once the later write is done (the group again if it failed).
            write.expect = {g: AFTER if g in later else self._expectation(g) for g in mine}
            later.update(mine)
        super()._take(outcome)

    def _group_write_pending(self, group_id) -> bool:
        return any(group_id in w.expect for w in self.pending)

    def complete(self, mode: str, pick: int) -> None:
        """Every pending write durable, or failed with a storage error; "keep"
        leaves them in flight across the next request.  The records are
        checked after each one."""
        if mode == "keep":
            self.kept = len(self.pending)
            return
        # "fail": the writes of this step fail, all of them or from its last one
        # on (those its callbacks issue then fail too, as Kafka's runtime fails
        # every write after a failed one); writes an earlier step left in flight
        # become durable first.  (Earlier writes failing under later ones, which
        # Kafka answers by reverting the later ones too, are not modelled.)
        fail_from = self.kept if pick % 2 == 0 else len(self.pending) - 1
        self.kept = 0
        for index in range(100):
            if not self.pending:
                return
            write = self.pending.pop(0)
            error = FAILURES[pick % len(FAILURES)] \
                if mode == "fail" and index >= fail_from else E.NONE
            if error is E.NONE:
                self.durable.extend(write.records)
            self.seen["failed write" if error is not E.NONE else "durable write"] += 1
            for group_id, expect in write.expect.items():
                if error is E.NONE:
                    self.expected[group_id] = expect
                    self.stale.discard(group_id)
                    self.seen["deleted group"] += int(expect is None)
            if write.done is not None:
                self._take(write.done(error, self.now))
            for group_id, expect in write.expect.items():
                if error is not E.NONE and (expect is AFTER or isinstance(expect, dict) and
                                            expect["state"] is S.EMPTY):
                    # Kafka only logs a failed record of an emptied group: the
                    # live group stays Empty (or comes back so, when its
                    # deletion fails too) ahead of the log.
                    self.stale.add(group_id)
            self.check()
        raise AssertionError("writes kept coming")

    def resolve(self) -> None:
        for group_id in GROUPS:
            if self.expected.get(group_id) is AFTER and not self._group_write_pending(group_id):
                group = self.core.groups.get(group_id)
                assert group is None or group.state in (S.EMPTY, S.DEAD), group_id
                self.expected[group_id] = _view(group)

    def check(self) -> None:
        """The replayed records against the model, group by group once no record
        of the group is in flight; the live groups and offsets once nothing is
        (a deletion is live at once, a commit once durable)."""
        self.resolve()
        loaded = replay(self.durable)
        for group_id in GROUPS:
            if not self._group_write_pending(group_id):
                got = _view(loaded.groups.get(group_id))
                want = self.expected.get(group_id)
                assert (got or "simple") == (want or "simple"), (group_id, got, want)
        if self.pending:
            return
        assert loaded.offsets == self.core.offsets.groups
        for group_id in GROUPS:
            group = self.core.groups.get(group_id)
            if group_id not in self.stale and (
                    group is None or group.state in (S.STABLE, S.EMPTY, S.DEAD)):
                # A restart brings back exactly what runs now.
                assert (_view(group) or "simple") == \
                    (self.expected.get(group_id) or "simple"), group_id
            state = group.state.value if group is not None else "no group"
            self.seen[state] += 1
            self.seen["offsets held"] += int(self.core.offsets.has_offsets(group_id))
            self.seen["Stable with members"] += int(
                state == "Stable" and bool(group.members))

    # -- the steps of a sequence -----------------------------------------------------

    def advance(self, ms: int) -> None:
        held = sum(map(len, self.core.offsets.groups.values()))
        super().advance(ms)
        # Only the expiry sweep removes offsets while time passes.
        self.seen["expired offset"] += held - sum(map(len, self.core.offsets.groups.values()))

    def members(self, group_id):
        group = self.core.groups.get(group_id)
        return list(group.members.values()) if group is not None else []

    def join(self, group="g", member="", *, protocols=None, instance=None, session=10_000,
             rebalance=30_000, client="c", host="/127.0.0.1"):
        ticket = self.ticket()
        self._take(self.core.join(ticket, JoinRequest(
            group, member, "consumer", protocols or PROTOCOLS[0], session, rebalance,
            instance, client, host, 9), self.now))
        return ticket

    def rejoin(self, group_id, member, protocols=None) -> None:
        self.join(group_id, member.member_id, protocols=protocols or member.protocols,
                  instance=member.group_instance_id, session=member.session_timeout_ms,
                  rebalance=member.rebalance_timeout_ms, client=member.client_id,
                  host=member.client_host)

    def sync_member(self, group_id, member, salt) -> None:
        group = self.core.groups[group_id]
        assignments = []
        if member.member_id == group.leader_id:
            # Now and then the leader leaves one member out: it gets empty bytes.
            assignments = [(m, f"{m}/{group.generation}/{salt}".encode())
                           for i, m in enumerate(group.members) if salt % 5 or i]
        self.sending = {m: a for m, a in assignments}
        self.sync(group_id, group.generation, member.member_id, assignments,
                  instance=member.group_instance_id)
        self.sending = None

    def stabilize(self, group_id, mode, pick) -> None:
        """Drive a rebalance to its end as live clients would: everyone re-joins,
        the initial delay passes, everyone syncs."""
        for _ in range(25):
            group = self.core.groups.get(group_id)
            if group is None or group.state in (S.STABLE, S.EMPTY, S.DEAD):
                return
            if group.state is S.PREPARING_REBALANCE:
                for member in list(group.members.values()):
                    if member.awaiting_join is None and member.member_id in group.members:
                        self.rejoin(group_id, member)
                for member_id in sorted(group.pending_members):
                    self.join(group_id, member_id, protocols=PROTOCOLS[0])
                self.advance(self.config["initial_rebalance_delay_ms"])
            else:
                for member in list(group.members.values()):
                    if member.member_id in group.members and member.awaiting_sync is None:
                        self.sync_member(group_id, member, pick)
            self.complete(mode, pick)
            if mode == "keep":
                return

    def step(self, kind, g, pick, param, mode) -> None:
        group_id = GROUPS[g]
        members = self.members(group_id)
        member = members[pick % len(members)] if members else None
        group = self.core.groups.get(group_id)
        generation = group.generation if group is not None else -1
        client, host = CLIENTS[pick % 2]
        if kind == "join":
            protocols = PROTOCOLS[param % len(PROTOCOLS)] if param > 6 else PROTOCOLS[0]
            first = self.answer(self.join(group_id, protocols=protocols, client=client,
                                          session=SESSIONS[param % 3],
                                          rebalance=REBALANCES[pick % 3]))
            if first["error_code"] == E.MEMBER_ID_REQUIRED:
                self.join(group_id, first["member_id"], protocols=protocols, client=client,
                          host=host, session=SESSIONS[param % 3],
                          rebalance=REBALANCES[pick % 3])
        elif kind == "static":
            self.join(group_id, instance=f"i{pick % 2}", client=client, host=host,
                      protocols=PROTOCOLS[0] if param else PROTOCOLS[2],
                      session=SESSIONS[param % 3], rebalance=REBALANCES[param % 3])
        elif kind == "rejoin" and member is not None:
            self.rejoin(group_id, member, PROTOCOLS[1] if param == 0 else None)
        elif kind == "sync" and member is not None:
            self.sync_member(group_id, member, param)
        elif kind == "stabilize":
            self.stabilize(group_id, mode, pick)
        elif kind == "heartbeat" and member is not None:
            self.heartbeat(group_id, generation, member.member_id, member.group_instance_id)
        elif kind == "live":
            # Time passes while the members live: they heartbeat every 3 s and
            # take part in any rebalance.
            for _ in range((3_000, 12_000, 30_000, 65_000, 130_000)[param % 5] // 3_000):
                self.advance(3_000)
                for m in self.members(group_id):
                    if m.member_id in self.core.groups[group_id].members:
                        self.heartbeat(group_id, self.core.groups[group_id].generation,
                                       m.member_id, m.group_instance_id)
                self.stabilize(group_id, "ok", pick)
        elif kind == "leave" and member is not None:
            by_instance = member.group_instance_id is not None and param % 2
            self.leave(group_id, ("", member.group_instance_id, None) if by_instance
                       else member.member_id)
        elif kind == "leave-all" and members:
            self.leave(group_id, *[m.member_id for m in members])
        elif kind == "commit" and member is not None:
            self._commit(group_id, generation, member.member_id, member.group_instance_id,
                         pick, param)
        elif kind == "simple-commit":
            # An admin or assign-mode consumer; with version 2-4 now and then an
            # explicit retention (the record then carries an expire timestamp).
            retention = (-1, 30_000, 200_000)[param % 3] if param > 5 else -1
            self._commit(group_id, -1, "", None, pick, param,
                         version=3 if retention != -1 else 9, retention=retention)
        elif kind == "advance":
            self.advance(ADVANCES[param % len(ADVANCES)])
        elif kind == "delete":
            self.delete_groups(group_id)
        elif kind == "delete-offsets":
            self.delete_offsets(group_id, PARTITIONS[pick % 4:pick % 4 + 1 + param % 3])
        self.complete(mode, pick)

    def _commit(self, group_id, generation, member_id, instance, pick, param, *,
                version=9, retention=-1) -> None:
        parts = PARTITIONS[pick % 4:pick % 4 + 1 + param % 2]
        epoch = param if retention == -1 and param % 2 else -1
        offsets = {tp: OffsetAndMetadata(10 * pick + param, epoch, f"m{param}" * (param % 3))
                   for tp in parts}
        self._take(self.core.commit(self.ticket(), group_id, generation, member_id, instance,
                                    offsets, self.now, version=version, retention_ms=retention))


@pytest.fixture(scope="module", autouse=True)
def _print_stats():
    yield
    if os.environ.get("KCOORD_GROUP_STATS"):
        print("\nreplay property:", dict(STATS))


@settings(max_examples=int(os.environ.get("KCOORD_GROUP_EXAMPLES", 500)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(CONFIGS, START, OPS)
def test_replaying_the_written_records_gives_the_live_state(config, start, ops):
    run = Run(**config)
    for g, count in enumerate(start):
        for i in range(count):
            run.step("join", g, i, i, "ok")
        run.step("stabilize", g, 0, 0, "ok")
    for op in ops:
        run.step(*op)
    run.complete("ok", 0)
    run.check()
    STATS.update(run.seen)
    STATS["examples"] += 1
    for what in ("Stable with members", "failed write", "expired offset", "deleted group"):
        STATS[f"examples with {what}"] += int(run.seen[what] > 0)


def test_a_restart_in_the_middle_of_a_rebalance_brings_back_the_last_stable_generation():
    h = Harness()
    leader, follower = h.stable_group("g", 2)
    h.join("g", leader)  # PreparingRebalance of generation 2, nothing written
    h.settle()
    loaded = replay(h.durable)
    group = loaded.groups["g"]
    assert (group.state, group.generation, sorted(group.members)) == \
        (S.STABLE, 1, sorted([leader, follower]))
    assert group.members[follower].assignment == follower.encode()


# -- failed tombstones: the live state stays what the log holds, as Kafka's
# coordinator reverts to the log when a write fails -----------------------------------


def _offsets(h, group="g"):
    return {tp: o.offset for tp, o in h.core.offsets.offsets(group).items()}


def test_a_failed_offset_delete_leaves_the_offsets_there():
    h = Harness()
    h.commit("g", {("t", 0): (5, ""), ("t", 1): (6, "")})
    h.settle()
    ticket = h.delete_offsets("g", [("t", 0)])
    assert _offsets(h) == {("t", 1): 6}  # gone while its tombstone is written
    h.settle(E.KAFKA_STORAGE_ERROR)
    assert h.answer(ticket)[0] == E.NOT_COORDINATOR
    assert _offsets(h) == {("t", 0): 5, ("t", 1): 6} == \
        {tp: o.offset for tp, o in replay(h.durable).offsets["g"].items()}


def test_a_commit_durable_under_a_failed_delete_is_the_offset():
    h = Harness()
    h.commit("g", {("t", 0): (5, "")})
    h.settle()
    h.commit("g", {("t", 0): (7, "")})  # in flight ...
    h.delete_offsets("g", [("t", 0)])  # ... when its deletion is issued
    write, deletion = h.pending
    h.pending.clear()
    h.durable.extend(write.records)
    h._take(write.done(E.NONE, h.now))
    h._take(deletion.done(E.KAFKA_STORAGE_ERROR, h.now))
    assert _offsets(h) == {("t", 0): 7}
    assert replay(h.durable).offsets["g"][("t", 0)].offset == 7


def test_a_failed_expiry_keeps_the_group_and_its_offsets():
    h = Harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    h.commit("g", {("t", 0): (5, "")})
    h.settle()
    h.advance(60_000)
    assert "g" not in h.core.groups and not h.core.offsets.has_offsets("g")
    assert h.settle(E.KAFKA_STORAGE_ERROR) == 1
    assert h.core.groups["g"].state is S.EMPTY
    assert _offsets(h) == {("t", 0): 5}
    h.advance(10_000)  # the next sweep tries again
    h.settle()
    assert "g" not in h.core.groups and not h.core.offsets.has_offsets("g")
    assert replay(h.durable).groups == {}


def test_a_failed_delete_groups_keeps_the_time_the_group_became_empty():
    h = Harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    leader, = h.stable_group("g", 1)
    h.commit("g", {("t", 0): (5, "")}, generation=1, member=leader)
    h.leave("g", leader)
    h.settle()
    emptied = h.core.groups["g"].current_state_timestamp
    h.advance(30_000)
    ticket = h.delete_groups("g")
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert h.answer(ticket) == {"g": E.NOT_COORDINATOR}
    group = h.core.groups["g"]
    assert (group.state, group.current_state_timestamp) == (S.EMPTY, emptied)
    assert replay(h.durable).groups["g"].current_state_timestamp == emptied
    h.advance(30_000)  # 60 s after the group became Empty: its offsets expire
    assert not h.core.offsets.has_offsets("g")
