"""The consumer group protocol (KIP-848) on the pure coordinator core, with a
manual clock: joining, the server-side assignment, revocation before
reassignment, leaving, static members, timeouts, the records and their
replay, and the other group APIs facing a consumer group."""

from __future__ import annotations

import itertools
import os
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.broker.groups.consumer_group import ConsumerGroup, MemberState
from kcoord.broker.groups.consumer_membership import StaticImage
from kcoord.broker.groups.loader import replay
from kcoord.protocol import group_records as G
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.group_harness import Harness

T = uuid.UUID(int=0x1111)
U = uuid.UUID(int=0x2222)


def harness(partitions=6, **config) -> Harness:
    h = Harness(**config)
    h.image = StaticImage({"t": (T, partitions)})
    h.core.consumer.metadata = h.image
    return h


def owned(answer) -> list[dict]:
    """What a client reports it owns after taking ``answer``'s assignment."""
    return [{"topic_id": tp["topic_id"], "partitions": list(tp["partitions"])}
            for tp in answer["assignment"]["topic_partitions"]]


def parts(answer) -> set[tuple[uuid.UUID, int]]:
    return {(tp["topic_id"], p) for tp in answer["assignment"]["topic_partitions"]
            for p in tp["partitions"]}


def group(h: Harness, group_id="g") -> ConsumerGroup:
    return h.core.groups[group_id]


def kinds(records) -> list[str]:
    return [G.decode_key(k)[0] for k, _v in records]


def held_by(h: Harness, group_id="g") -> dict:
    """partition -> the members holding it (assigned or pending revocation)."""
    holders: dict = {}
    for m in group(h, group_id).members.values():
        for assignment in (m.assigned, m.pending_revocation):
            for t, ps in assignment.items():
                for p in ps:
                    holders.setdefault((t, p), set()).add(m.member_id)
    return holders


def assert_replay_equals_live(h: Harness) -> None:
    loaded = replay(h.durable)
    live = {g: grp for g, grp in h.core.groups.items() if isinstance(grp, ConsumerGroup)}
    assert set(loaded.consumer_groups) == set(live)
    for gid, grp in live.items():
        back = loaded.consumer_groups[gid]
        assert (back.group_epoch, back.assignment_epoch, back.metadata_hash) == \
            (grp.group_epoch, grp.assignment_epoch, grp.metadata_hash)
        assert back.members == grp.members
        assert back.target == grp.target
        assert back.partition_epochs == grp.partition_epochs


# == joining ================================================================================

def test_a_lone_member_gets_every_partition_at_its_first_heartbeat():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    assert a["error_code"] == E.NONE
    assert a["member_id"] == "m1" and a["member_epoch"] == 2  # a new group is at epoch 1
    assert a["heartbeat_interval_ms"] == h.core.config.consumer_heartbeat_interval_ms
    assert parts(a) == {(T, p) for p in range(6)}
    assert group(h).state.value == "Stable"
    # what Kafka writes for a join: member metadata, group epoch, target, current
    assert kinds(h.durable) == [
        G.CONSUMER_GROUP_MEMBER_METADATA, G.CONSUMER_GROUP_METADATA,
        G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, G.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
        G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT]
    assert_replay_equals_live(h)


def test_the_answer_waits_until_the_records_are_durable():
    h = harness()
    assert h.consumer_heartbeat(member="m1", settle=False) is None
    h.settle()
    assert h.answers and list(h.answers.values())[-1][0]["member_epoch"] == 2


def test_v0_member_without_id_gets_one_from_the_coordinator():
    h = harness()
    a = h.consumer_heartbeat(member="", version=0)
    assert a["error_code"] == E.NONE and len(a["member_id"]) == 22


def test_a_steady_heartbeat_writes_nothing_and_carries_no_assignment():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    before = len(h.durable)
    b = h.consumer_heartbeat(member="m1", epoch=2)
    assert b["error_code"] == E.NONE and b["member_epoch"] == 2 and b["assignment"] is None
    assert len(h.durable) == before and not h.pending
    # a full heartbeat (as after a reconnect) gets the assignment again
    c = h.consumer_heartbeat(member="m1", epoch=2, rebalance=300_000, topics=["t"],
                             owned=owned(a))
    assert parts(c) == parts(a)


def test_a_second_member_gets_partitions_only_once_the_first_has_revoked_them():
    h = harness()
    a1 = h.consumer_heartbeat(member="m1")
    b1 = h.consumer_heartbeat(member="m2")
    assert b1["member_epoch"] == 3
    assert parts(b1) == set()  # its target is still held by m1
    assert group(h).members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    # m1 is told to give up half: it stays at epoch 2 until it does
    a2 = h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a1))
    assert a2["member_epoch"] == 2 and len(parts(a2)) == 3
    assert group(h).members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    assert all(len(holders) == 1 for holders in held_by(h).values())
    # m1 reports it no longer owns them: epoch 3, stable
    a3 = h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a2))
    assert a3["member_epoch"] == 3 and a3["assignment"] is None
    # now m2 gets them
    b2 = h.consumer_heartbeat(member="m2", epoch=3, owned=[])
    assert parts(b2) == {(T, p) for p in range(6)} - parts(a2)
    assert group(h).state.value == "Stable"
    assert_replay_equals_live(h)


def test_a_heartbeat_without_owned_partitions_counts_as_still_owning_them():
    h = harness()
    h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m2")
    h.consumer_heartbeat(member="m1", epoch=2, owned=None)
    a = h.consumer_heartbeat(member="m1", epoch=2, owned=None)
    assert a["member_epoch"] == 2
    assert group(h).members["m1"].state is MemberState.UNREVOKED_PARTITIONS


# == leaving and being fenced ===============================================================

