"""One JoinGroup listing 10,000 protocols (about 240 KB) stalled every
connection for 0.9-1.7 s, 50,000 (1.2 MB) for 19-26 s, and expired other
groups' members meanwhile: the protocol vote looked each member's choice up in
a list inside the sort key (quadratic in the protocols), and every join asked
whether all members had joined by walking the members (quadratic over a
rebalance).  Both are now linear: the vote ranks the candidates in a dict, and
the group counts its parked joins as they park and leave, as Kafka's
ClassicGroup does.  These tests count the work (names compared, members
visited) instead of timing it; ``make bench`` reports another client's worst
wait during a JoinGroup of 50,000 protocols."""

from __future__ import annotations

from kcoord.broker.groups.group import Group
from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.group_harness import Harness, subscription


class CountingName(str):
    """A protocol name that counts how often it is compared with another."""

    compared = 0

    def __eq__(self, other):
        CountingName.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class CountingMembers(dict):
    """A group's member table that counts the members its walks visit."""

    visited = 0

    def values(self):
        CountingMembers.visited += len(self)
        return super().values()


def test_the_protocol_vote_compares_each_name_a_bounded_number_of_times():
    h = Harness()
    names = [CountingName(f"p{i}") for i in range(20_000)]
    protocols = [(name, b"") for name in names]
    first, _ = h.join_new("g", protocols=protocols)
    # A second member prefers the protocols the other way round: the leader's
    # preference breaks the tie of one vote each.
    second, _ = h.join_new("g", protocols=list(reversed(protocols)))
    CountingName.compared = 0
    h.advance(0)
    group = h.core.groups["g"]
    assert group.state.value == "CompletingRebalance"
    assert group.protocol_name == "p0"
    # Quadratic was about 200 million comparisons here.
    assert CountingName.compared <= 4 * len(names)


def test_a_rebalance_of_many_members_visits_each_member_a_bounded_number_of_times():
    h = Harness()
    leader = h.stable_group("g", members=1)[0]
    group = h.core.groups["g"]
    group.members = CountingMembers(group.members)
    joining = 1500
    CountingMembers.visited = 0
    tickets = [h.join_new("g")[1] for _ in range(joining)]  # each asks: has everyone joined?
    assert group.state.value == "PreparingRebalance"
    tickets.append(h.join("g", leader))  # the last one: the join phase completes
    assert [h.answer(t)["generation_id"] for t in tickets] == [2] * (joining + 1)
    # Quadratic was about 1.1 million member visits for this rebalance.
    assert CountingMembers.visited <= 20 * (joining + 1)


def test_the_joined_count_follows_every_way_a_join_ends():
    """The count of parked joins stays equal to the members that have one: a
    member leaving while parked, a static member replaced while parked, the
    join phase completing, a member expiring."""
    h = Harness()
    leader = h.stable_group("g", members=2)[0]
    group: Group = h.core.groups["g"]

    def parked() -> int:
        return sum(1 for m in group.members.values() if m.awaiting_join is not None)

    h.join("g", leader)
    assert group.awaiting_join_count() == parked() == 1
    h.leave("g", leader)
    assert group.awaiting_join_count() == parked() == 0
    static = h.join("g", instance="inst")
    assert group.awaiting_join_count() == parked() == 1
    h.join("g", instance="inst")  # the same instance restarts: the first one is fenced
    assert h.answer(static)["error_code"] == E.FENCED_INSTANCE_ID
    assert group.awaiting_join_count() == parked() == 1
    h.advance(30_000)  # the rebalance timeout: the silent member is removed
    assert group.state.value == "CompletingRebalance"
    assert group.awaiting_join_count() == parked() == 0
    assert group.has_all_members_joined() is False


def test_a_join_of_50000_protocols_is_answered_with_the_vote(broker):
    protocols = [{"name": f"assignor-{i}", "metadata": subscription("t")}
                 for i in range(50_000)]
    body = {"group_id": "many-protocols", "session_timeout_ms": 10_000,
            "rebalance_timeout_ms": 10_000, "member_id": "", "group_instance_id": "static-1",
            "protocol_type": "consumer", "protocols": protocols, "reason": None}
    with WireClient("127.0.0.1", broker.port) as client:
        joined = client.call(11, 7, body)
        assert joined["error_code"] == E.NONE
        assert joined["protocol_name"] == "assignor-0"
        assert [m["member_id"] for m in joined["members"]] == [joined["member_id"]]
        assert joined["members"][0]["metadata"] == subscription("t")
        assert client.call(18, 0, {})["error_code"] == E.NONE
