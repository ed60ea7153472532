"""The coordinator's log tells a user why a consumer is waiting: one event per
state change and per member join, leave, expiry and removal, each naming the
group, the member, the generation and the reason.  Driven with a manual clock
(no sleeps) and read with structlog's capture."""

from __future__ import annotations

import logging

import pytest

from kcoord.broker.groups.group import GroupState as S
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.group_harness import Harness
from tests.support import captured_logs

MEMBER_EVENTS = {"group.member_id_required", "group.member_joined", "group.member_rejoined",
                 "group.member_expired", "group.member_left", "group.member_removed",
                 "group.pending_member_expired", "group.pending_member_left",
                 "group.static_member_replaced", "group.join_refused",
                 "group.assignment_received"}


@pytest.fixture
def logs():
    """The events logged at info and above (the test suite otherwise logs
    warnings only)."""
    with captured_logs(logging.INFO) as captured:
        yield captured


def _group_events(logs, group="g") -> list[dict]:
    return [e for e in logs if e["event"].startswith("group.") and e.get("group_id") == group]


def _one(logs, event: str, **fields) -> dict:
    found = [e for e in logs if e["event"] == event and
             all(e.get(k) == v for k, v in fields.items())]
    assert len(found) == 1, (event, fields, [e for e in logs if e["event"] == event])
    return found[0]


def _readable(event: dict) -> None:
    """What every event must say: which group, which generation, and why; and
    which member, for an event about one member."""
    assert event["group_id"], event
    assert isinstance(event["generation"], int), event
    assert isinstance(event["reason"], str) and len(event["reason"]) > 10, event
    if event["event"] in MEMBER_EVENTS:
        assert isinstance(event["member_id"], str), event


def test_a_group_s_life_is_told_event_by_event(logs):
    h = Harness(initial_rebalance_delay_ms=3_000)
    a, a_join = h.join_new("g", session=10_000)
    created = _one(logs, "group.created")
    assert created["generation"] == 0 and "JoinGroup" in created["reason"]
    required = _one(logs, "group.member_id_required", member_id=a)
    assert required["generation"] == 0 and "member id" in required["reason"]
    joined = _one(logs, "group.member_joined", member_id=a)
    assert joined["state"] == "Empty" and "rebalance starts" in joined["reason"]
    assert "member of an Empty group" in joined["reason"]
    assert joined["client_reason"] is None  # clients before JoinGroup v8 give none
    started = _one(logs, "group.rebalance_started")
    assert (started["generation"], started["previous_state"]) == (0, "Empty")
    assert a in started["reason"]

    # Why the consumer is waiting: the initial delay.
    h.advance(3_000)
    generation = _one(logs, "group.generation_started", generation=1)
    assert generation["leader"] == a
    assert "group.initial.rebalance.delay.ms (3000 ms) is over" in generation["reason"]
    assert "SyncGroup" in generation["reason"]

    h.settle()
    h.sync("g", 1, a, [(a, b"A")])
    assert _one(logs, "group.assignment_received", generation=1)["member_id"] == a
    h.settle()
    stable = _one(logs, "group.stable", generation=1)
    assert "assignment is durable" in stable["reason"]

    # A second member: the group rebalances, and waits for the first to join again.
    b, b_join = h.join_new("g", session=10_000)
    joined = _one(logs, "group.member_joined", member_id=b)
    assert (joined["generation"], joined["state"]) == (1, "Stable")
    rebalance = [e for e in logs if e["event"] == "group.rebalance_started"][-1]
    assert rebalance["generation"] == 1 and f"new member {b} joined" in rebalance["reason"]
    h.join("g", a, session=10_000)
    rejoined = _one(logs, "group.member_rejoined", member_id=a)
    assert rejoined["generation"] == 1 and "re-joined" in rejoined["reason"]
    assert "every member has joined" in \
        _one(logs, "group.generation_started", generation=2)["reason"]
    h.sync("g", 2, a, [(a, b"A"), (b, b"B")])
    h.sync("g", 2, b)
    h.settle()
    _one(logs, "group.stable", generation=2)

    # b goes silent: its expiry names it and says why.
    h.advance(5_000)
    assert h.heartbeat("g", 2, a) == E.NONE
    h.advance(5_000)
    assert h.heartbeat("g", 2, a) == E.REBALANCE_IN_PROGRESS  # what the user sees
    expired = _one(logs, "group.member_expired", member_id=b)
    assert expired["generation"] == 2
    assert expired["reason"] == "no heartbeat within the session timeout (10000 ms)"
    rebalance = [e for e in logs if e["event"] == "group.rebalance_started"][-1]
    assert f"member {b} expired" in rebalance["reason"]

    # a leaves: the group empties.
    h.leave("g", (a, None, "the consumer is closing"))
    left = _one(logs, "group.member_left", member_id=a)
    assert left["generation"] == 2
    assert left["reason"] == "LeaveGroup: the consumer is closing"
    empty = _one(logs, "group.empty")
    assert empty["generation"] == 3 and "no members left" in empty["reason"]
    # (not that every member has joined: none is left to)
    assert "(no member is left to wait for)" in empty["reason"]

    assert h.core.groups["g"].state is S.EMPTY
    for event in _group_events(logs):
        _readable(event)