def test_a_member_that_leaves_hands_its_partitions_to_the_others():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m2")
    a = h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a))
    h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a))
    b = h.consumer_heartbeat(member="m2", epoch=3, owned=[])
    left = h.consumer_heartbeat(member="m2", epoch=-1, owned=owned(b))
    assert left["error_code"] == E.NONE and left["member_epoch"] == -1
    assert "m2" not in group(h).members
    assert group(h).group_epoch == 4
    a = h.consumer_heartbeat(member="m1", epoch=3, owned=owned(a))
    assert a["member_epoch"] == 4 and parts(a) == {(T, p) for p in range(6)}
    assert_replay_equals_live(h)


def test_a_member_silent_for_the_session_timeout_is_fenced():
    h = harness(consumer_session_timeout_ms=45_000)
    h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m2")
    h.advance(30_000)
    h.consumer_heartbeat(member="m2", epoch=3, owned=[])
    h.advance(20_000)  # m1 last heard 50 s ago
    h.settle()
    assert set(group(h).members) == {"m2"}
    answer = h.consumer_heartbeat(member="m1", epoch=2, owned=[])
    assert answer["error_code"] == E.UNKNOWN_MEMBER_ID
    assert_replay_equals_live(h)


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced():
    h = harness()
    a = h.consumer_heartbeat(member="m1", rebalance=10_000)
    h.consumer_heartbeat(member="m2")
    h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a))  # told to revoke
    h.advance(5_000)
    h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a))  # still owns them
    assert "m1" in group(h).members
    h.advance(5_000)
    h.settle()
    assert "m1" not in group(h).members
    b = h.consumer_heartbeat(member="m2", epoch=3, owned=[])
    assert b["member_epoch"] == 4 and parts(b) == {(T, p) for p in range(6)}


# == errors, as Kafka answers them ==========================================================

@pytest.mark.parametrize("fields, message", [
    ({"group": ""}, "GroupId can't be empty."),
    ({"instance": ""}, "InstanceId can't be empty."),
    ({"rack": ""}, "RackId can't be empty."),
    ({"member": ""}, "MemberId can't be empty."),
    ({"rebalance": -1}, "RebalanceTimeoutMs must be provided in first request."),
    ({"owned": [{"topic_id": T, "partitions": [0]}]},
     "TopicPartitions must be empty when (re-)joining."),
    ({"epoch": -3}, "MemberEpoch is invalid."),
])
def test_invalid_heartbeats_are_refused_with_kafkas_message(fields, message):
    h = harness()
    kwargs = {"group": "g", "member": "m1", "epoch": 0, **fields}
    answer = h.consumer_heartbeat(**kwargs)
    assert (answer["error_code"], answer["error_message"]) == (E.INVALID_REQUEST, message)
    assert not h.durable


def test_an_unknown_assignor_is_refused():
    h = harness()
    answer = h.consumer_heartbeat(member="m1", assignor="sticky")
    assert answer["error_code"] == E.UNSUPPORTED_ASSIGNOR
    assert answer["error_message"] == \
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range."


def test_epochs_ahead_or_behind_are_fenced():
    h = harness()
    h.consumer_heartbeat(member="m1")
    ahead = h.consumer_heartbeat(member="m1", epoch=5)
    assert ahead["error_code"] == E.FENCED_MEMBER_EPOCH
    h.consumer_heartbeat(member="m2")
    h.consumer_heartbeat(member="m1", epoch=2, owned=[])  # m1 moves to epoch 3
    # the previous epoch with a subset of the assignment: a lost answer, accepted
    ok = h.consumer_heartbeat(member="m1", epoch=2, owned=[])
    assert ok["error_code"] == E.NONE and ok["member_epoch"] == 3
    # without its owned partitions it is not
    lost = h.consumer_heartbeat(member="m1", epoch=2, owned=None)
    assert lost["error_code"] == E.FENCED_MEMBER_EPOCH
    behind = h.consumer_heartbeat(member="m2", epoch=1)
    assert behind["error_code"] == E.FENCED_MEMBER_EPOCH


def test_unknown_members_and_groups():
    h = harness()
    assert h.consumer_heartbeat(member="m1", epoch=1)["error_code"] == E.GROUP_ID_NOT_FOUND
    assert h.consumer_heartbeat(member="m1", epoch=1)["error_message"] == \
        "Consumer group g not found."
    h.consumer_heartbeat(member="m1")
    assert h.consumer_heartbeat(member="zz", epoch=1)["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.consumer_heartbeat(member="zz", epoch=-1)["error_code"] == E.UNKNOWN_MEMBER_ID


def test_a_full_group_refuses_a_new_member():
    h = harness(consumer_max_size=1)
    h.consumer_heartbeat(member="m1")
    answer = h.consumer_heartbeat(member="m2")
    assert answer["error_code"] == E.GROUP_MAX_SIZE_REACHED
    assert h.consumer_heartbeat(member="m1", epoch=2)["error_code"] == E.NONE


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_a_running_classic_group_is_not_upgraded_unless_the_policy_allows_it(policy):
    h = harness(consumer_migration_policy=policy)
    h.stable_group("g")
    answer = h.consumer_heartbeat(member="m1")
    assert answer["error_code"] == E.GROUP_ID_NOT_FOUND
    assert answer["error_message"] == \
        "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
    answer = h.consumer_heartbeat(member="m1", epoch=1)
    assert answer["error_message"] == "Group g is not a consumer group."
    assert not isinstance(h.core.groups["g"], ConsumerGroup)


def test_a_classic_group_with_unreadable_assignments_is_not_upgraded():
    h = harness()
    h.stable_group("g")  # its leader assigned bytes that are no ConsumerProtocolAssignment
    answer = h.consumer_heartbeat(member="m1")
    assert answer["error_code"] == E.GROUP_ID_NOT_FOUND
    assert answer["error_message"] == "Cannot upgrade classic group g to consumer group " \
                                      "because the embedded consumer protocol is malformed."
    assert h.core.groups["g"].state.value == "Stable"


# == static members =========================================================================

def test_a_static_member_that_leaves_for_a_while_keeps_its_partitions():
    h = harness()
    a = h.consumer_heartbeat(member="m1", instance="i1")
    h.consumer_heartbeat(member="m2", instance="i2")
    gone = h.consumer_heartbeat(member="m1", epoch=-2, instance="i1")
    assert gone["member_epoch"] == -2
    assert group(h).members["m1"].assigned  # still held
    again = h.consumer_heartbeat(member="m1b", instance="i1")
    assert again["error_code"] == E.NONE
    assert "m1" not in group(h).members
    assert group(h).members["m1b"].instance_id == "i1"
    assert parts(again) <= parts(a)
    assert_replay_equals_live(h)


def test_a_live_static_member_keeps_its_instance_id():
    h = harness()
    h.consumer_heartbeat(member="m1", instance="i1")
    answer = h.consumer_heartbeat(member="m9", instance="i1")
    assert answer["error_code"] == E.UNRELEASED_INSTANCE_ID
    fenced = h.consumer_heartbeat(member="m9", epoch=2, instance="i1")
    assert fenced["error_code"] == E.FENCED_INSTANCE_ID


# == topics changing ========================================================================

def test_new_partitions_of_a_subscribed_topic_are_assigned():
    h = harness(partitions=2)
    a = h.consumer_heartbeat(member="m1")
    assert len(parts(a)) == 2
    h.image.set("t", T, 4)
    b = h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a))
    assert b["member_epoch"] == 3 and len(parts(b)) == 4


