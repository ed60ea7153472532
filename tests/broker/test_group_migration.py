"""Online migration between the classic and the consumer group protocols
(KIP-848's ``group.consumer.migration.policy``) on the pure coordinator core,
with a manual clock: a running classic group upgraded by a consumer-protocol
member, classic members served inside a consumer group (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit), their timeouts, and the downgrade back
to a classic group when the last consumer-protocol member goes; failed
writes put the group back as the log has it."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.broker.groups.consumer_group import ConsumerGroup, MemberState
from kcoord.broker.groups.consumer_membership import StaticImage
from kcoord.broker.groups.group import Group, GroupState
from kcoord.broker.groups.loader import replay
from kcoord.protocol import group_records as G
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.group_harness import Harness

T = uuid.UUID(int=0x1111)


def harness(partitions=6, **config) -> Harness:
    h = Harness(**config)
    h.image = StaticImage({"t": (T, partitions)})
    h.core.consumer.metadata = h.image
    return h


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def subscription(owned=(), topic="t") -> bytes:
    """ConsumerProtocolSubscription v1, as a cooperative consumer sends it."""
    out = struct.pack(">hi", 1, 1) + _string(topic) + struct.pack(">i", -1)
    if not owned:
        return out + struct.pack(">i", 0)
    return out + struct.pack(">i", 1) + _string(topic) + struct.pack(
        f">i{len(owned)}i", len(owned), *owned)


def assignment(*partitions, topic="t") -> bytes:
    return G.consumer_assignment_bytes([(topic, list(partitions))], 1)


def decoded(raw: bytes) -> list[int]:
    return sorted(p for t in G.consumer_assignment(raw)["assigned_partitions"]
                  for p in t["partitions"])


def parts(answer) -> set[int]:
    return {p for tp in answer["assignment"]["topic_partitions"] for p in tp["partitions"]}


def classic_group(h: Harness, shares=((0, 1, 2), (3, 4, 5)), group="g",
                  protocols=None) -> tuple[list[str], int]:
    """A Stable classic group whose members own ``shares``; (member ids, generation)."""
    protocols = protocols or [("range", subscription())]
    joins = [h.join_new(group, protocols=protocols) for _ in shares]
    h.advance(0)
    h.settle()
    answers = [h.answer(t) for _m, t in joins]
    ids = [m for m, _t in joins]
    generation = answers[0]["generation_id"]
    leader = answers[0]["leader"]
    plan = [(m, assignment(*share)) for m, share in zip(ids, shares)]
    syncs = [h.sync(group, generation, m, plan if m == leader else ()) for m in ids]
    h.settle()
    assert all(h.answer(s)["error_code"] == E.NONE for s in syncs)
    return ids, generation


def rejoin(h: Harness, member: str, owned=(), group="g", **kw) -> dict:
    t = h.join(group, member, protocols=[("range", subscription(owned))], **kw)
    h.settle()
    return h.answer(t)


def sync(h: Harness, member: str, generation: int, group="g", **kw) -> dict:
    t = h.sync(group, generation, member, **kw)
    h.settle()
    return h.answer(t)


def held_by(group: ConsumerGroup) -> dict:
    holders: dict = {}
    for m in group.members.values():
        for a in (m.assigned, m.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    holders.setdefault((t, p), set()).add(m.member_id)
    return holders


def assert_replay_equals_live(h: Harness) -> None:
    loaded = replay(h.durable)
    for gid, grp in h.core.groups.items():
        if isinstance(grp, ConsumerGroup):
            back = loaded.consumer_groups[gid]
            assert back.members == grp.members
            assert back.target == grp.target
            assert (back.group_epoch, back.assignment_epoch) == \
                (grp.group_epoch, grp.assignment_epoch)
        else:
            assert gid not in loaded.consumer_groups or loaded.consumer_groups[gid].dead
            if grp.state in (GroupState.STABLE, GroupState.EMPTY):  # not mid-rebalance
                back = loaded.groups[gid]
                assert (back.generation, set(back.members)) == \
                    (grp.generation, set(grp.members))


def upgraded(h: Harness):
    """A classic group of two, then a consumer-protocol member c1 joins."""
    (a, b), generation = classic_group(h)
    answer = h.consumer_heartbeat(member="c1")
    return a, b, generation, answer


# == the upgrade ============================================================================

def test_a_consumer_protocol_member_upgrades_a_running_classic_group():
    h = harness()
    a, b, generation, c = upgraded(h)
    g = h.core.groups["g"]
    assert isinstance(g, ConsumerGroup)
    assert c["error_code"] == E.NONE and c["member_epoch"] == generation + 1
    # the classic members keep what they own, at their generation
    assert g.members[a].uses_classic and g.members[a].member_epoch == generation
    assert g.members[a].previous_member_epoch == generation
    assert g.members[a].classic.session_timeout_ms == 10_000
    assert g.members[a].rebalance_timeout_ms == 30_000 and g.members[a].client_id == "c"
    assert g.members[a].assigned == {T: frozenset({0, 1, 2})}
    assert g.members[b].assigned == {T: frozenset({3, 4, 5})}
    # the newcomer waits until they release its share
    assert parts(c) == set() and g.members["c1"].state is MemberState.UNRELEASED_PARTITIONS
    assert len(g.target["c1"][T]) == 2
    assert all(len(who) == 1 for who in held_by(g).values())
    # the records: the classic group's tombstone, then the consumer group
    kinds = [G.decode_key(k)[0] for k, _v in h.durable]
    at = next(i for i, (k, v) in enumerate(h.durable)
              if kinds[i] == G.GROUP_METADATA and v is None)
    assert kinds[at + 1:at + 9] == [
        G.CONSUMER_GROUP_MEMBER_METADATA, G.CONSUMER_GROUP_MEMBER_METADATA,
        G.CONSUMER_GROUP_METADATA, G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, G.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
        G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT]
    assert_replay_equals_live(h)
    described = h.core.consumer_describe(["g"], 1)[0]
    types = {m["member_id"]: m["member_type"] for m in described["members"]}
    assert types == {a: 0, b: 0, "c1": 1}


def test_classic_members_rejoin_revoke_and_the_newcomer_gets_its_share():
    h = harness()
    a, b, generation, c = upgraded(h)
    assert h.heartbeat("g", generation, a) == E.REBALANCE_IN_PROGRESS
    joined = rejoin(h, a, owned=[0, 1, 2])
    assert joined["error_code"] == E.NONE and joined["members"] == [] and joined["leader"] == ""
    # it still owns the partition it must give up: it stays at its epoch, and the
    # newcomer does not get that partition yet
    member = h.core.groups["g"].members[a]
    assert member.state is MemberState.UNREVOKED_PARTITIONS
    assert joined["generation_id"] == generation and member.pending_revocation
    assert joined["protocol_type"] == "consumer" and joined["protocol_name"] == "range"
    synced = sync(h, a, joined["generation_id"], protocol_type="consumer",
                  protocol_name="range")
    kept = decoded(synced["assignment"])
    assert len(kept) == 2 and set(kept) <= {0, 1, 2}
    # it revoked the third: it joins again owning what it kept, and is stable
    again = rejoin(h, a, owned=kept)
    assert again["generation_id"] == generation + 1
    assert decoded(sync(h, a, again["generation_id"])["assignment"]) == kept
    assert h.heartbeat("g", again["generation_id"], a) == E.NONE
    # b does the same, as an eager consumer: it owns nothing when it rejoins
    assert h.heartbeat("g", generation, b) == E.REBALANCE_IN_PROGRESS
    b_joined = rejoin(h, b)
    b_kept = decoded(sync(h, b, b_joined["generation_id"])["assignment"])
    c2 = h.consumer_heartbeat(member="c1", epoch=c["member_epoch"], owned=[])
    assert set(kept) | set(b_kept) | parts(c2) == set(range(6))
    assert len(kept) + len(b_kept) + len(parts(c2)) == 6
    g = h.core.groups["g"]
    assert all(len(who) == 1 for who in held_by(g).values())
    assert g.state.value == "Stable"
    assert_replay_equals_live(h)


def test_an_upgrade_answers_the_parked_joins_of_a_rebalancing_classic_group():
    h = harness()
    (a, b), generation = classic_group(h)
    parked = h.join("g", a, protocols=[("range", subscription([0, 1, 2]))])
    assert h.answer(parked) is None  # b has not joined again yet
    h.consumer_heartbeat(member="c1")
    assert h.answer(parked)["error_code"] == E.REBALANCE_IN_PROGRESS
    assert isinstance(h.core.groups["g"], ConsumerGroup)


@pytest.mark.parametrize("case, message", [
    ("protocol type", "the group does not use the consumer embedded protocol"),
    ("user data", "because an unsupported custom assignor is in use. Please refer to the "
                  "documentation or switch to a default assignor before re-attempting the "
                  "upgrade."),
    ("size", "the group size exceeds the consumer group maximum size"),
])
def test_an_upgrade_is_refused_as_kafka_refuses_it(case, message):
    h = harness(consumer_max_size=1 if case == "size" else 2**31 - 1)
    if case == "protocol type":
        h.stable_group("g", protocol_type="connect")
    else:
        (a, b), generation = classic_group(h)
        if case == "user data":
            raw = G._encode(G.CONSUMER_PROTOCOL_ASSIGNMENT, 1, {
                "assigned_partitions": [{"topic": "t", "partitions": [0]}],
                "user_data": b"sticky"})
            h.core.groups["g"].members[a].assignment = raw
    answer = h.consumer_heartbeat(member="c1")
    assert answer["error_code"] == E.GROUP_ID_NOT_FOUND
    assert message in answer["error_message"]
    assert isinstance(h.core.groups["g"], Group)


def test_a_failed_upgrade_leaves_the_classic_group_as_it_was():
    h = harness()
    (a, b), generation = classic_group(h)
    h.consumer_heartbeat(member="c1", settle=False)
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    g = h.core.groups["g"]
    assert isinstance(g, Group) and g.state is GroupState.STABLE and set(g.members) == {a, b}
    assert h.heartbeat("g", generation, a) == E.NONE
    h.advance(60_000)  # the consumer sessions armed for the conversion find no member
    assert isinstance(h.core.groups["g"], Group)


# == classic members inside a consumer group ================================================

def test_classic_requests_of_a_consumer_group_are_checked_as_kafka_checks_them():
    h = harness()
    a, b, generation, c = upgraded(h)
    assert h.heartbeat("g", generation + 1, a) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", generation, "nobody") == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", c["member_epoch"], "c1") == E.UNKNOWN_MEMBER_ID  # not classic
    joined = rejoin(h, a, owned=[0, 1, 2])
    gen = joined["generation_id"]
    assert sync(h, a, gen, protocol_name="roundrobin")["error_code"] == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert sync(h, a, gen, protocol_type="connect")["error_code"] == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert sync(h, a, gen + 1)["error_code"] == E.ILLEGAL_GENERATION
    # a member whose protocols no classic member shares
    other = h.join("g", "", protocols=[("other", subscription())])
    assert h.answer(other)["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    # a new dynamic member is asked for its id first (JoinGroup v4+)
    new = h.join("g", "", protocols=[("range", subscription())])
    assert h.answer(new)["error_code"] == E.MEMBER_ID_REQUIRED
    assert len(h.answer(new)["member_id"]) == 22


def test_with_the_migration_disabled_a_classic_member_cannot_join_a_consumer_group():
    h = harness(consumer_migration_policy="disabled")
    h.consumer_heartbeat(member="c1")
    t = h.join("g", "", protocols=[("range", subscription())])
    assert h.answer(t)["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_a_classic_member_commits_with_its_generation():
    h = harness()
    a, b, generation, c = upgraded(h)
    ok = h.commit("g", {("t", 0): (5, "")}, generation, a, version=5)
    h.settle()
    assert h.answer(ok) == {("t", 0): E.NONE}
    stale = h.commit("g", {("t", 0): (6, "")}, generation + 1, a)
    assert h.answer(stale) == {("t", 0): E.ILLEGAL_GENERATION}
    # a consumer-protocol member below v9 is refused; its epoch is checked too
    old = h.commit("g", {("t", 0): (6, "")}, c["member_epoch"], "c1", version=8)
    assert h.answer(old) == {("t", 0): E.UNSUPPORTED_VERSION}


def test_a_classic_member_that_does_not_rejoin_in_time_is_removed():
    h = harness()
    a, b, generation, c = upgraded(h)
    assert h.heartbeat("g", generation, a) == E.REBALANCE_IN_PROGRESS
    for _ in range(3):  # alive (10 s sessions), but it does not join again
        h.advance(9_000)
        assert h.heartbeat("g", generation, a) == E.REBALANCE_IN_PROGRESS
    h.advance(2_999)
    assert a in h.core.groups["g"].members
    h.advance(1)  # its rebalance timeout (30 s) from the first answer that asked it
    h.settle()
    assert a not in h.core.groups["g"].members


def test_a_classic_member_that_does_not_sync_in_time_is_removed():
    h = harness()
    a, b, generation, c = upgraded(h)
    rejoin(h, a, owned=[0, 1, 2], rebalance=5_000)
    h.advance(4_999)
    assert a in h.core.groups["g"].members
    h.advance(1)
    h.settle()
    assert a not in h.core.groups["g"].members


def test_a_classic_member_expires_after_its_own_session_timeout():
    h = harness()
    a, b, generation, c = upgraded(h)
    h.advance(9_000)
    assert h.heartbeat("g", generation, b) == E.REBALANCE_IN_PROGRESS
    h.consumer_heartbeat(member="c1", epoch=c["member_epoch"], owned=[])
    h.advance(1_000)  # a's session (10 s, from its JoinGroup) ends
    h.settle()
    assert set(h.core.groups["g"].members) == {b, "c1"}


def test_leave_group_removes_members_of_either_protocol():
    h = harness()
    a, b, generation, c = upgraded(h)
    code, errors = h.leave("g", a, "nobody")
    h.settle()
    assert errors == [E.NONE, E.UNKNOWN_MEMBER_ID]
    g = h.core.groups["g"]
    assert set(g.members) == {b, "c1"} and g.group_epoch == generation + 2
    assert_replay_equals_live(h)


# == the downgrade ==========================================================================

def test_the_last_consumer_protocol_member_leaving_downgrades_the_group():
    h = harness()
    a, b, generation, c = upgraded(h)
    committed = h.commit("g", {("t", 1): (7, "kept")}, generation, a)
    h.settle()
    assert h.answer(committed) == {("t", 1): E.NONE}
    left = h.consumer_heartbeat(member="c1", epoch=-1)
    assert left["error_code"] == E.NONE and left["member_epoch"] == -1
    g = h.core.groups["g"]
    assert isinstance(g, Group)
    assert g.state is GroupState.PREPARING_REBALANCE and g.generation == generation + 1
    assert set(g.members) == {a, b} and g.protocol_name == "range"
    # each member's assignment is its target, in its subscription's version
    given = decoded(g.members[a].assignment) + decoded(g.members[b].assignment)
    assert len(given) == len(set(given))
    assert_replay_equals_live(h)
    # the classic members learn of it by their heartbeats and rejoin
    assert h.heartbeat("g", generation, a) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", generation + 1, a) == E.REBALANCE_IN_PROGRESS
    ta = h.join("g", a, protocols=[("range", subscription())])
    tb = h.join("g", b, protocols=[("range", subscription())])
    h.settle()
    assert {h.answer(ta)["generation_id"], h.answer(tb)["generation_id"]} == {generation + 2}
    fetched = h.core.fetch_offsets("g", None)
    assert fetched is not None
    assert h.core.offsets.groups["g"][("t", 1)].offset == 7
    loaded = replay(h.durable)
    assert loaded.consumer_groups.get("g") is None or loaded.consumer_groups["g"].dead


def test_a_session_expiry_of_the_last_consumer_protocol_member_downgrades_too():
    h = harness()
    a, b, generation, c = upgraded(h)
    generations = {}
    for member, share in ((a, [0, 1, 2]), (b, [3, 4, 5])):
        joined = rejoin(h, member, owned=share)
        kept = decoded(sync(h, member, joined["generation_id"])["assignment"])
        joined = rejoin(h, member, owned=kept)
        sync(h, member, joined["generation_id"])
        generations[member] = joined["generation_id"]
    for _ in range(5):  # a and b heartbeat, c1 is silent
        h.advance(8_000)
        for member, gen in generations.items():
            assert h.heartbeat("g", gen, member) == E.NONE
    h.advance(5_001)  # c1's session (45 s) is over
    h.settle()
    g = h.core.groups["g"]
    assert isinstance(g, Group) and set(g.members) == {a, b}
    assert g.state is GroupState.PREPARING_REBALANCE


def test_with_upgrade_only_the_group_stays_a_consumer_group():
    h = harness(consumer_migration_policy="upgrade")
    a, b, generation, c = upgraded(h)
    h.consumer_heartbeat(member="c1", epoch=-1)
    g = h.core.groups["g"]
    assert isinstance(g, ConsumerGroup) and set(g.members) == {a, b}


def test_a_failed_downgrade_puts_the_consumer_group_back():
    h = harness()
    a, b, generation, c = upgraded(h)
    left = h.consumer_heartbeat(member="c1", epoch=-1, settle=False)
    assert left is None
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    g = h.core.groups["g"]
    assert isinstance(g, ConsumerGroup) and set(g.members) == {a, b, "c1"}
    assert h.heartbeat("g", generation, a) == E.REBALANCE_IN_PROGRESS


def test_a_group_goes_up_and_down_and_up_again():
    h = harness()
    a, b, generation, c = upgraded(h)
    h.consumer_heartbeat(member="c1", epoch=-1)
    g = h.core.groups["g"]
    ta = h.join("g", a, protocols=[("range", subscription())])
    h.join("g", b, protocols=[("range", subscription())])
    h.settle()
    gen = h.answer(ta)["generation_id"]
    leader = h.answer(ta)["leader"]
    plan = [(a, assignment(0, 1, 2)), (b, assignment(3, 4, 5))]
    sa = h.sync("g", gen, a, plan if leader == a else ())
    sb = h.sync("g", gen, b, plan if leader == b else ())
    h.settle()
    assert h.answer(sa)["error_code"] == h.answer(sb)["error_code"] == E.NONE
    assert g.state is GroupState.STABLE
    again = h.consumer_heartbeat(member="c2")
    assert again["error_code"] == E.NONE
    assert isinstance(h.core.groups["g"], ConsumerGroup)
    assert_replay_equals_live(h)


# == property: mixed members never own a partition twice ===================================

_ACTIONS = st.lists(st.tuples(st.sampled_from(["classic", "consumer", "leave", "tick"]),
                              st.integers(0, 3)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(_ACTIONS)
def test_mixed_members_never_own_a_partition_twice(actions):
    h = harness()
    a, b, generation, c = upgraded(h)
    classic = {a: [0, 1, 2], b: [3, 4, 5]}  # what each client believes it owns
    consumers: dict[str, tuple[int, list]] = {"c1": (c["member_epoch"], [])}
    for action, n in actions:
        g = h.core.groups["g"]
        if not isinstance(g, ConsumerGroup):
            # downgraded: each remaining member is given its target, none twice
            given = [p for m in g.members.values() for p in decoded(m.assignment)]
            assert len(given) == len(set(given))
            break
        if action == "consumer":
            name = f"c{n}"
            epoch, owned = consumers.get(name, (0, []))
            answer = h.consumer_heartbeat(
                member=name, epoch=epoch,
                owned=[{"topic_id": T, "partitions": owned}] if owned else [])
            if answer["error_code"] == E.NONE:
                got = sorted(parts(answer)) if answer["assignment"] else owned
                consumers[name] = (answer["member_epoch"], got)
            else:
                consumers.pop(name, None)
        elif action == "classic" and classic:
            member = sorted(classic)[n % len(classic)]
            joined = rejoin(h, member, owned=classic[member])
            if joined["error_code"] != E.NONE:
                classic.pop(member)
                continue
            synced = sync(h, member, joined["generation_id"])
            if synced["error_code"] == E.NONE:
                classic[member] = decoded(synced["assignment"])
        elif action == "leave" and consumers:
            name = sorted(consumers)[n % len(consumers)]
            h.consumer_heartbeat(member=name, epoch=-1)
            consumers.pop(name)
        elif action == "tick":
            h.advance(1_000)
            h.settle()
            # a member the group fenced loses what it owned
            members = h.core.groups["g"].members
            classic = {m: o for m, o in classic.items() if m in members}
            consumers = {m: v for m, v in consumers.items() if m in members}
        owned_all = [p for o in classic.values() for p in o] + \
            [p for _e, o in consumers.values() for p in o]
        assert len(owned_all) == len(set(owned_all)), (classic, consumers)
        g = h.core.groups["g"]
        if isinstance(g, ConsumerGroup):
            assert all(len(who) == 1 for who in held_by(g).values())
    assert_replay_equals_live(h)


# == what Kafka's conversion fails on, and crash paths =======================================

def test_an_upgrade_refused_after_the_conversion_leaves_later_writes_whole():
    h = harness(consumer_max_size=2)
    classic_group(h)  # two members: the group converts, then the newcomer does not fit
    h.consumer_heartbeat(group="other", member="x1")
    answer = h.consumer_heartbeat(member="c1")
    assert answer["error_code"] == E.GROUP_MAX_SIZE_REACHED
    assert isinstance(h.core.groups["g"], Group)
    h.advance(45_000)  # x1's session ends: its removal is written and folded in
    h.settle()
    assert "x1" not in h.core.groups["other"].members
    assert_replay_equals_live(h)


def test_a_join_that_changes_nothing_keeps_the_member():
    h = harness()
    a, b, generation, c = upgraded(h)
    first = rejoin(h, a, owned=[0, 1, 2])
    second = rejoin(h, a, owned=[0, 1, 2])  # a retry: nothing to write
    assert second["generation_id"] == first["generation_id"]
    h.advance(1)
    assert a in h.core.groups["g"].members


def test_a_classic_group_whose_members_overlap_is_not_upgraded():
    h = harness()
    classic_group(h, shares=((0, 1, 2), (2, 3, 4, 5)))
    answer = h.consumer_heartbeat(member="c1")
    assert answer["error_code"] == E.UNKNOWN_SERVER_ERROR
    assert isinstance(h.core.groups["g"], Group)


def test_a_classic_group_in_its_first_rebalance_is_not_upgraded():
    h = harness(initial_rebalance_delay_ms=3_000)
    h.join_new("g", protocols=[("range", subscription())])  # waits for the delay
    answer = h.consumer_heartbeat(member="c1")
    assert answer["error_code"] == E.UNKNOWN_SERVER_ERROR
    assert isinstance(h.core.groups["g"], Group)


def test_an_empty_classic_group_with_a_pending_member_gives_way():
    h = harness()
    first = h.join("g", protocols=[("range", subscription())])
    assert h.answer(first)["error_code"] == E.MEMBER_ID_REQUIRED  # a pending member only
    answer = h.consumer_heartbeat(member="c1")
    assert answer["error_code"] == E.NONE and answer["member_epoch"] == 2


def test_a_malformed_subscription_in_a_join_is_refused():
    h = harness()
    a, b, generation, c = upgraded(h)
    for raw in (b"", b"\x00", b"\x00\x01\x00\x00\x00\x05\x00", b"\xff\xff" * 8):
        t = h.join("g", a, protocols=[("range", raw)])
        assert h.answer(t)["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.core.groups["g"].members[a].member_epoch == generation


def test_a_classic_member_without_protocols_is_answered_not_crashed():
    h = harness()
    a, b, generation, c = upgraded(h)
    g = h.core.groups["g"]
    member = g.members[a]
    g.members[a] = member.with_(classic=member.classic.__class__(10_000, ()))
    assert sync(h, a, generation)["error_code"] == E.UNKNOWN_SERVER_ERROR


def test_a_downgrade_the_members_cannot_make_leaves_a_consumer_group():
    h = harness()
    a, b, generation, c = upgraded(h)
    g = h.core.groups["g"]
    for member_id, name in ((a, "range"), (b, "roundrobin")):  # no shared protocol
        m = g.members[member_id]
        g._set_member(member_id, m.with_(classic=m.classic.__class__(
            10_000, ((name, subscription()),))))
    left = h.consumer_heartbeat(member="c1", epoch=-1)
    assert left["error_code"] == E.GROUP_ID_NOT_FOUND
    assert isinstance(h.core.groups["g"], ConsumerGroup)


def test_a_classic_member_replacing_the_last_static_consumer_member_downgrades_the_group():
    h = harness()
    (a, b), generation = classic_group(h)
    s1 = h.consumer_heartbeat(member="s1", instance="i1")
    assert s1["error_code"] == E.NONE
    # the static member comes back as a classic consumer, under a new member id
    t = h.join("g", "", instance="i1", protocols=[("range", subscription())])
    h.settle()
    joined = h.answer(t)
    assert joined["error_code"] == E.NONE and joined["member_id"] != "s1"
    g = h.core.groups["g"]
    assert isinstance(g, Group)
    assert set(g.members) == {a, b, joined["member_id"]}
    assert g.static_members == {"i1": joined["member_id"]}
    # its assignment is the one the static member had as its target
    given = [p for m in g.members.values() for p in decoded(m.assignment)]
    assert sorted(given) == list(range(6))
    assert_replay_equals_live(h)


def test_static_classic_members_keep_their_instance_ids_up_and_down():
    h = harness()
    tickets = []
    for i in range(2):
        t = h.join("g", "", instance=f"i{i}", protocols=[("range", subscription())])
        tickets.append(t)
    h.advance(0)
    h.settle()
    answers = [h.answer(t) for t in tickets]
    ids = [x["member_id"] for x in answers]
    generation, leader = answers[0]["generation_id"], answers[0]["leader"]
    plan = [(ids[0], assignment(0, 1, 2)), (ids[1], assignment(3, 4, 5))]
    for m, inst in zip(ids, ("i0", "i1")):
        h.sync("g", generation, m, plan if m == leader else (), instance=inst)
    h.settle()
    h.consumer_heartbeat(member="c1")
    g = h.core.groups["g"]
    assert g.static_members == {"i0": ids[0], "i1": ids[1]}
    h.consumer_heartbeat(member="c1", epoch=-1)
    g = h.core.groups["g"]
    assert isinstance(g, Group) and g.protocol_type == "consumer"
    assert g.static_members == {"i0": ids[0], "i1": ids[1]}
    assert {m.group_instance_id for m in g.members.values()} == {"i0", "i1"}


def test_owned_partitions_of_an_unknown_topic_are_left_out():
    h = harness()
    a, b, generation, c = upgraded(h)
    # owned: partition 0 of a topic the broker does not have, then 0-2 of t
    raw = struct.pack(">hi", 1, 1) + _string("t") + struct.pack(">i", -1) + \
        struct.pack(">i", 2) + _string("ghost") + struct.pack(">ii", 1, 0) + \
        _string("t") + struct.pack(">iiii", 3, 0, 1, 2)
    t = h.join("g", a, protocols=[("range", raw)])
    h.settle()
    joined = h.answer(t)
    assert joined["error_code"] == E.NONE
    assert h.core.groups["g"].members[a].state is MemberState.UNREVOKED_PARTITIONS
