"""Replaying what the coordinator wrote gives the live state (GROUP_COORDINATOR.md
§13.3): random sequences of joins, syncs, heartbeats, leaves, commits, deletes
and clock advances against the core, then the durable records are replayed as
at start-up and compared with the live groups and offsets."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.groups.coordinator import replay
from broker.groups.group import GroupState as S
from protocol.errors import ErrorCode as E
from tests.broker.group_harness import Harness, subscription

GROUPS = ("g1", "g2")
OPS = st.lists(st.tuples(
    st.sampled_from(["join", "rejoin", "sync", "heartbeat", "leave", "commit",
                     "simple-commit", "advance", "delete", "delete-offsets", "static"]),
    st.integers(0, 1), st.integers(0, 5), st.integers(0, 40_000)), max_size=60)


def _members(h, group_id):
    group = h.core.groups.get(group_id)
    return list(group.members) if group else []


def _run(h: Harness, ops) -> None:
    for op, g, pick, amount in ops:
        group_id = GROUPS[g]
        members = _members(h, group_id)
        member = members[pick % len(members)] if members else "nobody"
        group = h.core.groups.get(group_id)
        generation = group.generation if group else 0
        topics = [("t", pick % 3), ("u", 0)]
        if op == "join":
            protocols = [("range", subscription("t")), ("roundrobin", subscription("t", "u"))]
            first = h.answer(h.join(group_id, protocols=protocols))
            if first["error_code"] == E.MEMBER_ID_REQUIRED:
                h.join(group_id, first["member_id"], protocols=protocols)
        elif op == "static":
            h.join(group_id, instance=f"i{pick % 2}")
        elif op == "rejoin":
            h.join(group_id, member)
        elif op == "sync":
            leader = group.leader_id if group else None
            assignments = [(m, f"{m}@{amount}".encode()) for m in members] \
                if member == leader else []
            h.sync(group_id, generation, member, assignments)
        elif op == "heartbeat":
            h.heartbeat(group_id, generation, member)
        elif op == "leave":
            h.leave(group_id, member)
        elif op == "commit":
            h.commit(group_id, {tp: (amount, f"m{amount}") for tp in topics},
                     generation=generation, member=member)
        elif op == "simple-commit":
            h.commit(group_id, {tp: (amount, "") for tp in topics})
        elif op == "advance":
            h.advance(amount)
        elif op == "delete":
            h.delete_groups(group_id)
        elif op == "delete-offsets":
            h.delete_offsets(group_id, topics)
        if pick != 5:  # now and then a write stays in flight across the next request
            h.settle()
    h.settle()


def _persisted_view(group):
    return (group.generation, group.protocol_type, group.protocol_name, group.leader_id,
            group.state,
            sorted((m.member_id, m.group_instance_id, m.assignment, m.session_timeout_ms)
                   for m in group.members.values()))


@settings(max_examples=int(__import__("os").environ.get("KCOORD_GROUP_EXAMPLES", 300)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_replaying_the_written_records_gives_the_live_state(ops):
    h = Harness()
    _run(h, ops)
    loaded = replay(h.durable)
    assert loaded.offsets == h.core.offsets.groups
    live = {gid: g for gid, g in h.core.groups.items() if g.state is not S.DEAD}
    assert set(loaded.groups) <= set(live) | set(h.core.groups)
    for group_id, group in live.items():
        if group.protocol_type is None and group.generation == 0 and \
                not h.core.offsets.has_offsets(group_id):
            # A simple group whose offsets were all deleted: nothing of it is
            # left to replay; Kafka too forgets it at the next expiry sweep.
            assert group_id not in loaded.groups
            continue
        if group.state in (S.STABLE, S.EMPTY):
            # What a restart brings back is exactly what runs now.
            assert group_id in loaded.groups
            assert _persisted_view(loaded.groups[group_id]) == _persisted_view(group)
        elif group_id in loaded.groups:
            # A rebalance in progress is not persisted: its last generation comes back.
            assert loaded.groups[group_id].generation <= group.generation


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