def test_a_group_left_by_its_last_member_says_so(logs):
    """The last member of a Stable group leaves: the group empties, and the
    line says who left, not that every member has joined."""
    h = Harness()
    (a,) = h.stable_group("g", 1)
    h.leave("g", a)
    empty = _one(logs, "group.empty", group_id="g")
    _readable(empty)
    assert a in empty["reason"] and "left" in empty["reason"]
    assert "every member has joined" not in empty["reason"]


def test_the_initial_delay_is_said_to_be_extended_only_when_there_is_one(logs):
    """A member joining during the initial delay extends it (Kafka's
    tryCompleteInitialRebalanceElseSchedule): said at info with the delay; with
    the development default of 0 the join phase just ends, and no line claims
    an extension of 0 ms."""
    h = Harness(initial_rebalance_delay_ms=3_000)
    a, _ = h.join_new("g", session=10_000)
    b, _ = h.join_new("g", session=10_000)
    h.advance(3_000)
    extended = _one(logs, "group.initial_delay_extended", group_id="g")
    assert extended["delay_ms"] == 3_000 and "new member joined" in extended["reason"]
    _readable(extended)
    h.advance(3_000)
    assert _one(logs, "group.generation_started", group_id="g")["members"] == 2

    logs.clear()
    h0 = Harness(initial_rebalance_delay_ms=0)
    a, _ = h0.join_new("g0", session=10_000)
    b, _ = h0.join_new("g0", session=10_000)
    h0.advance(0)
    h0.advance(0)
    assert _one(logs, "group.generation_started", group_id="g0")["members"] == 2
    assert not [e for e in logs if e["event"] == "group.initial_delay_extended"]


def test_members_removed_together_get_one_event_each(logs):
    h = Harness()
    leader, f1, f2 = h.stable_group("g", 3, rebalance=20_000, session=30_000)
    h.join("g", leader, rebalance=20_000, session=30_000)  # f1 and f2 never join again
    h.advance(20_000)
    removed = [e for e in logs if e["event"] == "group.member_removed"]
    assert sorted(e["member_id"] for e in removed) == sorted([f1, f2])
    for event in removed:
        _readable(event)
        assert event["generation"] == 1
        assert "did not join again before the join phase ended" in event["reason"]
        assert "rebalance timeout (20000 ms)" in event["reason"]

    # Members that never send their SyncGroup, one event each too.
    logs.clear()
    h2 = Harness()
    a, ta = h2.join_new("h", rebalance=20_000, session=30_000)
    b, tb = h2.join_new("h", rebalance=20_000, session=30_000)
    c, tc = h2.join_new("h", rebalance=20_000, session=30_000)
    h2.advance(0)
    h2.sync("h", 1, a, [(a, b"A"), (b, b"B"), (c, b"C")])
    h2.settle()
    h2.advance(20_000)
    removed = [e for e in logs if e["event"] == "group.member_removed"]
    assert sorted(e["member_id"] for e in removed) == sorted([b, c])
    for event in removed:
        _readable(event)
        assert event["reason"] == "no SyncGroup within the rebalance timeout (20000 ms)"


def test_a_static_replacement_says_who_was_fenced(logs):
    h = Harness()
    first = h.join("g", instance="i1")
    h.advance(0)
    old = h.answer(first)["member_id"]
    h.sync("g", 1, old, [(old, b"A")], instance="i1")
    h.settle()
    h.join("g", instance="i1")
    h.settle()
    new = h.core.groups["g"].static_members["i1"]
    replaced = _one(logs, "group.static_member_replaced")
    _readable(replaced)
    assert (replaced["member_id"], replaced["old_member_id"], replaced["generation"]) == \
        (new, old, 1)
    assert "'i1'" in replaced["reason"] and f"member {old} is fenced" in replaced["reason"]


def test_a_join_refused_by_group_max_size_is_logged(logs):
    h = Harness(max_group_size=2)
    h.stable_group("g", 2)
    refused_answer = h.answer(h.join("g", version=3, client="late-app"))
    assert refused_answer["error_code"] == E.GROUP_MAX_SIZE_REACHED
    refused = _one(logs, "group.join_refused")
    _readable(refused)
    assert (refused["member_id"], refused["client_id"], refused["generation"]) == \
        ("", "late-app", 1)
    assert refused["reason"] == "group.max.size (2) reached"


def test_a_member_dropped_by_group_max_size_is_logged(logs):
    # Three members rejoin one by one while the group, now limited to two,
    # rebalances: the third is dropped (as in Kafka when group.max.size shrank).
    h = Harness(max_group_size=3)
    a, b, c = h.stable_group("g", 3)
    h.core.config.max_group_size = 2
    h.join("g", a)
    h.join("g", b)
    dropped = h.answer(h.join("g", c))
    assert dropped["error_code"] == E.GROUP_MAX_SIZE_REACHED
    removed = _one(logs, "group.member_removed", member_id=c)
    _readable(removed)
    assert removed["reason"] == "group.max.size (2) reached" and removed["generation"] == 1


