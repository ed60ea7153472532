"""Error branches of the classic group APIs that the sessions of
``test_differential_groups`` do not reach, scripted on the raw wire against
kcoord and Apache Kafka 4.x and compared field by field: a replaced static
member fenced from SyncGroup, LeaveGroup and OffsetCommit; a known member
re-joining with protocols the group does not share; SyncGroup to an Empty
group; and requests to a group after its deletion.

Not reachable from a script: a group in the Dead state.  kcoord keeps a group
Dead while its DeleteGroups tombstones are being written, which a client sees
only while an fsync is held (the core tests build that state); Kafka answers
DeleteGroups once its tombstones are committed, so a script sees the group
already gone."""

from __future__ import annotations

import itertools

import pytest

from kcoord.broker.groups.placement import coordinator_partition

from tests.reference.fixtures import create_offsets_topic, own_pair
from tests.reference.group_script import GroupScript
from tests.reference.test_differential_groups import (  # noqa: F401 (diff is a fixture)
    SUB, _group, _joined, _topic, commit, diff, heartbeat, join, sync)

FENCED_INSTANCE_ID = 82
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions of both brokers


def _leave(group: str, *members: tuple[str, str | None]) -> dict:
    return {"group_id": group, "members": [
        {"member_id": m, "group_instance_id": i, "reason": None} for m, i in members]}


def test_a_replaced_static_member_is_fenced_from_sync_leave_and_commit(diff):
    group, topic = _group(), _topic(diff)
    with GroupScript(diff) as s:
        s.call("a", 11, 9, join(group, instance="inst-1"))
        s.call("a", 14, 5, sync(group, 1, "<member-0>", [("<member-0>", b"A")],
                                instance="inst-1"))
        restarted = s.call("b", 11, 9, join(group, instance="inst-1"))
        assert restarted["member_id"] == "<member-1>"
        fenced = s.call("a", 14, 5, sync(group, 1, "<member-0>", instance="inst-1"))
        assert fenced["error_code"] == FENCED_INSTANCE_ID
        s.call("a", 14, 3, sync(group, 1, "<member-0>", instance="inst-1"))
        left = s.call("a", 13, 5, _leave(group, ("<member-0>", "inst-1")))
        assert left["members"][0]["error_code"] == FENCED_INSTANCE_ID
        s.call("a", 13, 3, _leave(group, ("<member-0>", "inst-1"), ("<member-1>", "inst-2")))
        committed = s.call("a", 8, 9, commit(group, {(topic, 0): (5, "")}, 1, "<member-0>",
                                             "inst-1"))
        assert committed["topics"][0]["partitions"][0]["error_code"] == FENCED_INSTANCE_ID
        s.call("a", 8, 7, commit(group, {(topic, 0): (5, "")}, 1, "<member-0>", "inst-1"))
        # The new instance is not disturbed by any of this.
        s.call("b", 14, 5, sync(group, 1, "<member-1>", instance="inst-1"))
        s.call("b", 12, 4, heartbeat(group, 1, "<member-1>", "inst-1"))
        s.call("b", 15, 5, {"groups": [group], "include_authorized_operations": False})


def test_a_known_member_rejoining_with_protocols_the_group_does_not_share(diff):
    group = _group()
    with GroupScript(diff) as s:
        _joined(s, "a", group)
        s.call("a", 14, 5, sync(group, 1, "<member-0>", [("<member-0>", b"A")]))
        other = s.call("a", 11, 9, join(group, "<member-0>",
                                         protocols=[{"name": "roundrobin", "metadata": SUB}]))
        assert (other["error_code"], other["member_id"]) == \
            (INCONSISTENT_GROUP_PROTOCOL, "<member-0>")
        s.call("a", 11, 9, join(group, "<member-0>", protocol_type="connect"))
        s.call("a", 11, 5, join(group, "<member-0>", protocols=[]))
        s.call("a", 12, 4, heartbeat(group, 1, "<member-0>"))  # still Stable, generation 1
        s.call("a", 15, 5, {"groups": [group], "include_authorized_operations": False})