def test_a_topic_created_after_the_subscription_is_assigned():
    h = harness()
    a = h.consumer_heartbeat(member="m1", topics=["t", "later"])
    assert len(parts(a)) == 6
    h.image.set("later", U, 2)
    b = h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a))
    assert (U, 0) in parts(b) and (U, 1) in parts(b)


# == the other group APIs ===================================================================

def test_offset_commits_carry_the_member_epoch():
    h = harness()
    h.consumer_heartbeat(member="m1")
    tp = {("t", 0): (5, "")}

    def commit(**kwargs):
        ticket = h.commit("g", tp, **kwargs)
        h.settle()
        return h.answer(ticket)[("t", 0)]

    assert commit(generation=2, member="m1") == E.NONE
    assert commit(generation=1, member="m1") == E.STALE_MEMBER_EPOCH  # before it got t-0
    assert commit(generation=3, member="m1") == E.STALE_MEMBER_EPOCH
    assert commit(generation=2, member="zz") == E.UNKNOWN_MEMBER_ID
    assert commit(generation=2, member="m1", version=8) == E.UNSUPPORTED_VERSION
    assert commit() == E.UNKNOWN_MEMBER_ID  # an admin commit to a group with members
    code, topics = h.core.fetch_offsets("g", [("t", [0])])
    assert topics[0][1][0][1].offset == 5
    assert h.core.fetch_offsets("g", [("t", [0])], "m1", 2)[0] == E.NONE
    assert h.core.fetch_offsets("g", [("t", [0])], "m1", 1) == (E.STALE_MEMBER_EPOCH, [])
    assert h.core.fetch_offsets("g", [("t", [0])], "zz", 2) == (E.UNKNOWN_MEMBER_ID, [])
    # m1 moves to epoch 3 keeping partitions it got at epoch 2: a commit sent
    # with epoch 2 for one of those still counts (Kafka 4.4's assignment epochs)
    a = h.consumer_heartbeat(member="m2")
    mine = group(h).members["m1"]
    h.consumer_heartbeat(member="m1", epoch=2, owned=[
        {"topic_id": T, "partitions": sorted(mine.assigned[T])}])
    kept = h.consumer_heartbeat(member="m1", epoch=2, owned=[
        {"topic_id": T, "partitions": sorted(group(h).members["m1"].assigned[T])}])
    assert kept["member_epoch"] == 3
    held = sorted(group(h).members["m1"].assigned[T])
    given_up = sorted(set(range(6)) - set(held))
    assert commit(generation=2, member="m1") == (E.NONE if 0 in held else E.STALE_MEMBER_EPOCH)
    ticket = h.commit("g", {("t", held[0]): (6, "")}, generation=2, member="m1")
    h.settle()
    assert h.answer(ticket)[("t", held[0])] == E.NONE
    ticket = h.commit("g", {("t", given_up[0]): (6, "")}, generation=2, member="m1")
    h.settle()
    assert h.answer(ticket)[("t", given_up[0])] == E.STALE_MEMBER_EPOCH
    assert a["error_code"] == E.NONE


def test_list_describe_and_delete_a_consumer_group():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    assert h.core.list_groups([], []) == [
        {"group_id": "g", "protocol_type": "consumer", "group_state": "Stable",
         "group_type": "consumer"}]
    assert h.core.list_groups([], ["classic"]) == []
    described = h.core.consumer_describe(["g", "nope"], 1)
    assert described[0]["group_state"] == "Stable" and described[0]["group_epoch"] == 2
    member = described[0]["members"][0]
    assert member["member_id"] == "m1" and member["subscribed_topic_names"] == ["t"]
    assert member["assignment"] == member["target_assignment"]
    assert described[1]["error_code"] == E.GROUP_ID_NOT_FOUND
    ticket = h.delete_groups("g")
    h.settle()
    assert h.answer(ticket) == {"g": E.NON_EMPTY_GROUP}
    h.consumer_heartbeat(member="m1", epoch=-1, owned=owned(a))
    assert group(h).state.value == "Empty"
    ticket = h.delete_groups("g")
    h.settle()
    assert h.answer(ticket) == {"g": E.NONE}
    assert "g" not in h.core.groups
    assert_replay_equals_live(h)


