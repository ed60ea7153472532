"""Partition assignors of the real clients against kcoord: range and roundrobin
(eager: a rebalance takes every partition back first), and cooperative-sticky
with the clients that have it (confluent-kafka, kafka-python; aiokafka has
none), where a member that joins takes partitions from the others without the
partitions they keep ever being revoked.

kcoord only picks the protocol every member supports and passes subscriptions
and assignments through byte for byte; these tests check that what the clients'
assignors compute from them reaches every member intact."""

from __future__ import annotations

import pytest

from tests.integration.members import (CLIENTS, PARTITIONS, make_topic, owned_once,
                                       until)

# What each eager assignor gives three members of one six-partition topic
# (members ordered by member id, which the test cannot know: compared as sets).
LAYOUTS = {"range": {frozenset({0, 1}), frozenset({2, 3}), frozenset({4, 5})},
           "roundrobin": {frozenset({0, 3}), frozenset({1, 4}), frozenset({2, 5})}}


def _describe(bootstrap: str, group: str):
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(10)


def _settle(members, per_member: int, what: str, eager: bool = False) -> None:
    """Every partition owned once and ``per_member`` each; under an eager
    protocol also each member's last callback an assignment: a kafka-python
    leader sometimes re-joins right after its first assignment (its metadata
    snapshot changed), and in that rebalance it has revoked its partitions
    while still listing them as its own.  (A cooperative member's last callback
    may rightly be a revocation: it is told of no empty assignment.)"""
    until(lambda: owned_once(members) and all(len(m.assignment) == per_member for m in members)
          and (not eager or all(m.events and m.events[-1][0] == "assigned" for m in members)),
          60, lambda: f"{what}: {[sorted(m.assignment) for m in members]}, last events "
                      f"{[m.events[-1:] for m in members]}, errors "
                      f"{[m.error for m in members if m.error]}")


@pytest.mark.parametrize("client,assignor", [
    ("confluent-kafka", "range"), ("confluent-kafka", "roundrobin"),
    ("kafka-python", "roundrobin"), ("aiokafka", "roundrobin")])
def test_eager_assignors_lay_partitions_out_as_the_assignor_says(make_broker, client, assignor):
    """Two members, then a third joins: each ends with the two partitions its
    assignor gives it, and the first two gave back everything they held first."""
    node = make_broker()
    topic, group = f"eager-{assignor}", f"group-eager-{client}-{assignor}"
    make_topic(node.bootstrap, topic)
    member = CLIENTS[client]
    # kafka-python: heartbeats often and polls for longer than a JoinGroup waits
    # for the others (see KafkaPythonMember.run)
    settings = {"assignors": assignor}
    if client == "kafka-python":
        settings.update(heartbeat=500, poll_ms=3000)
    members = [member(node.bootstrap, group, topic, **settings).start() for _ in range(2)]
    try:
        _settle(members, 3, "two members with three partitions each", eager=True)
        before = [frozenset(m.assignment) for m in members]
        marks = [len(m.events) for m in members]
        members.append(member(node.bootstrap, group, topic, **settings).start())
        _settle(members, 2, "three members with two partitions each", eager=True)
        assert {frozenset(m.assignment) for m in members} == LAYOUTS[assignor]
        for m, held, mark in zip(members, before, marks):
            # The first revocation after the third member came gives back all it
            # held (kafka-python's leader may re-join once more afterwards).
            revoked = next(p for kind, p in m.events[mark:] if kind == "revoked")
            assert revoked == held, f"an eager rebalance revokes all of {sorted(held)}"
        description = _describe(node.bootstrap, group)
        assert description.partition_assignor == assignor
        assert str(description.state) == "ConsumerGroupState.STABLE"
    finally:
        for m in members:
            m.stop()
    assert all(m.error is None for m in members)


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_cooperative_sticky_moves_only_what_the_new_member_takes(make_broker, client):
    """A third member joins two that share six partitions: the first two each
    give up exactly the partitions that move (their callbacks are told of
    those and nothing else), keep the rest throughout, gain nothing, and in
    the end every partition has exactly one owner."""
    node = make_broker()
    topic, group = f"coop-{client}", f"group-coop-{client}"
    make_topic(node.bootstrap, topic)
    member = CLIENTS[client]
    settings = {"assignors": "cooperative-sticky", "heartbeat": 500}
    members = [member(node.bootstrap, group, topic, **settings).start() for _ in range(2)]
    try:
        _settle(members, 3, "two members with three partitions each")
        before = [frozenset(m.assignment) for m in members]
        marks = [len(m.events) for m in members]
        late = member(node.bootstrap, group, topic, **settings).start()
        members.append(late)
        _settle(members, 2, "three members with two partitions each")
        for m, held, mark in zip(members, before, marks):
            after = frozenset(m.assignment)
            events = m.events[mark:]
            revoked = [p for kind, p in events if kind == "revoked" and p]
            gained = frozenset().union(*(p for kind, p in events if kind == "assigned"))
            assert after < held  # sticky: what stays is what it had
            assert revoked, "the moved partition was revoked"
            # Incremental: only the partition that moved was ever revoked.
            assert frozenset().union(*revoked) == held - after, events
            assert not gained, events
        # The newcomer is only ever given partitions, once their owner let them go.
        assert not [p for kind, p in late.events if kind == "revoked" and p], late.events
        assert frozenset().union(*(p for _kind, p in late.events)) == late.assignment
        assert sorted(p for m in members for p in m.assignment) == list(range(PARTITIONS))
        description = _describe(node.bootstrap, group)
        assert description.partition_assignor == "cooperative-sticky"
        assert len(description.members) == 3
    finally:
        for m in members:
            m.stop()
    assert all(m.error is None for m in members)