def test_a_sync_to_an_empty_group(diff):
    group = _group()
    with GroupScript(diff) as s:
        _joined(s, "a", group)
        s.call("a", 14, 5, sync(group, 1, "<member-0>", [("<member-0>", b"A")]))
        s.call("a", 13, 5, _leave(group, ("<member-0>", None)))
        for generation in (1, 2):
            answer = s.call("a", 14, 5, sync(group, generation, "<member-0>",
                                             [("<member-0>", b"A")]))
            assert answer["error_code"] == UNKNOWN_MEMBER_ID
        s.call("a", 14, 0, sync(group, 2, "<member-0>"))
        s.call("a", 15, 5, {"groups": [group], "include_authorized_operations": False})


def test_a_deleted_group_is_gone_for_every_request(diff):
    group, topic = _group(), _topic(diff)
    with GroupScript(diff) as s:
        _joined(s, "a", group)
        s.call("a", 14, 5, sync(group, 1, "<member-0>", [("<member-0>", b"A")]))
        s.call("a", 8, 9, commit(group, {(topic, 0): (3, "")}, 1, "<member-0>"))
        s.call("a", 13, 5, _leave(group, ("<member-0>", None)))
        assert s.call("a", 42, 2, {"groups_names": [group]})["results"][0]["error_code"] == 0
        s.call("a", 11, 9, join(group, "<member-0>"))
        s.call("a", 14, 5, sync(group, 2, "<member-0>"))
        s.call("a", 12, 4, heartbeat(group, 2, "<member-0>"))
        s.call("a", 13, 5, _leave(group, ("<member-0>", None)))
        s.call("a", 8, 9, commit(group, {(topic, 0): (4, "")}, 2, "<member-0>"))
        s.call("a", 9, 7, {"group_id": group, "require_stable": True, "topics": None})
        # A new member starts the group afresh.
        again = _joined(s, "b", group)
        assert again["generation_id"] == 1


# -- the offset-expiry sweep and a pending member id --------------------------------------------

def _neighbour(group: str) -> str:
    """Another group id whose offsets live in the same ``__consumer_offsets`` partition."""
    home = coordinator_partition(group, OFFSETS_PARTITIONS)
    for i in itertools.count():
        name = f"{group}-n{i}"
        if coordinator_partition(name, OFFSETS_PARTITIONS) == home:
            return name


SWEEP_MS = 500  # offsets.retention.check.interval.ms of the pair below


@pytest.fixture(scope="module")
def sweeping(tmp_path_factory):
    """kcoord and Kafka 4.x whose offset-expiry sweep runs every half second."""
    overrides = {"offsets.retention.check.interval.ms": SWEEP_MS}
    with own_pair(tmp_path_factory.mktemp("kcoord-sweep"), overrides) as pair:
        create_offsets_topic(pair.kafka)
        yield pair


def test_the_sweep_deletes_an_empty_group_whose_only_member_id_is_pending(sweeping):
    # Kafka's new coordinator (GroupCoordinatorShard.cleanupGroupMetadata) deletes
    # an Empty classic group without offsets at the next sweep, whatever member
    # ids it has handed out; the member's second JoinGroup then finds no group.
    group, topic = _group(), _topic(sweeping)
    neighbour = _neighbour(group)
    with GroupScript(sweeping) as s:
        s.ready(group, neighbour)
        first = s.call("a", 11, 9, join(group))
        assert first["error_code"] == 79 and first["member_id"] == "<member-0>"
        # Kafka's DescribeGroups reads the state as of the last committed write of
        # the partition, and a JoinGroup that only hands out a member id writes
        # nothing: until the next write there, Kafka shows this group as Dead
        # although it exists.  A commit by another group of the same partition,
        # once acknowledged, makes Dead mean deleted on both brokers.
        s.call("a", 8, 9, commit(neighbour, {(topic, 0): (1, "")}))
        s.wait_state(group, "Dead", timeout=30)  # DescribeGroups of a missing group
        second = s.call("a", 11, 9, join(group, "<member-0>"))
        assert second["error_code"] == UNKNOWN_MEMBER_ID
        assert s.call("b", 11, 9, join(group))["error_code"] == 79  # a new member starts over