def test_a_classic_member_takes_over_an_empty_consumer_group():
    h = harness(consumer_migration_policy="disabled")
    a = h.consumer_heartbeat(member="m1")
    first = h.join("g")
    # not while it has members, with the migration disabled
    assert h.answer(first)["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    h.consumer_heartbeat(member="m1", epoch=-1, owned=owned(a))
    h.stable_group("g")
    assert h.core.list_groups([], [])[0]["group_type"] == "classic"
    loaded = replay(h.durable)
    assert "g" not in loaded.consumer_groups and "g" in loaded.groups


def test_a_failed_write_leaves_the_group_as_the_log_has_it():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m2", settle=False)
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert set(group(h).members) == {"m1"} and group(h).group_epoch == 2
    again = h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a))
    assert again["error_code"] == E.NONE and again["member_epoch"] == 2
    assert_replay_equals_live(h)


def test_a_restarted_shard_serves_the_group_it_replays():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m2")
    h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a))
    other = harness()
    other.core.install(replay(h.durable), other.now)
    answer = other.consumer_heartbeat(member="m2", epoch=3, owned=[])
    assert answer["error_code"] == E.NONE and answer["member_epoch"] == 3


# == properties =============================================================================

OPS = st.lists(st.tuples(st.sampled_from(["join", "beat", "beat-revoked", "leave", "wait",
                                           "grow"]),
                         st.integers(0, 3)), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_no_partition_is_ever_held_by_two_members_and_replay_equals_live(ops):
    h = harness(partitions=4)
    answers: dict[str, dict] = {}
    epochs: dict[str, int] = {}
    size = 4
    for op, n in ops:
        member = f"m{n}"
        if op == "join" and member not in epochs:
            a = h.consumer_heartbeat(member=member)
        elif op in ("beat", "beat-revoked") and member in epochs:
            mine = group(h).members.get(member)
            reported = [] if op == "beat-revoked" or mine is None else \
                [{"topic_id": t, "partitions": sorted(ps)} for t, ps in mine.assigned.items()]
            a = h.consumer_heartbeat(member=member, epoch=epochs[member], owned=reported)
        elif op == "leave" and member in epochs:
            a = h.consumer_heartbeat(member=member, epoch=-1, owned=[])
            epochs.pop(member)
            continue
        elif op == "wait":
            h.advance(20_000)
            h.settle()
            continue
        elif op == "grow":
            size += 1
            h.image.set("t", T, size)
            continue
        else:
            continue
        if a["error_code"] == E.NONE:
            epochs[member] = a["member_epoch"]
            answers[member] = a
        else:
            epochs.pop(member, None)
        assert all(len(holders) == 1 for holders in held_by(h).values())
    assert_replay_equals_live(h)
    # members that keep heartbeating (and revoking) end up owning every partition
    live = [m for m in epochs if "g" in h.core.groups and m in group(h).members]
    if live:
        for _ in range(4):
            for m in live:
                a = h.consumer_heartbeat(member=m, epoch=group(h).members[m].member_epoch,
                                         owned=[{"topic_id": t, "partitions": sorted(ps)}
                                                for t, ps in group(h).members[m].assigned.items()])
                assert a["error_code"] == E.NONE, a
        assert set(held_by(h)) == {(T, p) for p in range(size)}
        assert group(h).state.value == "Stable"


# == regular expressions (v1) =================================================================

def test_a_regex_subscription_is_resolved_after_the_join_and_then_assigned():
    h = harness()
    h.image.set("other", U, 2)
    first = h.consumer_heartbeat(member="m1", topics=None, regex="t|oth.*")
    # as on Kafka, the join is answered before the expression is resolved
    assert first["member_epoch"] == 1 and parts(first) == set()
    h.advance(0)  # the resolution, right after
    h.settle()
    resolved = group(h).resolved["t|oth.*"]
    assert resolved[0] == {"t", "other"} and group(h).group_epoch == 2
    a = h.consumer_heartbeat(member="m1", epoch=1, owned=[])
    assert a["member_epoch"] == 2
    assert parts(a) == {(T, p) for p in range(6)} | {(U, 0), (U, 1)}
    assert_replay_equals_live(h)
    assert kinds(h.durable).count(G.CONSUMER_GROUP_REGULAR_EXPRESSION) == 1


def test_a_new_matching_topic_is_picked_up_by_a_later_resolution():
    h = harness()
    h.consumer_heartbeat(member="m1", topics=None, regex="t.*")
    h.advance(0)
    h.settle()
    a = h.consumer_heartbeat(member="m1", epoch=1, owned=[])
    h.image.set("t2", U, 3)
    h.advance(5_000)  # within 10 s of the last resolution: not yet
    b = h.consumer_heartbeat(member="m1", epoch=a["member_epoch"], owned=owned(a))
    assert (U, 0) not in parts(b) if b["assignment"] else True
    h.advance(6_000)
    h.consumer_heartbeat(member="m1", epoch=b["member_epoch"], owned=owned(a))
    h.advance(0)
    h.settle()
    assert group(h).resolved["t.*"][0] == {"t", "t2"}
    c = h.consumer_heartbeat(member="m1", epoch=group(h).members["m1"].member_epoch,
                             owned=owned(a))
    assert {(U, 0), (U, 1), (U, 2)} <= parts(c)


def test_a_regex_resolves_to_the_topics_the_asking_member_may_describe():
    h = harness()
    h.image.set("team-a", U, 2)
    h.image.set("secret", uuid.UUID(int=0x3333), 4)
    asked = []

    def describable(names):
        asked.append(set(names))
        return {n for n in names if n != "secret"}

    h.consumer_heartbeat(member="m1", topics=None, regex=".*", describable=describable)
    h.advance(0)
    h.settle()
    assert asked == [{"t", "team-a", "secret"}]
    assert group(h).resolved[".*"][0] == {"t", "team-a"}
    a = h.consumer_heartbeat(member="m1", epoch=1, owned=[])
    assert {t for t, _p in parts(a)} == {T, U}
    # a second member's heartbeat with the same expression asks for nothing new:
    # the group keeps the resolution it has until the next refresh, as on Kafka
    h.consumer_heartbeat(member="m2", topics=None, regex=".*", describable=set)
    h.advance(0)
    h.settle()
    assert group(h).resolved[".*"][0] == {"t", "team-a"}
    assert_replay_equals_live(h)
    # the refresh (every 10 minutes) is taken with the rights of the member whose
    # heartbeat asks for it
    holding = {"m1": owned(a), "m2": []}
    for _ in range(20):
        h.advance(30_000)
        for m in ("m1", "m2"):
            b = h.consumer_heartbeat(member=m, epoch=group(h).members[m].member_epoch,
                                     owned=holding[m], describable=describable)
            holding[m] = owned(b) if b["assignment"] is not None else holding[m]
    assert group(h).resolved[".*"][0] == {"t", "team-a"} and len(asked) == 1
    h.advance(1)
    h.consumer_heartbeat(member="m2", epoch=group(h).members["m2"].member_epoch,
                         describable=lambda names: {n for n in names if n == "t"})
    h.advance(0)
    h.settle()
    assert group(h).resolved[".*"][0] == {"t"}
    assert_replay_equals_live(h)


def test_an_invalid_regex_is_refused_with_re2js_description():
    h = harness()
    answer = h.consumer_heartbeat(member="m1", topics=None, regex="(t")
    assert answer["error_code"] == E.INVALID_REGULAR_EXPRESSION
    assert answer["error_message"] == \
        "SubscribedTopicRegex `(t` is not a valid regular expression: missing closing )."
    assert not h.durable


def test_the_last_member_of_a_regex_takes_its_resolution_with_it():
    h = harness()
    h.consumer_heartbeat(member="m1", topics=None, regex="t")
    h.advance(0)
    h.settle()
    a = h.consumer_heartbeat(member="m1", epoch=1, owned=[])
    h.consumer_heartbeat(member="m1", epoch=-1, owned=owned(a))
    assert group(h).resolved == {}
    assert_replay_equals_live(h)
    ticket = h.delete_groups("g")
    h.settle()
    assert h.answer(ticket) == {"g": E.NONE}
    assert replay(h.durable).consumer_groups == {}


# == what a restart or a failed write must not lose ===========================================

def test_a_group_whose_members_subscribe_to_nothing_yet_is_kept_by_a_restart():
    h = harness()
    a = h.consumer_heartbeat(member="m1", topics=[])  # no epoch bump: no record 3
    assert a["error_code"] == E.NONE
    assert_replay_equals_live(h)


def test_a_group_deleted_and_made_again_replays_as_the_new_one():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m1", epoch=-1, owned=owned(a))
    ticket = h.delete_groups("g")
    h.settle()
    assert h.answer(ticket) == {"g": E.NONE}
    h.consumer_heartbeat(member="m2", topics=[])
    assert_replay_equals_live(h)


def test_several_failed_writes_leave_the_group_as_the_log_has_it():
    h = harness()
    h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m2", settle=False)
    h.consumer_heartbeat(member="m3", settle=False)
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert sorted(group(h).members) == ["m1"] and group(h).group_epoch == 2
    assert_replay_equals_live(h)


def test_a_failed_write_between_two_durable_ones_is_undone_alone():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m2", settle=False)  # fails
    h.pending[0].done(E.NOT_LEADER_OR_FOLLOWER, h.now) and None
    h.pending.pop(0)
    h.consumer_heartbeat(member="m3")  # issued after: durable
    assert sorted(group(h).members) == ["m1", "m3"]
    assert_replay_equals_live(h)
    assert a["error_code"] == E.NONE


def test_a_static_member_whose_replacement_fails_to_be_written_still_expires():
    h = harness()
    h.consumer_heartbeat(member="s1", instance="i1")
    h.consumer_heartbeat(member="s1", instance="i1", epoch=-2)
    h.consumer_heartbeat(member="s2", instance="i1", settle=False)
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert group(h).members["s1"].member_epoch == -2
    h.advance(60_000)
    h.settle()
    assert group(h).members == {} and group(h).partition_epochs == {}


def test_a_member_whose_fencing_fails_to_be_written_is_fenced_later():
    h = harness()
    h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m2")
    h.clock.advance(50_000)
    h._take(h.core.tick(h.now))
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert sorted(group(h).members) == ["m1", "m2"]
    h.advance(50_000)
    h.settle()
    assert group(h).members == {}


def test_a_static_member_coming_back_unchanged_bumps_nothing():
    h = harness()
    h.image.set("u", U, 2)
    h.consumer_heartbeat(member="s1", instance="i1", topics=["t", "u"], assignor="range")
    h.consumer_heartbeat(member="b", assignor="uniform")
    before = group(h).group_epoch
    h.consumer_heartbeat(member="s1", instance="i1", epoch=-2)
    n = len(h.durable)
    back = h.consumer_heartbeat(member="s2", instance="i1", topics=["t", "u"], assignor="range")
    assert back["error_code"] == E.NONE and group(h).group_epoch == before
    # Kafka's replaceMember records, 8t 7t 5t (old) and 5 7 8 (new, at epoch 0),
    # then the new one's reconciliation to the group's epoch: no second 5 or 7
    assert [k for k in kinds(h.durable[n:])] == [
        G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        G.CONSUMER_GROUP_MEMBER_METADATA, G.CONSUMER_GROUP_MEMBER_METADATA,
        G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
        G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT]
    assert back["member_epoch"] == before
    h.image.set("other", uuid.UUID(int=0x3333), 1)  # a topic nobody subscribes to
    h.consumer_heartbeat(member="s2", instance="i1", epoch=back["member_epoch"])
    assert group(h).group_epoch == before
    assert_replay_equals_live(h)


def test_a_failed_expiry_of_an_empty_group_leaves_it():
    h = harness(offsets_retention_ms=1)
    a = h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m1", epoch=-1, owned=owned(a))
    h._take(h.core.expire_offsets(h.now))
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert "g" in h.core.groups and "g" in replay(h.durable).consumer_groups
    h._take(h.core.expire_offsets(h.now))
    h.settle()
    assert "g" not in h.core.groups and "g" not in replay(h.durable).consumer_groups


def test_a_refused_join_leaves_an_empty_consumer_group_alone():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m1", epoch=-1, owned=owned(a))
    ticket = h.join("g", "", session=1)
    h.settle()
    assert h.answer(ticket)["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert isinstance(h.core.groups["g"], ConsumerGroup)
    assert "g" in replay(h.durable).consumer_groups


def test_a_commit_in_flight_while_the_group_converts_is_kept():
    h = harness()
    ticket = h.commit("g", {("t", 0): (42, "")})  # a simple group's commit, not yet durable
    h.consumer_heartbeat(member="m1", settle=False)  # the empty group becomes a consumer group
    h.settle()
    assert h.answer(ticket) == {("t", 0): E.NONE}
    assert h.core.fetch_offsets("g", [("t", [0])])[1][0][1][0][1].offset == 42


def test_leaving_a_consumer_group_by_leavegroup_fences_a_wrong_static_member():
    h = harness()
    h.consumer_heartbeat(member="s1", instance="i1")
    assert h.leave("g", ("x", "i1", None), ("y", None, None)) == \
        (E.NONE, [E.FENCED_INSTANCE_ID, E.UNKNOWN_MEMBER_ID])


def test_v0_member_ids_never_start_with_a_dash():
    from kcoord.broker.groups.consumer_membership import _new_member_id
    assert all(not _new_member_id().startswith("-") for _ in range(2_000))


# == what mutation testing showed was not pinned down ==========================================

def test_describe_shows_each_member_as_kafka_does():
    h = harness()
    a = h.consumer_heartbeat(member="m1", instance="i1", rack="r1", assignor="range")
    h.consumer_heartbeat(member="m2")
    h.consumer_heartbeat(member="m1", epoch=2, instance="i1", owned=owned(a))  # to revoke
    (described,) = h.core.consumer_describe(["g"], 1)
    assert (described["error_code"], described["error_message"]) == (E.NONE, None)
    assert (described["group_state"], described["group_epoch"],
            described["assignment_epoch"], described["assignor_name"]) == \
        ("Reconciling", 3, 3, "range")
    m1, m2 = sorted(described["members"], key=lambda m: m["member_id"])
    mine = group(h).members["m1"]
    assert (m1["member_id"], m1["instance_id"], m1["rack_id"], m1["member_epoch"],
            m1["client_id"], m1["client_host"], m1["subscribed_topic_names"],
            m1["subscribed_topic_regex"], m1["member_type"]) == \
        ("m1", "i1", "r1", 2, "client", "/127.0.0.1", ["t"], "", 1)
    # the current assignment shows what is still being revoked too
    held = sorted(mine.assigned[T] | mine.pending_revocation[T])
    assert m1["assignment"] == {"topic_partitions": [
        {"topic_id": T, "topic_name": "t", "partitions": held}]}
    assert m1["target_assignment"]["topic_partitions"][0]["partitions"] == \
        sorted(group(h).target["m1"][T])
    assert m2["assignment"] == {"topic_partitions": []}
    assert len(m2["target_assignment"]["topic_partitions"][0]["partitions"]) == 3
    nothing, classic, empty = h.core.consumer_describe(["nope", "cl", ""], 1)[0], None, None
    h.stable_group("cl")
    classic, empty = h.core.consumer_describe(["cl", ""], 1)
    assert (nothing["error_code"], nothing["error_message"]) == \
        (E.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert (classic["error_code"], classic["error_message"]) == \
        (E.GROUP_ID_NOT_FOUND, "Group cl is not a consumer group.")
    assert (empty["error_code"], empty["group_id"]) == (E.INVALID_GROUP_ID, "")
    h.core.refusal = E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.core.consumer_describe(["g"], 1)[0]["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.core.consumer_describe([""], 1)[0]["error_code"] == E.INVALID_GROUP_ID


def test_list_groups_filters_consumer_groups_by_state_and_type():
    h = harness()
    h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(group="g2", member="m1")
    h.consumer_heartbeat(group="g2", member="m2")  # g2: Reconciling
    listed = lambda states, types: sorted(  # noqa: E731
        (g["group_id"], g["group_state"]) for g in h.core.list_groups(states, types))
    assert listed([], []) == [("g", "Stable"), ("g2", "Reconciling")]
    assert listed([" STABLE "], ["Consumer"]) == [("g", "Stable")]
    assert listed(["reconciling"], []) == [("g2", "Reconciling")]
    assert listed([], ["share"]) == []


def test_deleting_a_group_writes_kafkas_tombstones_in_kafkas_order():
    h = harness()
    h.consumer_heartbeat(member="m1", topics=None, regex="t")
    h.advance(0)
    h.settle()
    h.consumer_heartbeat(member="m1", epoch=-1)
    n = len(h.durable)
    ticket = h.delete_groups("g")
    h.settle()
    assert h.answer(ticket) == {"g": E.NONE}
    tombstones = [(G.decode_key(k), v) for k, v in h.durable[n:]]
    assert all(v is None for _k, v in tombstones)
    # the expression went with its last member; the empty group's own records go
    assert [(kind, getattr(key, "group", None)) for (kind, key), _v in tombstones] == [
        (G.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, "g"),
        (G.CONSUMER_GROUP_PARTITION_METADATA, "g"),
        (G.CONSUMER_GROUP_METADATA, "g")]
    assert "g" not in h.core.groups
    assert ("cg-regex", "g") not in h.core.timers


def test_a_loaded_group_s_members_expire_and_revocations_time_out():
    h = harness()
    a = h.consumer_heartbeat(member="m1", rebalance=20_000)
    h.consumer_heartbeat(member="m2")
    h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a))  # m1 must revoke
    assert group(h).members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    other = harness()
    other.core.install(replay(h.durable), other.now)
    other.advance(20_000)  # m1 never revokes: fenced by its revocation timeout
    other.settle()
    assert set(group(other).members) == {"m2"}
    other.advance(45_000)  # and m2, silent since the load, by its session timeout
    other.settle()
    assert group(other).members == {}


def test_a_lost_answer_is_forgiven_only_with_a_subset_of_the_partitions():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="m2")
    h.consumer_heartbeat(member="m1", epoch=2, owned=owned(a))
    kept = sorted(group(h).members["m1"].assigned[T])
    gone = sorted(set(range(6)) - set(kept))
    h.consumer_heartbeat(member="m1", epoch=2, owned=[{"topic_id": T, "partitions": kept}])
    assert group(h).members["m1"].member_epoch == 3
    ok = h.consumer_heartbeat(member="m1", epoch=2, owned=[{"topic_id": T, "partitions": kept}])
    assert ok["error_code"] == E.NONE
    bad = h.consumer_heartbeat(member="m1", epoch=2,
                               owned=[{"topic_id": T, "partitions": [gone[0]]}])
    assert bad["error_code"] == E.FENCED_MEMBER_EPOCH
    other = h.consumer_heartbeat(member="m1", epoch=2,
                                 owned=[{"topic_id": U, "partitions": [0]}])
    assert other["error_code"] == E.FENCED_MEMBER_EPOCH


def test_unsupported_assignor_lists_them_as_kafka_does_whatever_the_config_order():
    h = harness(consumer_assignors=("range", "uniform"))
    answer = h.consumer_heartbeat(member="m1", assignor="sticky")
    assert answer["error_message"] == \
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    assert h.consumer_heartbeat(member="m2")["error_code"] == E.NONE
    assert h.core.consumer_describe(["g"], 1)[0]["assignor_name"] == "range"  # the default


@pytest.mark.parametrize("regex, description", [
    ("a**", "invalid nested repetition operator"),
    ("a)", "regexp/syntax: internal error"),
    ("x{2,1}", "invalid repeat count"),
    ("[a", "missing closing ]"),
    ("a\\", "trailing backslash at end of expression"),
    ("(?=a)", "invalid or unsupported Perl syntax"),
])
def test_invalid_regexes_are_described_as_re2j_describes_them(regex, description):
    h = harness()
    answer = h.consumer_heartbeat(member="m1", topics=None, regex=regex)
    assert answer["error_code"] == E.INVALID_REGULAR_EXPRESSION
    assert answer["error_message"] == \
        f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}."


