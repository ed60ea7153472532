"""The coordinator core with a manual clock (Kafka 4.x's GroupMetadataManager and
OffsetMetadataManager): joins, the delayed-join purgatory, syncs,
heartbeats, leaves, static members, commits and what is written when.  No
sleeps: time moves only when a test advances the clock."""

from __future__ import annotations

import pytest

from kcoord.broker.groups.common import NEW_MEMBER_JOIN_TIMEOUT_MS
from kcoord.broker.groups.group import GroupState as S
from kcoord.protocol import group_records as G
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.group_harness import Harness, subscription


@pytest.fixture
def h():
    return Harness()


def _records(h: Harness):
    """The durable records decoded: [(kind, key fields, value or None)]."""
    out = []
    for key, value in h.durable:
        kind, fields = G.decode_key(key)
        out.append((kind, fields, G.decode_value(kind, value)))
    return out


# -- JoinGroup -------------------------------------------------------------------------


def test_front_checks_come_in_the_new_coordinator_s_order(h):
    assert h.answer(h.join(""))["error_code"] == E.INVALID_GROUP_ID
    assert h.answer(h.join("g", session=5_999))["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert h.answer(h.join("g", session=1_800_001))["error_code"] == E.INVALID_SESSION_TIMEOUT
    h.core.refusal = E.COORDINATOR_LOAD_IN_PROGRESS  # the runtime's stand-in while loading
    assert h.answer(h.join("g"))["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("g", 1, "m") == E.NONE  # answered blindly while loading
    assert h.answer(h.sync("g", 1, "m"))["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert "g" not in h.core.groups


def test_two_step_join_then_the_initial_delay_then_a_generation(h):
    first = h.join("g", version=4, client="app")
    answer = h.answer(first)
    assert answer["error_code"] == E.MEMBER_ID_REQUIRED
    member_id = answer["member_id"]
    assert member_id == "app-uuid1" and answer["generation_id"] == -1
    # The new coordinator persists the group it created at once.
    assert h.settle() == 1
    [(kind, key, value)] = _records(h)
    assert (kind, key.group, value.generation, value.members) == (G.GROUP_METADATA, "g", 0, [])
    second = h.join("g", member_id, version=4)
    assert h.answer(second) is None  # parked in the purgatory
    assert h.core.groups["g"].state is S.PREPARING_REBALANCE
    h.advance(0)  # group.initial.rebalance.delay.ms is 0 by default
    joined = h.answer(second)
    assert joined["error_code"] == E.NONE and joined["generation_id"] == 1
    assert joined["leader"] == member_id and joined["protocol_name"] == "range"
    assert joined["members"] == [{"member_id": member_id, "group_instance_id": None,
                                  "metadata": subscription("t")}]
    assert h.core.groups["g"].state is S.COMPLETING_REBALANCE
    assert not h.pending  # nothing is written when a non-empty join phase ends


def test_old_clients_join_in_one_step(h):
    ticket = h.join("g", version=3)
    assert h.answer(ticket) is None
    h.advance(0)
    assert h.answer(ticket)["error_code"] == E.NONE
    assert h.answer(ticket)["member_id"] == "c-uuid1"


def test_a_known_member_id_of_a_missing_group_is_unknown(h):
    assert h.answer(h.join("g", "ghost"))["error_code"] == E.UNKNOWN_MEMBER_ID
    assert "g" not in h.core.groups


def test_protocols_must_be_shared(h):
    h.stable_group("g", 1)
    other = h.join("g", protocols=[("roundrobin", b"x")])
    assert h.answer(other) == {**h.answer(other), "error_code": E.INCONSISTENT_GROUP_PROTOCOL,
                               "member_id": ""}
    wrong_type = h.join("g", protocol_type="connect")
    assert h.answer(wrong_type)["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.answer(h.join("g", protocols=[]))["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_the_vote_picks_the_protocol_most_members_prefer(h):
    a, ta = h.join_new("g", protocols=[("roundrobin", b"1"), ("range", b"2")])
    b, tb = h.join_new("g", protocols=[("range", b"3"), ("roundrobin", b"4")])
    c, tc = h.join_new("g", protocols=[("range", b"5")])
    h.advance(0)
    assert {h.answer(t)["protocol_name"] for t in (ta, tb, tc)} == {"range"}
    leader = h.answer(ta)
    assert [m["metadata"] for m in leader["members"]] == [b"2", b"3", b"5"]
    assert h.answer(tb)["members"] == []


def test_the_initial_delay_waits_for_newcomers_up_to_the_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=3000)
    m1, t1 = h.join_new("g", rebalance=10_000)
    for _ in range(3):  # a newcomer in every 3 s window extends the wait
        h.advance(2_999)
        assert h.answer(t1) is None
        h.join_new("g", rebalance=10_000)
        h.advance(1)
    h.advance(999)
    assert h.answer(t1) is None
    h.advance(1)  # 3000 + 3000 + 3000 + 1000: the rebalance timeout
    assert h.answer(t1)["generation_id"] == 1 and len(h.answer(t1)["members"]) == 4


def test_the_initial_delay_never_ends_early():
    h = Harness(initial_rebalance_delay_ms=3000)
    _m, ticket = h.join_new("g")
    h.advance(2_999)
    assert h.answer(ticket) is None
    h.advance(1)
    assert h.answer(ticket)["error_code"] == E.NONE


def test_a_rebalance_waits_for_every_member_and_ends_when_the_last_rejoins(h):
    leader, follower = h.stable_group("g", 2)
    newcomer, parked = h.join_new("g")
    group = h.core.groups["g"]
    assert group.state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", 1, leader) == E.REBALANCE_IN_PROGRESS
    assert h.answer(h.sync("g", 1, follower))["error_code"] == E.REBALANCE_IN_PROGRESS
    t1 = h.join("g", leader)
    assert h.answer(parked) is None and h.answer(t1) is None
    t2 = h.join("g", follower)
    assert [h.answer(t)["generation_id"] for t in (parked, t1, t2)] == [2, 2, 2]
    assert len(h.answer(t1)["members"]) == 3  # the leader gets everyone


def test_members_that_do_not_rejoin_in_time_are_removed_but_static_ones_stay(h):
    # Sessions outlast the rebalance timeout: the follower is removed for not
    # re-joining, not for its silence.
    leader, follower = h.stable_group("g", 2, rebalance=20_000, session=30_000)
    ticket = h.join("g", instance="s1", rebalance=20_000, session=30_000)  # a static newcomer
    h.join("g", leader, rebalance=20_000, session=30_000)
    h.advance(19_999)
    assert h.answer(ticket) is None
    h.advance(1)
    group = h.core.groups["g"]
    assert follower not in group.members  # dynamic, never re-joined
    assert h.answer(ticket)["generation_id"] == 2
    assert set(group.members) == {leader, h.answer(ticket)["member_id"]}


def test_a_known_member_rejoining_with_the_same_metadata_gets_the_current_generation(h):
    leader, follower = h.stable_group("g", 2)
    again = h.answer(h.join("g", follower))
    assert (again["error_code"], again["generation_id"], again["members"]) == (E.NONE, 1, [])
    assert h.core.groups["g"].state is S.STABLE
    changed = h.join("g", follower, protocols=[("range", subscription("t", "u"))])
    assert h.answer(changed) is None and h.core.groups["g"].state is S.PREPARING_REBALANCE


def test_the_leader_rejoining_a_stable_group_forces_a_rebalance(h):
    leader, = h.stable_group("g", 1)
    ticket = h.join("g", leader)
    assert h.answer(ticket)["generation_id"] == 2  # everyone joined: at once


def test_join_in_completing_rebalance_repeats_the_generation_to_a_lost_answer(h):
    m, t = h.join_new("g")
    h.advance(0)
    again = h.join("g", m)
    assert h.answer(again)["generation_id"] == 1 and len(h.answer(again)["members"]) == 1


def test_group_max_size():
    h = Harness(max_group_size=2)
    h.stable_group("g", 2)
    refused = h.answer(h.join("g", version=3))
    assert (refused["error_code"], refused["member_id"]) == (E.GROUP_MAX_SIZE_REACHED, "")
    assert len(h.core.groups["g"].members) == 2


def test_a_join_to_an_empty_group_with_a_member_id_is_unknown(h):
    leader, = h.stable_group("g", 1)
    h.leave("g", leader)
    assert h.core.groups["g"].state is S.EMPTY
    assert h.answer(h.join("g", leader))["error_code"] == E.UNKNOWN_MEMBER_ID


# -- SyncGroup ---------------------------------------------------------------------------


def test_followers_wait_for_the_leader_s_assignment_and_it_is_durable_first(h):
    a, ta = h.join_new("g")
    b, tb = h.join_new("g")
    h.advance(0)
    h.settle()
    follower_sync = h.sync("g", 1, b)
    assert h.answer(follower_sync) is None
    leader_sync = h.sync("g", 1, a, [(a, b"A"), (b, b"B"), ("stranger", b"X")])
    assert h.answer(leader_sync) is None and len(h.pending) == 1
    assert h.core.groups["g"].state is S.COMPLETING_REBALANCE  # not before the write
    h.settle()
    assert h.answer(leader_sync) == {"error_code": E.NONE, "protocol_type": "consumer",
                                     "protocol_name": "range", "assignment": b"A"}
    assert h.answer(follower_sync)["assignment"] == b"B"
    assert h.core.groups["g"].state is S.STABLE
    [(kind, key, value)] = [r for r in _records(h) if r[2] and r[2].generation == 1]
    assert [(m.member_id, m.assignment) for m in value.members] == [(a, b"A"), (b, b"B")]
    assert value.leader == a and value.protocol == "range"
    # A late SyncGroup in Stable gets the stored assignment.
    assert h.answer(h.sync("g", 1, b))["assignment"] == b"B"


def test_a_member_left_out_of_the_assignment_gets_an_empty_one(h):
    a, ta = h.join_new("g")
    b, tb = h.join_new("g")
    h.advance(0)
    sb = h.sync("g", 1, b)
    h.sync("g", 1, a, [(a, b"A")])
    h.settle()
    assert h.answer(sb)["assignment"] == b""


def test_a_failed_assignment_write_answers_every_sync_and_rebalances(h):
    a, ta = h.join_new("g")
    b, tb = h.join_new("g")
    h.advance(0)
    h.settle()
    sb = h.sync("g", 1, b)
    sa = h.sync("g", 1, a, [(a, b"A"), (b, b"B")])
    h.settle(E.KAFKA_STORAGE_ERROR)
    assert h.answer(sa)["error_code"] == E.NOT_COORDINATOR  # the mapped write error
    assert h.answer(sb) == {"error_code": E.NOT_COORDINATOR, "protocol_type": None,
                            "protocol_name": None, "assignment": b""}
    assert h.core.groups["g"].state is S.PREPARING_REBALANCE


def test_sync_errors(h):
    leader, follower = h.stable_group("g", 2)
    assert h.answer(h.sync("nope", 1, leader))["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.answer(h.sync("g", 1, "ghost"))["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.answer(h.sync("g", 2, leader))["error_code"] == E.ILLEGAL_GENERATION
    assert h.answer(h.sync("g", 1, leader, protocol_type="connect"))["error_code"] == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert h.answer(h.sync("g", 1, leader, protocol_name="roundrobin"))["error_code"] == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert h.answer(h.sync("g", 1, leader, instance="nobody"))["error_code"] == \
        E.UNKNOWN_MEMBER_ID
    assert h.answer(h.sync("", 1, leader))["error_code"] == E.INVALID_GROUP_ID


def test_a_new_rebalance_answers_parked_syncs_with_rebalance_in_progress(h):
    a, ta = h.join_new("g")
    b, tb = h.join_new("g")
    h.advance(0)
    sb = h.sync("g", 1, b)
    h.join_new("g")  # a newcomer before the leader synced
    assert h.answer(sb)["error_code"] == E.REBALANCE_IN_PROGRESS


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout(h):
    a, ta = h.join_new("g", rebalance=20_000, session=30_000)
    b, tb = h.join_new("g", rebalance=20_000, session=30_000)
    h.advance(0)
    h.sync("g", 1, a, [(a, b"A"), (b, b"B")])
    h.settle()
    h.advance(19_999)
    assert b in h.core.groups["g"].members
    h.advance(1)
    group = h.core.groups["g"]
    assert b not in group.members and group.state is S.PREPARING_REBALANCE


# -- Heartbeat and session expiry -----------------------------------------------------------


def test_heartbeat_errors_and_states(h):
    leader, = h.stable_group("g", 1)
    assert h.heartbeat("g", 1, leader) == E.NONE
    assert h.heartbeat("g", 0, leader) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", 1, "ghost") == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nope", 1, leader) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("", 1, leader) == E.INVALID_GROUP_ID


def test_a_silent_member_expires_and_the_group_rebalances(h):
    leader, follower = h.stable_group("g", 2, session=10_000)
    h.advance(9_000)
    assert h.heartbeat("g", 1, leader) == E.NONE
    h.advance(999)
    assert follower in h.core.groups["g"].members
    h.advance(1)
    group = h.core.groups["g"]
    assert follower not in group.members  # expired 10 s after its last sign of life
    assert group.state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", 1, leader) == E.REBALANCE_IN_PROGRESS
    h.join("g", leader)
    assert group.state is S.COMPLETING_REBALANCE and group.generation == 2


def test_each_member_expires_at_its_own_deadline_under_one_timer_for_the_group(h):
    """The members of a group share one session timer, armed for their earliest
    deadline: heartbeats arm nothing new, and each member still expires exactly
    when its own session timeout has passed since it was last heard from."""
    short, t1 = h.join_new("g", session=10_000, rebalance=600_000)
    long, t2 = h.join_new("g", session=30_000, rebalance=600_000)
    h.advance(0)
    h.answer(h.sync("g", 1, short, [(short, b"a"), (long, b"b")]))
    h.settle()
    h.answer(h.sync("g", 1, long))
    group = h.core.groups["g"]
    assert group.state is S.STABLE
    sessions = [k for k in h.core.timers._armed if k[0] in ("session", "sessions")]
    assert sessions == [("sessions", "g")]
    heap = len(h.core.timers._heap)
    for _ in range(50):
        assert h.heartbeat("g", 1, long) == E.NONE
    assert len(h.core.timers._heap) == heap  # a heartbeat moves a deadline, no timer
    assert [k for k in h.core.timers._armed if k[0] in ("session", "sessions")] == sessions
    h.advance(9_999)
    assert set(group.members) == {short, long}
    h.advance(1)  # the short session is over; the long one has 20 s to go
    assert set(group.members) == {long} and group.state is S.PREPARING_REBALANCE
    assert h.core.timers.deadline(("sessions", "g")) == h.now + 20_000
    h.advance(19_999)
    assert long in group.members
    h.advance(1)
    assert not group.members


def test_a_member_whose_expiry_ends_the_join_phase_starts_the_others_sessions_again(h):
    """Two deadlines passed when the clock is next looked at: the first member
    expires, which ends the join phase, and the second, which had re-joined,
    gets a new session with its generation instead of expiring too."""
    gone, rejoined = h.stable_group("g", 2, session=10_000, rebalance=600_000)
    newcomer, parked = h.join_new("g", session=10_000, rebalance=600_000)
    h.advance(1_000)
    waiting = h.join("g", rejoined, session=10_000, rebalance=600_000)
    h.advance(20_000)  # both sessions are over by now: gone's first
    group = h.core.groups["g"]
    assert set(group.members) == {rejoined, newcomer}
    assert h.answer(waiting)["generation_id"] == h.answer(parked)["generation_id"] == 2
    assert group.state is S.COMPLETING_REBALANCE


def test_a_late_look_at_the_clock_fires_sessions_and_the_join_timer_in_deadline_order(h):
    """One timer stands for the members' sessions, yet their deadlines keep their
    place among the group's other timers: with the clock looked at only after a
    static member's session, the join phase that ended 1 ms before it keeps it."""
    dynamic, t1 = h.join_new("g", session=6_000, rebalance=15_000)
    static = h.join("g", instance="b", session=15_001, rebalance=15_000)
    h.advance(0)
    static_id = h.answer(static)["member_id"]
    h.answer(h.sync("g", 1, dynamic, [(dynamic, b"a"), (static_id, b"b")]))
    h.settle()
    h.answer(h.sync("g", 1, static_id, instance="b"))
    newcomer, parked = h.join_new("g", session=10_000, rebalance=15_000)  # join timer: 15 s
    h.advance(15_001)  # the dynamic member's session, the join timer, then the static's
    group = h.core.groups["g"]
    assert set(group.members) == {static_id, newcomer}
    assert group.generation == 2 and h.answer(parked)["generation_id"] == 2


def test_a_session_and_the_join_timer_at_the_same_instant_fire_in_the_order_armed(h):
    """A newcomer's join timeout and the rebalance timeout end together: its
    session was armed first, so it expires first, and the join phase then ends
    without it (the others, which never joined again, go too)."""
    leader, follower = h.stable_group("g", 2, session=10_000, rebalance=300_000)
    newcomer, parked = h.join_new("g", session=10_000, rebalance=300_000)
    for _ in range(NEW_MEMBER_JOIN_TIMEOUT_MS // 9_000):
        h.advance(9_000)
        assert h.heartbeat("g", 1, leader) == h.heartbeat("g", 1, follower) == \
            E.REBALANCE_IN_PROGRESS
    # 1 ms before: the group's session timer is armed for the newcomer's
    # deadline, the instant of the join timer, which was armed after it.
    h.advance(NEW_MEMBER_JOIN_TIMEOUT_MS % 9_000 - 1)
    assert h.answer(parked) is None
    h.advance(1)
    assert h.answer(parked)["error_code"] == E.UNKNOWN_MEMBER_ID
    group = h.core.groups["g"]
    assert not group.members and group.state is S.EMPTY


def test_an_expiry_that_fails_leaves_the_other_members_sessions_running(h, monkeypatch):
    first, second = h.stable_group("g", 2, session=10_000)
    membership = h.core.membership
    expire = membership._session_expired
    calls = []

    def failing_once(group, member, now):
        calls.append(member.member_id)
        if len(calls) == 1:
            raise RuntimeError("an expiry that fails")
        return expire(group, member, now)

    monkeypatch.setattr(membership, "_session_expired", failing_once)
    h.advance(10_000)  # the failure is logged; the other member expires all the same
    group = h.core.groups["g"]
    assert calls == [first, second] and second not in group.members
    assert first in group.members  # whose expiry failed
    assert group.state is S.PREPARING_REBALANCE  # the other's expiry took effect


def test_a_new_member_has_five_minutes_to_complete_its_join():
    h = Harness()
    leader, follower = h.stable_group("g", 2, session=10_000, rebalance=600_000)
    newcomer, parked = h.join_new("g", session=10_000, rebalance=600_000)
    for _ in range(NEW_MEMBER_JOIN_TIMEOUT_MS // 9_000):
        h.advance(9_000)
        h.heartbeat("g", 1, leader)
        h.heartbeat("g", 1, follower)
    h.advance(NEW_MEMBER_JOIN_TIMEOUT_MS % 9_000)
    assert h.answer(parked) == {**h.answer(parked), "error_code": E.UNKNOWN_MEMBER_ID,
                                "member_id": ""}
    assert newcomer not in h.core.groups["g"].members


def test_a_pending_member_id_expires_after_its_session_timeout(h):
    leader, = h.stable_group("g", 1)
    first = h.join("g", session=7_000)
    pending = h.answer(first)["member_id"]
    assert pending in h.core.groups["g"].pending_members
    h.advance(6_000)
    h.heartbeat("g", 1, leader)
    h.advance(1_000)
    assert pending not in h.core.groups["g"].pending_members
    assert h.answer(h.join("g", pending))["error_code"] == E.UNKNOWN_MEMBER_ID


# -- LeaveGroup ---------------------------------------------------------------------------


def test_leave_by_member_id_by_instance_id_and_the_errors(h):
    a, at = h.join_new("g")
    s = h.join("g", instance="inst")
    h.advance(0)
    static = h.answer(s)["member_id"]
    code, errors = h.leave("g", ("ghost", None, None), ("", "nobody", None),
                           (static, "other", None))
    assert (code, errors) == (E.NONE, [E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID,
                                       E.UNKNOWN_MEMBER_ID])
    code, errors = h.leave("g", (a, None, "bye"), ("", "inst", None))
    assert (code, errors) == (E.NONE, [E.NONE, E.NONE])
    group = h.core.groups["g"]
    assert group.state is S.EMPTY and group.generation == 2  # one rebalance for both
    assert h.leave("nope", a) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    assert h.leave("", a) == (E.INVALID_GROUP_ID, [])


def test_a_member_leaving_during_a_join_phase_answers_its_parked_join(h):
    leader, follower = h.stable_group("g", 2)
    parked = h.join("g", leader)
    h.leave("g", leader)
    assert h.answer(parked)["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.core.groups["g"].state is S.PREPARING_REBALANCE  # still waiting for the follower


def test_a_pending_member_can_leave(h):
    leader, = h.stable_group("g", 1)
    pending = h.answer(h.join("g"))["member_id"]
    assert h.leave("g", pending) == (E.NONE, [E.NONE])
    assert pending not in h.core.groups["g"].pending_members


# -- static membership (KIP-345) -------------------------------------------------------------


def _static_leader(h) -> str:
    """A Stable group "g" of one static member ("i1", assignment b"A"): its id."""
    t = h.join("g", instance="i1")
    h.advance(0)
    member_id = h.answer(t)["member_id"]
    h.sync("g", 1, member_id, [(member_id, b"A")])
    h.settle()
    return member_id


def test_a_restarted_static_member_gets_its_assignment_back_without_a_rebalance(h):
    old = _static_leader(h)
    restarted = h.join("g", instance="i1")
    assert h.answer(restarted) is None  # answered once the new member id is durable
    h.settle()
    answer = h.answer(restarted)
    new = answer["member_id"]
    assert new != old and answer["generation_id"] == 1 and answer["skip_assignment"]
    group = h.core.groups["g"]
    assert group.state is S.STABLE and group.leader_id == new
    assert h.answer(h.sync("g", 1, new, instance="i1"))["assignment"] == b"A"
    # The replaced member id is fenced.
    assert h.heartbeat("g", 1, old, "i1") == E.FENCED_INSTANCE_ID
    assert h.answer(h.join("g", old, instance="i1"))["error_code"] == E.FENCED_INSTANCE_ID


def test_a_replaced_static_leader_on_an_old_version_sees_the_old_leader_id(h):
    old = _static_leader(h)
    restarted = h.join("g", instance="i1", version=8)
    h.settle()
    answer = h.answer(restarted)
    assert answer["leader"] == old and answer["members"] == [] and not answer["skip_assignment"]


def test_a_static_member_parked_elsewhere_is_fenced_when_replaced(h):
    leader, = h.stable_group("g", 1)
    s = h.join("g", instance="i1")  # parked: the group rebalances
    replacement = h.join("g", instance="i1")
    assert h.answer(s)["error_code"] == E.FENCED_INSTANCE_ID
    assert h.answer(replacement) is None
    h.join("g", leader)
    assert h.answer(replacement)["error_code"] == E.NONE


def test_a_failed_static_replacement_write_restores_the_old_member(h):
    old = _static_leader(h)
    restarted = h.join("g", instance="i1")
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert h.answer(restarted)["error_code"] == E.NOT_COORDINATOR
    assert h.answer(restarted)["member_id"] == ""
    assert h.heartbeat("g", 1, old, "i1") == E.NONE


# -- OffsetCommit / OffsetFetch ------------------------------------------------------------------


def test_a_simple_consumer_commits_and_its_offsets_are_visible_once_durable(h):
    ticket = h.commit("simple", {("t", 0): (5, "meta"), ("t", 1): (7, "")})
    assert h.answer(ticket) is None
    assert h.core.fetch_offsets("simple", [("t", [0])])[1] == [("t", [(0, None)])]
    h.settle()
    assert h.answer(ticket) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    code, [(topic, parts)] = h.core.fetch_offsets("simple", [("t", [0, 1, 2])])
    assert [(p, o and (o.offset, o.metadata)) for p, o in parts] == \
        [(0, (5, "meta")), (1, (7, "")), (2, None)]
    records = _records(h)
    assert [(r[1].topic, r[1].partition, r[2].offset, r[2].commit_timestamp) for r in records] \
        == [("t", 0, 5, h.now), ("t", 1, 7, h.now)]
    assert h.core.groups["simple"].protocol_type is None


def test_commit_member_and_generation_checks(h):
    assert h.answer(h.commit("missing", {("t", 0): (1, "")}, generation=1, member="m",
                             version=9)) == {("t", 0): E.GROUP_ID_NOT_FOUND}
    assert h.answer(h.commit("missing", {("t", 0): (1, "")}, generation=1, member="m",
                             version=8)) == {("t", 0): E.ILLEGAL_GENERATION}
    leader, = h.stable_group("g", 1)
    ok = h.commit("g", {("t", 0): (1, "")}, generation=1, member=leader)
    h.settle()
    assert h.answer(ok) == {("t", 0): E.NONE}
    for kwargs, code in [
            ({"generation": 0, "member": leader}, E.ILLEGAL_GENERATION),
            ({"generation": 1, "member": "ghost"}, E.UNKNOWN_MEMBER_ID),
            ({"generation": -1, "member": ""}, E.UNKNOWN_MEMBER_ID),  # not a member
            ({"generation": 1, "member": leader, "instance": "x"}, E.UNKNOWN_MEMBER_ID)]:
        assert h.answer(h.commit("g", {("t", 0): (2, "")}, **kwargs)) == {("t", 0): code}
    # CompletingRebalance: members of the new generation must sync first.
    h.join("g", leader)
    assert h.answer(h.commit("g", {("t", 0): (3, "")}, generation=2, member=leader)) == \
        {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_a_member_of_the_current_generation_commits_during_a_rebalance(h):
    leader, follower = h.stable_group("g", 2)
    h.join("g", leader)  # PreparingRebalance, generation still 1
    ticket = h.commit("g", {("t", 0): (9, "")}, generation=1, member=follower)
    h.settle()
    assert h.answer(ticket) == {("t", 0): E.NONE}


def test_commit_metadata_longer_than_the_limit_is_refused_per_partition():
    h = Harness(offset_metadata_max_bytes=4)
    ticket = h.commit("g", {("t", 0): (1, "abcd"), ("t", 1): (1, "😀😀😀")})
    h.settle()
    # Java counts UTF-16 code units: three emoji are six.
    assert h.answer(ticket) == {("t", 0): E.NONE, ("t", 1): E.OFFSET_METADATA_TOO_LARGE}
    alone = h.commit("g", {("t", 1): (1, "abcde")})
    assert h.answer(alone) == {("t", 1): E.OFFSET_METADATA_TOO_LARGE} and not h.pending


def test_a_failed_commit_write_is_reported_and_nothing_becomes_visible(h):
    ticket = h.commit("g", {("t", 0): (1, "")})
    h.settle(E.KAFKA_STORAGE_ERROR)
    assert h.answer(ticket) == {("t", 0): E.NOT_COORDINATOR}
    assert h.core.fetch_offsets("g", None) == (E.NONE, [])


def test_a_commit_with_a_retention_time_carries_an_expiry(h):
    h.commit("g", {("t", 0): (1, "")}, version=2, retention=60_000)
    h.settle()
    [(_k, _f, value)] = _records(h)
    assert value.expire_timestamp == h.now + 60_000


def test_fetching_offsets_of_a_missing_group_creates_nothing(h):
    assert h.core.fetch_offsets("nope", [("t", [0])]) == (E.NONE, [("t", [(0, None)])])
    assert h.core.fetch_offsets("nope", None) == (E.NONE, [])
    assert "nope" not in h.core.groups


# -- Describe, List, Delete, OffsetDelete ------------------------------------------------------


def test_describe_shows_member_metadata_only_when_stable(h):
    leader, follower = h.stable_group("g", 2)
    stable = h.core.describe("g")
    assert (stable["group_state"], stable["protocol_type"], stable["protocol_data"]) == \
        ("Stable", "consumer", "range")
    assert [(m["member_id"], m["member_assignment"]) for m in stable["members"]] == \
        [(m, m.encode()) for m in (leader, follower)]
    assert all(m["member_metadata"] == subscription("t") for m in stable["members"])
    h.join("g", leader)
    rebalancing = h.core.describe("g")
    assert rebalancing["group_state"] == "PreparingRebalance"
    assert rebalancing["protocol_data"] == ""
    # Out of Stable the metadata is left out; the last assignment is still shown.
    assert [(m["member_metadata"], m["member_assignment"]) for m in rebalancing["members"]] \
        == [(b"", leader.encode()), (b"", follower.encode())]
    assert h.core.describe("nope") == {"error_code": E.NONE, "group_id": "nope",
                                       "group_state": "Dead", "protocol_type": "",
                                       "protocol_data": "", "members": []}


def test_list_groups_filters_by_state_and_type(h):
    h.stable_group("a", 1)
    h.commit("simple", {("t", 0): (1, "")})
    h.settle()
    groups = h.core.list_groups([], [])
    assert {(g["group_id"], g["protocol_type"], g["group_state"]) for g in groups} == \
        {("a", "consumer", "Stable"), ("simple", "", "Empty")}
    assert [g["group_id"] for g in h.core.list_groups([" STABLE "], [])] == ["a"]
    assert len(h.core.list_groups([], ["Classic"])) == 2
    assert h.core.list_groups([], ["consumer"]) == []


def test_delete_groups(h):
    h.stable_group("busy", 1)
    h.commit("idle", {("t", 0): (1, ""), ("t", 1): (2, "")})
    h.settle()
    ticket = h.delete_groups("busy", "idle", "nope", "idle")
    assert h.answer(ticket) is None  # only after the tombstones are durable
    h.settle()
    assert h.answer(ticket) == {"busy": E.NON_EMPTY_GROUP, "idle": E.NONE,
                                "nope": E.GROUP_ID_NOT_FOUND}
    assert "idle" not in h.core.groups and h.core.fetch_offsets("idle", None) == (E.NONE, [])
    tombstones = [(r[0], r[2]) for r in _records(h)[-3:]]
    assert tombstones == [(G.OFFSET_COMMIT, None)] * 2 + [(G.GROUP_METADATA, None)]


def test_offset_delete_refuses_subscribed_topics_of_an_active_consumer_group(h):
    leader, = h.stable_group("g", 1)  # subscribed to "t"
    h.commit("g", {("t", 0): (1, ""), ("u", 0): (2, "")}, generation=1, member=leader)
    h.settle()
    ticket = h.delete_offsets("g", [("t", 0), ("u", 0)])
    h.settle()
    assert h.answer(ticket) == (E.NONE, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC,
                                         ("u", 0): E.NONE})
    assert [p for p, o in h.core.fetch_offsets("g", [("u", [0])])[1][0][1] if o] == []
    assert h.answer(h.delete_offsets("nope", [("t", 0)])) == (E.GROUP_ID_NOT_FOUND, {})


def test_offset_delete_on_a_non_consumer_active_group_is_refused(h):
    h.stable_group("g", 1, protocol_type="connect")
    assert h.answer(h.delete_offsets("g", [("t", 0)])) == (E.NON_EMPTY_GROUP, {})


def test_deleting_a_topic_tombstones_its_offsets_in_every_group(h):
    h.commit("a", {("gone", 0): (1, ""), ("kept", 0): (2, "")})
    h.commit("b", {("gone", 1): (3, "")})
    h.settle()
    h._take(h.core.delete_topic_offsets({"gone"}, h.now))
    h.settle()
    assert [t for t, _ in h.core.fetch_offsets("a", None)[1]] == ["kept"]
    assert h.core.fetch_offsets("b", None)[1] == []
    assert [(r[1].topic, r[2]) for r in _records(h)[-2:]] == [("gone", None), ("gone", None)]


# -- offset expiry ---------------------------------------------------------------------


def test_offsets_of_an_empty_group_expire_from_when_it_became_empty():
    h = Harness(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=10_000)
    leader, = h.stable_group("g", 1)
    h.commit("g", {("t", 0): (1, "")}, generation=1, member=leader)
    h.settle()
    h.advance(50_000)
    h.heartbeat("g", 1, leader)
    h.leave("g", leader)  # Empty from now on
    h.settle()
    h.advance(90_000)
    assert h.core.fetch_offsets("g", None)[1] != []
    h.advance(10_000)
    h.settle()
    assert "g" not in h.core.groups  # no offsets left: the group is gone too
    assert [(r[0], r[2]) for r in _records(h)[-2:]] == [(G.OFFSET_COMMIT, None),
                                                        (G.GROUP_METADATA, None)]


def test_a_stable_consumer_group_keeps_offsets_of_its_subscribed_topics():
    h = Harness(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=10_000)
    leader, = h.stable_group("g", 1, session=1_800_000)
    h.commit("g", {("t", 0): (1, ""), ("old", 0): (2, "")}, generation=1, member=leader)
    h.settle()
    h.advance(110_000)
    h.settle()
    assert [t for t, _ in h.core.fetch_offsets("g", None)[1]] == ["t"]


def test_an_explicit_expiry_time_wins():
    h = Harness(offsets_retention_ms=10**9, offsets_retention_check_interval_ms=10_000)
    h.commit("g", {("t", 0): (1, "")}, version=2, retention=15_000)
    h.settle()
    h.advance(10_000)
    assert h.core.fetch_offsets("g", None)[1] != []
    h.advance(10_000)
    assert h.core.fetch_offsets("g", None)[1] == []


# -- deliberate differences (docs/deviations.md) ------------------------------------------------


def test_a_second_join_of_a_parked_member_answers_the_first(h):
    leader, follower = h.stable_group("g", 2)
    first = h.join("g", leader)
    second = h.join("g", leader)
    assert h.answer(first)["error_code"] == E.REBALANCE_IN_PROGRESS  # Kafka: never answered
    assert h.answer(second) is None
    h.join("g", follower)
    assert h.answer(second)["generation_id"] == 2


def test_a_leader_repeating_its_sync_waits_for_the_assignment_being_written(h):
    a, ta = h.join_new("g")
    h.advance(0)
    h.settle()
    first = h.sync("g", 1, a, [(a, b"first")])
    again = h.sync("g", 1, a, [(a, b"second")])
    assert h.answer(first)["error_code"] == E.REBALANCE_IN_PROGRESS
    assert len(h.pending) == 1  # one assignment written, not two
    h.settle()
    assert h.answer(again)["assignment"] == b"first"
    assert h.core.groups["g"].members[a].assignment == b"first"


def test_parked_requests_are_answered_not_coordinator_when_the_broker_stops(h):
    leader, follower = h.stable_group("g", 2)
    parked_join = h.join("g", leader)
    h.join("g", follower)
    parked_sync = h.sync("g", 2, follower)
    newcomer_join = h.join("other", version=3)  # parked in its initial delay
    h._take(h.core.unload())
    assert h.answer(parked_sync)["error_code"] == E.NOT_COORDINATOR
    assert h.answer(newcomer_join)["error_code"] == E.NOT_COORDINATOR
    assert h.answer(parked_join)["error_code"] == E.NONE  # answered before the stop


# -- the rules mutation testing asked for --------------------------------------------------------


def test_group_max_size_counts_the_members_that_rejoined_during_a_rebalance():
    h = Harness(max_group_size=3)
    leader, follower = h.stable_group("g", 2, session=60_000)
    h.join("g", version=3)  # a third member: PreparingRebalance, 1 waiting
    h.join("g", leader)  # 2 waiting
    fourth = h.join("g", version=3)  # 2 < 3: accepted
    assert h.answer(fourth) is None
    fifth = h.answer(h.join("g", version=3))  # 3 waiting: full
    assert fifth["error_code"] == E.GROUP_MAX_SIZE_REACHED


def test_a_static_member_that_does_not_rejoin_is_kept_when_the_join_phase_ends():
    h = Harness()
    static_join = h.join("g", instance="i1", session=60_000, rebalance=20_000)
    h.advance(0)
    static = h.answer(static_join)["member_id"]
    dynamic, parked = h.join_new("g", session=60_000, rebalance=20_000)  # a rebalance
    h.advance(20_000)  # the static member never re-joined
    group = h.core.groups["g"]
    assert static in group.members and dynamic in group.members
    assert h.answer(parked)["generation_id"] == 2 and h.answer(parked)["leader"] == dynamic


def test_a_member_whose_join_completed_expires_after_its_session_timeout_not_five_minutes():
    h = Harness()
    member, ticket = h.join_new("g", session=10_000, rebalance=60_000)
    h.advance(0)
    assert h.answer(ticket)["error_code"] == E.NONE
    h.advance(9_999)
    assert member in h.core.groups["g"].members
    h.advance(1)  # no SyncGroup, no heartbeat: its session is over
    assert member not in h.core.groups["g"].members


def test_an_assignment_written_for_an_older_generation_is_not_applied():
    h = Harness()
    a, ta = h.join_new("g", session=60_000)
    h.advance(0)
    h.settle()
    old_sync = h.sync("g", 1, a, [(a, b"old")])  # its write stays in flight
    h.join_new("g", session=60_000)  # a newcomer: rebalance
    h.join("g", a, session=60_000)  # generation 2 starts
    assert h.core.groups["g"].generation == 2
    h.settle()
    group = h.core.groups["g"]
    assert group.state is S.COMPLETING_REBALANCE and group.members[a].assignment == b""
    assert h.answer(old_sync)["error_code"] == E.REBALANCE_IN_PROGRESS


def test_a_commit_in_flight_does_not_bring_back_an_offset_deleted_meanwhile():
    h = Harness()
    commit = h.commit("g", {("t", 0): (5, "")})  # not yet durable
    deleted = h.delete_offsets("g", [("t", 0)])
    h.settle()
    assert h.answer(commit) == {("t", 0): E.NONE}
    assert h.answer(deleted) == (E.NONE, {("t", 0): E.NONE})
    assert h.core.fetch_offsets("g", None) == (E.NONE, [])
    # The log agrees: the tombstone came after the commit.
    from kcoord.broker.groups.loader import replay
    assert replay(h.durable).offsets == {}


def test_offset_keys_of_version_0_and_1_are_one_key_when_replayed():
    from kcoord.broker.groups.loader import replay
    v1 = G.offset_commit_key("g", "t", 0)
    v0 = b"\x00\x00" + v1[2:]
    assert replay([(v0, G.offset_commit_value(3, "", 1)), (v1, None)]).offsets == {}
    assert replay([(v1, G.offset_commit_value(3, "", 1)),
                   (v0, G.offset_commit_value(4, "", 2))]).offsets["g"][("t", 0)].offset == 4


def test_every_group_api_waits_for_a_loading_partition(h):
    h.core.refusal = loading = E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.answer(h.commit("g", {("t", 0): (1, "")})) == {("t", 0): loading}
    assert h.core.fetch_offsets("g", None) == (loading, [])
    assert h.core.describe("g")["error_code"] == loading
    assert h.leave("g", "m") == (loading, [])
    assert h.answer(h.delete_groups("g")) == {"g": loading}
    assert h.answer(h.delete_offsets("g", [("t", 0)])) == (loading, {})
    assert h.heartbeat("g", 1, "m") == E.NONE
    assert not h.pending


@pytest.mark.parametrize("storage, client", [
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.INVALID_FETCH_SIZE, E.UNKNOWN_SERVER_ERROR),
    (E.CORRUPT_MESSAGE, E.CORRUPT_MESSAGE),
])
def test_a_failed_write_is_reported_with_kafka_s_mapping(h, storage, client):
    ticket = h.commit("g", {("t", 0): (1, "")})
    h.settle(storage)
    assert h.answer(ticket) == {("t", 0): client}


def test_list_groups_says_every_group_is_classic(h):
    h.stable_group("g", 1)
    assert [g["group_type"] for g in h.core.list_groups([], [])] == ["classic"]


def test_delete_groups_with_nothing_to_delete_answers_at_once(h):
    assert h.answer(h.delete_groups("nope")) == {"nope": E.GROUP_ID_NOT_FOUND}


def test_a_group_whose_offsets_were_deleted_can_still_expire():
    h = Harness(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=10_000)
    h.commit("g", {("t", 0): (1, ""), ("t", 1): (2, "")})
    h.settle()
    h.delete_offsets("g", [("t", 0)])
    h.settle()
    h.advance(100_000)
    h.settle()
    assert h.core.fetch_offsets("g", None) == (E.NONE, []) and "g" not in h.core.groups


# -- found in review ----------------------------------------------------------------------------


def test_a_retention_time_beyond_a_java_long_wraps_as_in_kafka():
    h = Harness(offsets_retention_check_interval_ms=10_000)
    ticket = h.commit("g", {("t", 0): (1, "")}, version=2, retention=2**63 - 1)
    h.settle()
    assert h.answer(ticket) == {("t", 0): E.NONE}
    [(_k, _f, value)] = _records(h)
    assert value.expire_timestamp < 0  # now + retention, wrapped
    h.advance(10_000)  # so the next sweep drops it
    assert h.core.fetch_offsets("g", None) == (E.NONE, []) and "g" not in h.core.groups


def test_a_silent_static_member_whose_sync_was_cut_short_still_expires():
    """Its session expiry was ignored while its SyncGroup waited; answering that
    SyncGroup starts its session again, so the group does not stay stuck."""
    h = Harness()
    h.join("g", instance="a", session=10_000, rebalance=60_000)
    h.join("g", instance="b", session=8_000, rebalance=60_000)
    h.advance(0)
    group = h.core.groups["g"]
    follower = next(m for m in group.members if m != group.leader_id)
    parked = h.sync("g", 1, follower, instance="b")
    h.advance(8_000)  # the follower's expiry: ignored, its SyncGroup waits
    assert follower in group.members
    h.advance(2_000)  # the leader never synced: it expires, a rebalance starts
    assert h.answer(parked)["error_code"] == E.REBALANCE_IN_PROGRESS
    h.advance(8_000)  # and the follower, silent since, expires too
    assert group.state is S.EMPTY and not group.members


def test_a_member_removed_while_its_sync_waits_gets_an_answer(h):
    a = h.join("g", instance="a", session=60_000)
    b = h.join("g", instance="b", session=60_000)
    h.advance(0)
    leader = h.answer(a)["leader"]
    follower, instance = ((h.answer(b)["member_id"], "b") if h.answer(a)["member_id"] == leader
                          else (h.answer(a)["member_id"], "a"))
    parked = h.sync("g", 1, follower, instance=instance)
    assert h.leave("g", ("", instance, "removed by an admin")) == (E.NONE, [E.NONE])
    assert h.answer(parked)["error_code"] == E.UNKNOWN_MEMBER_ID


def test_subscriptions_are_those_of_the_current_generation(h):
    """The leader re-joins with fewer topics: until the next generation starts it
    still consumes them, so their offsets stay (ClassicGroup.initNextGeneration)."""
    a, ta = h.join_new("g", protocols=[("range", subscription("t", "u"))])
    b, tb = h.join_new("g", protocols=[("range", subscription("t"))])
    h.advance(0)
    leader = h.answer(ta)["leader"]
    h.sync("g", 1, leader, [(a, b"A"), (b, b"B")])
    h.commit("g", {("u", 0): (1, "")}, generation=1, member=a)
    h.settle()
    h.join("g", a, protocols=[("range", subscription("t"))])  # waits for b to re-join
    assert h.core.groups["g"].state is S.PREPARING_REBALANCE
    assert h.answer(h.delete_offsets("g", [("u", 0)])) == (
        E.NONE, {("u", 0): E.GROUP_SUBSCRIBED_TO_TOPIC})
    h.join("g", b, protocols=[("range", subscription("t"))])  # generation 2: only "t"
    assert h.answer(h.delete_offsets("g", [("u", 0)]))[1] == {("u", 0): E.NONE}


def test_large_deletions_are_written_in_batches_under_the_size_limit(h):
    from kcoord.broker.groups.common import WRITE_CHUNK_BYTES
    partitions = {("gone", p): (1, "") for p in range(30_000)}
    h.commit("g", partitions)
    h.settle()
    h._take(h.core.delete_topic_offsets({"gone"}, h.now))
    assert len(h.pending) > 1
    for write in h.pending:
        assert sum(len(k) + 24 for k, _v in write.records) <= WRITE_CHUNK_BYTES
    h.settle()
    assert h.core.fetch_offsets("g", None) == (E.NONE, [])
    from kcoord.broker.groups.loader import replay
    assert replay(h.durable).offsets == {}


# -- more rules mutation testing asked for -------------------------------------------------------


def test_a_join_phase_no_member_rejoined_waits_again_until_sessions_expire():
    h = Harness()
    static = h.join("g", instance="s", session=30_000, rebalance=10_000)
    h.advance(0)
    s_id = h.answer(static)["member_id"]
    h.sync("g", 1, s_id, [(s_id, b"S")], instance="s")
    h.settle()
    dynamic, parked = h.join_new("g", session=30_000, rebalance=10_000)  # a rebalance
    h.leave("g", dynamic)  # only the static member is left, and it does not re-join
    group = h.core.groups["g"]
    h.advance(10_000)  # the join phase ends with nobody to lead it: it waits again
    assert group.state is S.PREPARING_REBALANCE and group.generation == 1
    assert ("join", "g") in h.core.timers
    h.advance(10_000)
    assert group.state is S.PREPARING_REBALANCE
    h.advance(10_000)  # the static member's session is over: removed, the group empties
    assert group.state is S.EMPTY and group.generation == 2


def test_a_member_waiting_in_a_join_phase_outlives_its_session_timeout():
    h = Harness()
    leader, follower = h.stable_group("g", 2, session=10_000, rebalance=60_000)
    parked = h.join("g", leader, session=10_000, rebalance=60_000)
    for _ in range(3):  # 15 s: more than the leader's session timeout
        h.advance(5_000)
        assert h.heartbeat("g", 1, follower) == E.REBALANCE_IN_PROGRESS
    assert h.answer(parked) is None and leader in h.core.groups["g"].members
    h.join("g", follower, session=10_000, rebalance=60_000)
    assert h.answer(parked)["generation_id"] == 2


def test_an_emptied_group_is_written_without_protocol_or_leader(h):
    leader, = h.stable_group("g", 1)
    h.leave("g", leader)
    h.settle()
    kind, key, value = _records(h)[-1]
    assert (value.generation, value.protocol, value.leader, value.members,
            value.protocol_type) == (2, None, None, [], "consumer")


def test_no_deadline_is_left_behind_by_a_deleted_group(h):
    baseline = len(h.core.timers)  # the periodic offset-expiry sweep
    leader, follower = h.stable_group("g", 2)
    h.join("g")  # a pending member id too
    h.leave("g", leader, follower)
    h.advance(10_000)  # the pending member id expires: the group is Empty
    h.settle()
    assert h.core.groups["g"].state is S.EMPTY
    assert h.answer(h.delete_groups("g")) is None
    h.settle()
    assert len(h.core.timers) == baseline


def test_a_join_error_answer_has_kafka_s_shape(h):
    assert h.answer(h.join("g", "ghost")) == {
        "error_code": E.UNKNOWN_MEMBER_ID, "generation_id": -1, "protocol_type": None,
        "protocol_name": None, "leader": "", "skip_assignment": False,
        "member_id": "ghost", "members": []}


def test_replay_counts_what_it_read_and_skipped():
    from kcoord.broker.groups.loader import replay
    records = [(G.offset_commit_key("g", "t", p), G.offset_commit_value(p, "", 1))
               for p in range(3)]
    records.insert(1, (b"\x00\x0a\x00\x01g\x00\x01m", b"\x00\x00"))  # a share-group record type
    loaded = replay(records)
    assert (loaded.records, loaded.skipped, loaded.unreadable) == (4, 1, 0)
    assert sorted(loaded.offsets["g"]) == [("t", 0), ("t", 1), ("t", 2)]
    assert loaded.groups["g"].group_id == "g"


@pytest.mark.parametrize("metadata, fits", [
    ("😀😀", True), ("😀😀a", False),  # a character beyond U+FFFF is two units
    ("\uffff" * 4, True),  # U+FFFF is one
    ("\U00010000" * 2 + "a", False),  # U+10000 is two
])
def test_commit_metadata_is_measured_in_utf16_units(metadata, fits):
    h = Harness(offset_metadata_max_bytes=4)
    ticket = h.commit("g", {("t", 0): (1, metadata)})
    h.settle()
    assert h.answer(ticket) == {("t", 0): E.NONE if fits else E.OFFSET_METADATA_TOO_LARGE}


def test_a_member_already_waiting_may_join_again_when_the_group_is_full():
    h = Harness(max_group_size=3)
    a, b = h.stable_group("g", 2, session=60_000)
    h.join("g", session=60_000)  # a pending member id: the phase cannot end without it
    h.join("g", a, session=60_000)
    h.join("g", b, session=60_000)
    h.join("g", version=3, session=60_000)  # a third waiting member: full
    again = h.join("g", a, session=60_000)
    assert h.answer(again) is None and a in h.core.groups["g"].members


# -- error branches the sessions above do not reach ------------------------------------------


def _deleting(h) -> tuple[str, object]:
    """Group "g" whose DeleteGroups tombstones are being written (Dead until they
    are durable, as under fsync policy batch or always): the id of its former
    member, and the parked DeleteGroups."""
    leader, = h.stable_group("g", 1)
    h.leave("g", leader)
    h.settle()
    ticket = h.delete_groups("g")
    assert h.answer(ticket) is None and h.core.groups["g"].state is S.DEAD
    return leader, ticket


def test_every_member_request_to_a_group_being_deleted_gets_coordinator_not_available(h):
    former, deletion = _deleting(h)
    new = h.answer(h.join("g"))
    assert (new["error_code"], new["member_id"]) == (E.COORDINATOR_NOT_AVAILABLE, "")
    known = h.answer(h.join("g", former))
    assert (known["error_code"], known["member_id"]) == (E.COORDINATOR_NOT_AVAILABLE, former)
    assert h.answer(h.sync("g", 2, former))["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    assert h.heartbeat("g", 2, former) == E.COORDINATOR_NOT_AVAILABLE
    assert h.leave("g", former) == (E.COORDINATOR_NOT_AVAILABLE, [])
    for kwargs in ({}, {"generation": 2, "member": former}):  # simple consumer, member
        assert h.answer(h.commit("g", {("t", 0): (1, "")}, **kwargs)) == \
            {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert [w.records[-1][1] for w in h.pending] == [None]  # only the deletion's tombstones
    # Once the tombstones are durable the group is gone and a join starts afresh.
    h.settle()
    assert h.answer(deletion) == {"g": E.NONE}
    assert h.answer(h.join("g"))["error_code"] == E.MEMBER_ID_REQUIRED
    assert h.core.groups["g"].state is S.EMPTY and h.core.groups["g"].generation == 0


def test_a_failed_deletion_gives_the_group_back(h):
    former, deletion = _deleting(h)
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert h.answer(deletion) == {"g": E.NOT_COORDINATOR}
    assert h.core.groups["g"].state is S.EMPTY
    assert h.answer(h.join("g"))["error_code"] == E.MEMBER_ID_REQUIRED


def test_a_replaced_static_member_is_fenced_from_sync_leave_and_commit(h):
    old = _static_leader(h)
    h.join("g", instance="i1")  # the restart: i1 now maps to a new member id
    h.settle()
    new = h.core.groups["g"].static_members["i1"]
    assert new != old
    assert h.answer(h.sync("g", 1, old, instance="i1"))["error_code"] == E.FENCED_INSTANCE_ID
    assert h.leave("g", (old, "i1", None)) == (E.NONE, [E.FENCED_INSTANCE_ID])
    assert h.answer(h.commit("g", {("t", 0): (1, "")}, generation=1, member=old,
                             instance="i1")) == {("t", 0): E.FENCED_INSTANCE_ID}
    # A live member claiming another's instance id is fenced as well.
    dynamic, parked = h.join_new("g")
    assert h.core.groups["g"].state is S.PREPARING_REBALANCE
    assert h.answer(h.sync("g", 1, dynamic, instance="i1"))["error_code"] == \
        E.FENCED_INSTANCE_ID
    # None of this disturbed the new member or wrote anything.
    assert h.core.groups["g"].static_members == {"i1": new}
    assert not h.pending
    assert h.heartbeat("g", 1, new, "i1") == E.REBALANCE_IN_PROGRESS


def test_a_known_member_rejoining_with_protocols_the_group_does_not_share_is_refused(h):
    leader, follower = h.stable_group("g", 2)
    refused = h.answer(h.join("g", follower, protocols=[("roundrobin", subscription("t"))]))
    assert (refused["error_code"], refused["member_id"], refused["generation_id"]) == \
        (E.INCONSISTENT_GROUP_PROTOCOL, follower, -1)
    refused = h.answer(h.join("g", follower, protocol_type="connect"))
    assert refused["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    group = h.core.groups["g"]
    assert group.state is S.STABLE and group.generation == 1  # no rebalance
    assert group.members[follower].protocol_names() == ["range"]
    assert h.heartbeat("g", 1, follower) == E.NONE


def test_a_sync_to_an_empty_group_is_an_unknown_member(h):
    leader, = h.stable_group("g", 1)
    h.leave("g", leader)
    assert h.core.groups["g"].state is S.EMPTY
    for generation in (1, 2):  # the old generation and the emptied one
        answer = h.answer(h.sync("g", generation, leader, [(leader, b"A")]))
        assert answer == {"error_code": E.UNKNOWN_MEMBER_ID, "protocol_type": None,
                          "protocol_name": None, "assignment": b""}
    h.settle()
    assert h.core.groups["g"].state is S.EMPTY and not h.pending


def test_a_timer_removing_a_member_completes_the_join_during_the_initial_delay():
    # New coordinator (Kafka 4.x): an expiry during the initial delay completes the join
    # at once when everyone left has joined; a LeaveGroup still waits out the delay.
    h = Harness(initial_rebalance_delay_ms=400_000)
    first, first_join = h.join_new("g", rebalance=600_000)
    h.advance(200_000)
    second, second_join = h.join_new("g", rebalance=600_000)
    h.advance(NEW_MEMBER_JOIN_TIMEOUT_MS - 200_000 - 1)
    assert h.answer(second_join) is None
    # The first member's JoinGroup is still parked, but a new member has five
    # minutes to complete its join: it expires, and the second one has joined.
    h.advance(1)
    assert h.answer(first_join)["error_code"] == E.UNKNOWN_MEMBER_ID
    joined = h.answer(second_join)
    assert (joined["error_code"], joined["generation_id"], joined["leader"]) == \
        (E.NONE, 1, second)
    assert [m["member_id"] for m in joined["members"]] == [second]
    assert h.core.groups["g"].state is S.COMPLETING_REBALANCE


def test_a_pending_member_expiring_during_the_initial_delay_completes_the_join():
    h = Harness(initial_rebalance_delay_ms=10_000)
    member, parked = h.join_new("g")
    pending = h.answer(h.join("g", session=6_000))["member_id"]
    h.advance(5_999)
    assert h.answer(parked) is None
    h.advance(1)  # the pending member id expires: everyone left has joined
    assert pending not in h.core.groups["g"].pending_members
    assert h.answer(parked)["generation_id"] == 1


def test_a_leave_during_the_initial_delay_waits_for_the_delay():
    h = Harness(initial_rebalance_delay_ms=10_000)
    member, parked = h.join_new("g")
    other, gone = h.join_new("g")
    assert h.leave("g", other) == (E.NONE, [E.NONE])
    assert h.answer(gone)["error_code"] == E.UNKNOWN_MEMBER_ID
    # Everyone left has joined, but the delay runs on, extended once for the
    # member that joined during it (10 s + 10 s).
    h.advance(10_000)
    h.advance(9_999)
    assert h.answer(parked) is None
    h.advance(1)
    assert h.answer(parked)["generation_id"] == 1


def test_the_expiry_sweep_deletes_an_empty_group_whose_only_member_id_is_pending():
    # As Kafka's new coordinator (checked in test_differential_group_errors): an
    # Empty group without offsets is deleted at the next sweep even while a
    # member id it handed out is pending; that member's second join finds no group.
    h = Harness(offsets_retention_check_interval_ms=10_000)
    baseline = len(h.core.timers)  # the periodic sweep
    pending = h.answer(h.join("g", session=30_000))["member_id"]
    h.settle()  # the new group's record
    h.advance(10_000)
    assert "g" not in h.core.groups
    assert len(h.core.timers) == baseline  # the pending member's deadline went with it
    h.settle()
    kind, key, value = _records(h)[-1]
    assert (kind, key.group, value) == (G.GROUP_METADATA, "g", None)
    answer = h.answer(h.join("g", pending, session=30_000))
    assert (answer["error_code"], answer["member_id"]) == (E.UNKNOWN_MEMBER_ID, pending)