def test_pending_members_leaving_and_expiring_are_logged(logs):
    h = Harness()
    leader, = h.stable_group("g", 1)
    gone = h.answer(h.join("g", session=7_000))["member_id"]
    h.leave("g", (gone, None, "changed my mind"))
    left = _one(logs, "group.pending_member_left", member_id=gone)
    _readable(left)
    assert left["client_reason"] == "changed my mind"
    silent = h.answer(h.join("g", session=7_000))["member_id"]
    h.advance(7_000)
    expired = _one(logs, "group.pending_member_expired", member_id=silent)
    _readable(expired)
    assert "session timeout" in expired["reason"]


def test_expired_offsets_and_the_deleted_group_say_why(logs):
    h = Harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    leader, = h.stable_group("g", 1)
    h.commit("g", {("t", 0): (1, "")}, generation=1, member=leader)
    h.settle()
    h.leave("g", leader)
    h.settle()
    h.advance(70_000)
    expired = _one(logs, "group.offsets_expired")
    _readable(expired)
    assert expired["partitions"] == 1
    assert "Empty longer than offsets.retention.minutes (60000 ms)" in expired["reason"]
    deleted = _one(logs, "group.deleted")
    _readable(deleted)
    assert "offsets expired" in deleted["reason"]
    assert "g" not in h.core.groups


def _assignment(partitions: dict) -> bytes:
    from kcoord.protocol.group_records import CONSUMER_PROTOCOL_ASSIGNMENT, _encode
    return _encode(CONSUMER_PROTOCOL_ASSIGNMENT, 0, {
        "assigned_partitions": [{"topic": t, "partitions": p} for t, p in partitions.items()],
        "user_data": None})


def test_a_stable_group_s_log_line_says_who_owns_what(logs):
    h = Harness()
    a, _ = h.join_new("g", session=10_000)
    h.advance(0)
    h.settle()
    b, _ = h.join_new("g", session=10_000)
    h.join("g", a, session=10_000)
    h.settle()
    h.sync("g", 2, a, [(a, _assignment({"orders": [0, 2], "audit": [0]})),
                       (b, _assignment({"orders": [1]})), ])
    h.sync("g", 2, b)
    h.settle()
    stable = _one(logs, "group.stable", generation=2)
    assert stable["assignment"] == {a: {"orders": [0, 2], "audit": [0]}, b: {"orders": [1]}}


def test_an_assignment_not_in_the_consumer_protocol_is_told_by_its_size(logs):
    h = Harness()
    a, _ = h.join_new("g", session=10_000)
    h.advance(0)
    h.settle()
    h.sync("g", 1, a, [(a, b"\xff\xff\xff")])
    h.settle()
    assert _one(logs, "group.stable", generation=1)["assignment"] == \
        {a: "3 bytes, not the consumer protocol's"}


def test_a_large_group_s_assignment_is_counted_not_listed(logs):
    from kcoord.broker.groups.membership import LOGGED_ASSIGNMENTS
    h = Harness(initial_rebalance_delay_ms=100)
    members = [h.join_new("g", session=30_000)[0] for _ in range(LOGGED_ASSIGNMENTS + 1)]
    h.advance(100)  # each new member extended the initial delay: once more
    h.advance(100)
    h.settle()
    h.sync("g", 1, members[0], [(m, _assignment({"t": [i]})) for i, m in enumerate(members)])
    for m in members[1:]:
        h.sync("g", 1, m)
    h.settle()
    stable = _one(logs, "group.stable", generation=1)
    assert "assignment" not in stable
    assert stable["assignment_omitted"].startswith(f"{LOGGED_ASSIGNMENTS + 1} members")


def test_a_stop_answers_parked_joins_at_once_and_says_so():
    """Under Kafka's defaults a new group's first join is held 3 s
    (group.initial.rebalance.delay.ms): a broker stopping meanwhile answers it
    NOT_COORDINATOR at once, as Kafka's unload does, and its log says why the
    stop did not wait for it."""
    import threading
    import time

    from kcoord.broker.embedded import EmbeddedBroker
    from kcoord.protocol.client import WireClient

    answers = []
    with captured_logs(logging.INFO) as captured:
        broker = EmbeddedBroker(kafka_defaults=True).start()
        try:
            client = WireClient.to(broker.bootstrap, timeout=30)

            def join():
                answers.append(client.call(11, 5, {
                    "group_id": "held", "session_timeout_ms": 10000,
                    "rebalance_timeout_ms": 60000, "member_id": "",
                    "group_instance_id": "static-1", "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}]}))
            joining = threading.Thread(target=join)
            joining.start()
            deadline = time.monotonic() + 10
            while not any(e["event"] == "group.member_joined" for e in captured):
                assert time.monotonic() < deadline, "the join never arrived"
                time.sleep(0.01)
        finally:
            broker.stop()
        joining.join(10)
        client.close()
    # answered by the stop, not by the end of the delay (which would join it)
    assert answers[0]["error_code"] == E.NOT_COORDINATOR
    _one(captured, "broker.stop_answered_parked", requests=1, error="NOT_COORDINATOR")