RICH_OPS = st.lists(st.tuples(
    st.sampled_from(["join", "beat", "beat-revoked", "leave", "static-leave", "resubscribe",
                     "fail-next", "wait", "grow", "topic-u", "no-topic-u", "regex-refresh"]),
    st.integers(0, 3), st.sampled_from([("t",), ("t", "u"), ("u",)]),
    st.sampled_from([None, "range", "uniform"])), max_size=45)


@settings(max_examples=int(os.environ.get("KCOORD_PROPERTY_EXAMPLES", "120")),
          deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RICH_OPS)
def test_static_members_regexes_topics_and_failed_writes_keep_the_invariants(ops):
    """Members static and dynamic, by names and by expression, leaving for a while
    and coming back under a new id, changing subscription and assignor; topics
    growing, appearing and going; writes failing: no partition is ever held by
    two members, and after every write settles the group is what its log gives."""
    h = harness(partitions=3)
    epochs: dict[str, int] = {}  # member id -> epoch, as its client knows it
    instance_of: dict[str, str] = {}
    incarnation = itertools.count()
    fail_next = False
    size = 3

    def beat(member, epoch, **kw):
        nonlocal fail_next
        answer = h.consumer_heartbeat(member=member, epoch=epoch, settle=False,
                                      instance=instance_of.get(member), **kw)
        h.settle(E.NOT_LEADER_OR_FOLLOWER if fail_next else E.NONE)
        fail_next = False
        return answer if answer is not None else h.answer(list(h.answers)[-1])

    for op, n, topics, assignor in ops:
        slot = f"m{n}"
        member = next((m for m in epochs if m.startswith(slot + "-")), None)
        if op == "join" and member is None:
            member = f"{slot}-{next(incarnation)}"
            if n % 2 == 0:
                instance_of[member] = f"i{n}"
            regex = "t|u" if n == 3 else None
            a = beat(member, 0, topics=None if regex else list(topics), regex=regex,
                     assignor=assignor)
        elif op in ("beat", "beat-revoked", "resubscribe") and member is not None:
            mine = group(h).members.get(member)
            reported = [] if op == "beat-revoked" or mine is None else \
                [{"topic_id": t, "partitions": sorted(ps)} for t, ps in mine.assigned.items()]
            extra = {"topics": list(topics), "assignor": assignor} if op == "resubscribe" \
                and n != 3 else {}
            a = beat(member, epochs[member], owned=reported, **extra)
        elif op == "leave" and member is not None:
            beat(member, -1)
            epochs.pop(member)
            continue
        elif op == "static-leave" and member is not None and member in instance_of:
            a = beat(member, -2)
            epochs.pop(member)
            continue
        elif op == "fail-next":
            fail_next = True
            continue
        elif op == "wait":
            h.advance(20_000)
            h.settle()
            continue
        elif op == "grow":
            size += 1
            h.image.set("t", T, size)
            continue
        elif op == "topic-u":
            h.image.set("u", U, 2)
            continue
        elif op == "no-topic-u":
            h.image.delete("u")
            continue
        elif op == "regex-refresh":
            h.advance(11_000)
            h.settle()
            continue
        else:
            continue
        if a["error_code"] == E.NONE:
            epochs[member] = a["member_epoch"]
        else:
            epochs.pop(member, None)
        if "g" in h.core.groups:
            assert all(len(holders) == 1 for holders in held_by(h).values())
    h.settle()
    assert_replay_equals_live(h)


def test_the_metadata_hash_is_kafkas():
    from kcoord.broker.groups.consumer_membership import group_hash, topic_hash
    # values computed by Kafka 4.4's Utils.computeTopicHash / computeGroupHash
    bar = topic_hash(uuid.UUID(int=(5 << 64) | 7), "bar", 1)
    assert bar == -7744607824951862104
    assert group_hash({}) == 0
    assert group_hash({"bar": bar}) != bar and group_hash({"bar": bar}) == group_hash(
        {"bar": bar})
    assert topic_hash(uuid.UUID(int=(5 << 64) | 7), "bar", 2) != bar
    assert topic_hash(uuid.UUID(int=(5 << 64) | 8), "bar", 1) != bar


def test_leaving_answers_as_kafka_does():
    h = harness()
    a = h.consumer_heartbeat(member="m1")
    h.consumer_heartbeat(member="s1", instance="i1")
    assert h.consumer_heartbeat(member="m1", epoch=-1, owned=owned(a)) == {
        "error_code": E.NONE, "error_message": None, "member_id": "m1", "member_epoch": -1,
        "heartbeat_interval_ms": 0, "assignment": None}
    assert h.consumer_heartbeat(member="s1", epoch=-2, instance="i1") == {
        "error_code": E.NONE, "error_message": None, "member_id": "s1", "member_epoch": -2,
        "heartbeat_interval_ms": 0, "assignment": None}
    refusals = {
        ("nope", "m1", -1, None): (E.GROUP_ID_NOT_FOUND, "Group nope not found."),
        ("g", "zz", -1, None): (E.UNKNOWN_MEMBER_ID, "Member zz is not a member of group g."),
        ("g", "zz", -2, "i9"): (E.UNKNOWN_MEMBER_ID, "Instance id i9 is unknown."),
        ("g", "zz", -1, "i1"): (E.FENCED_INSTANCE_ID,
                                "Static member zz with instance id i1 was fenced by member s1."),
    }
    for (gid, member, epoch, instance), expected in refusals.items():
        answer = h.consumer_heartbeat(group=gid, member=member, epoch=epoch, instance=instance)
        assert answer == {"error_code": expected[0], "error_message": expected[1],
                          "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0,
                          "assignment": None}
    h.stable_group("cl")
    answer = h.consumer_heartbeat(group="cl", member="m1", epoch=-1)
    assert (answer["error_code"], answer["error_message"]) == \
        (E.GROUP_ID_NOT_FOUND, "Group cl is not a consumer group.")


def test_a_new_group_whose_first_write_fails_never_was():
    h = harness()
    ticket = h.commit("g", {("t", 0): (3, "")})  # a simple (classic) group with an offset
    h.settle()
    assert h.answer(ticket) == {("t", 0): E.NONE}
    answer = h.consumer_heartbeat(member="m1", settle=False)
    assert answer is None
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert not isinstance(h.core.groups["g"], ConsumerGroup)  # the classic group is back
    assert h.core.fetch_offsets("g", [("t", [0])])[1][0][1][0][1].offset == 3
    fresh = h.consumer_heartbeat(group="new", member="m1", settle=False)
    assert fresh is None
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert "new" not in h.core.groups
    h.advance(60_000)  # its session timer finds no group: nothing is written
    assert h.settle() == 0


def test_a_member_in_a_state_from_a_newer_coordinator_starts_again_from_nothing():
    h = harness()
    h.consumer_heartbeat(member="m1")
    records = list(h.durable)
    key = G.consumer_group_key(G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m1")
    records.append((key, G.consumer_group_value(G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, {
        "member_epoch": 2, "previous_member_epoch": 1, "state": 99,
        "assigned_partitions": [], "partitions_pending_revocation": []})))
    other = harness()
    other.core.install(replay(records), other.now)
    assert group(other).members["m1"].state is MemberState.UNKNOWN
    refused = other.consumer_heartbeat(member="m1", epoch=2, owned=None)
    assert (refused["error_code"], refused["error_message"]) == (
        E.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. The member "
                               "must abandon all its partitions and rejoin.")
    again = other.consumer_heartbeat(member="m1", epoch=2, owned=[])
    assert again["error_code"] == E.NONE and parts(again) == {(T, p) for p in range(6)}


def test_groups_sharing_a_regex_read_the_topics_once_per_metadata_version():
    """Resolving an expression walks every topic name: groups of a shard that use
    the same one share that walk until a topic changes."""
    class Counting(StaticImage):
        walks = 0

        def topic_names(self):
            Counting.walks += 1
            return super().topic_names()

    h = harness()
    h.image = Counting({"t": (T, 6)})
    h.core.consumer.metadata = h.image
    for gid in ("g1", "g2", "g3"):
        h.consumer_heartbeat(group=gid, member="m1", topics=None, regex="t.*")
    h.advance(0)
    h.settle()
    assert Counting.walks == 1
    assert all(h.core.groups[g].resolved["t.*"][0] == {"t"} for g in ("g1", "g2", "g3"))
    h.image.set("t2", U, 1)
    h.advance(11_000)
    for gid in ("g1", "g2"):
        h.consumer_heartbeat(group=gid, member="m1", epoch=h.core.groups[gid].members["m1"]
                             .member_epoch, owned=[])
    h.advance(0)
    h.settle()
    assert Counting.walks == 2
    assert h.core.groups["g2"].resolved["t.*"][0] == {"t", "t2"}
