"""Online migration between the classic and the consumer group protocols
(KIP-848, ``group.consumer.migration.policy=bidirectional``) on the raw wire,
against kcoord and Apache Kafka 4.4 at once, answers compared field by field:
a consumer-protocol member joins a running classic group (the group becomes
a consumer group), its classic members rejoin through JoinGroup, SyncGroup
and Heartbeat and give up partitions before the newcomer gets them, commit
with their generation, and once the consumer-protocol member leaves the
group is a classic group again."""

from __future__ import annotations

import itertools
import struct
import time

from kcoord.protocol import group_records as G
from tests.reference.group_script import GroupScript
from tests.reference.test_differential_consumer_groups import _coordinators_know
from tests.reference.test_differential_groups import commit, heartbeat, join, sync

_names = itertools.count()
REBALANCE_IN_PROGRESS = 27

def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def subscription(topic: str, owned: list[int] = ()) -> bytes:
    """A ConsumerProtocolSubscription v1 (what a cooperative consumer sends)."""
    out = struct.pack(">hi", 1, 1) + _string(topic) + struct.pack(">i", -1)
    if not owned:
        return out + struct.pack(">i", 0)
    return out + struct.pack(">i", 1) + _string(topic) + struct.pack(
        f">i{len(owned)}i", len(owned), *owned)


def assignment(topic: str, partitions: list[int]) -> bytes:
    return G.consumer_assignment_bytes([(topic, partitions)], 1)


def assigned(answer: dict) -> list[int]:
    if not answer["assignment"]:
        return []
    return sorted(p for t in G.consumer_assignment(answer["assignment"])["assigned_partitions"]
                  for p in t["partitions"])


def classic_join(group, topic, member="", owned=()):
    return join(group, member, protocols=[{"name": "range",
                                           "metadata": subscription(topic, list(owned))}])


def hb(group, member, epoch, topic=None, owned=None):
    def body(side):
        return {"group_id": group, "member_id": member, "member_epoch": epoch,
                "instance_id": None, "rack_id": None,
                "rebalance_timeout_ms": 60_000 if epoch == 0 else -1,
                "subscribed_topic_names": [topic] if epoch == 0 else None,
                "subscribed_topic_regex": None, "server_assignor": None,
                "topic_partitions": None if owned is None else
                ([{"topic_id": side.topic_ids[topic], "partitions": owned}] if owned else [])}
    return body


def describe_consumer(s: GroupScript, group: str) -> dict:
    return s.call("x", 69, 1, {"group_ids": [group], "include_authorized_operations": False})


def describe_classic(s: GroupScript, group: str) -> dict:
    return s.call("x", 15, 5, {"groups": [group], "include_authorized_operations": False})


def _classic_group_of_two(s: GroupScript, group: str, topic: str) -> int:
    """Members <member-0> (partitions 0-2) and <member-1> (3-5), Stable.  Three
    each, so that a third member's share comes from both whatever order a broker
    keeps its members in (Kafka's is the hash order of random member ids)."""
    first = s.call("a", 11, 9, classic_join(group, topic))
    assert first["member_id"] == "<member-0>"
    joined = s.call("a", 11, 9, classic_join(group, topic, "<member-0>"))
    s.call("a", 14, 5, sync(group, joined["generation_id"], "<member-0>",
                            [("<member-0>", assignment(topic, list(range(6))))]))
    assert s.call("b", 11, 9, classic_join(group, topic))["member_id"] == "<member-1>"
    s.send("b", 11, 9, classic_join(group, topic, "<member-1>"))
    s.wait_state(group, "PreparingRebalance")
    s.call("a", 12, 4, heartbeat(group, 1, "<member-0>"))  # REBALANCE_IN_PROGRESS
    leader = s.call("a", 11, 9, classic_join(group, topic, "<member-0>", list(range(6))))
    generation = leader["generation_id"]
    assert s.receive("b")["generation_id"] == generation == 2
    s.send("b", 14, 5, sync(group, generation, "<member-1>"))
    time.sleep(0.2)
    s.call("a", 14, 5, sync(group, generation, "<member-0>",
                            [("<member-0>", assignment(topic, [0, 1, 2])),
                             ("<member-1>", assignment(topic, [3, 4, 5]))]))
    assert assigned(s.receive("b")) == [3, 4, 5]
    return generation


def test_a_running_classic_group_is_upgraded_and_downgraded_as_on_kafka(diff):
    d = diff("main")
    n = next(_names)
    group, topic = f"mig-g{n}", f"mig-t{n}"
    d.create_topics(topic, partitions=6)
    d.same(3, 12, {"topics": [{"topic_id": None, "name": topic}],
                   "allow_auto_topic_creation": False,
                   "include_topic_authorized_operations": False})
    _coordinators_know(d, topic)
    with GroupScript(d) as s:
        s.ready(group)
        generation = _classic_group_of_two(s, group, topic)
        s.call("a", 8, 9, commit(group, {(topic, 0): (5, "a")}, generation, "<member-0>"))

        # a consumer-protocol member joins: the group becomes a consumer group
        c = s.call("c", 68, 1, hb(group, "member-c", 0, topic, []))
        assert c["error_code"] == 0 and c["member_epoch"] == generation + 1
        describe_consumer(s, group)
        describe_classic(s, group)  # DescribeGroups knows no consumer group: Dead
        s.call("x", 15, 6, {"groups": [group], "include_authorized_operations": False})
        # the classic members learn of it through their heartbeats
        assert s.call("a", 12, 4, heartbeat(group, generation, "<member-0>"))[
            "error_code"] == REBALANCE_IN_PROGRESS
        s.call("a", 12, 4, heartbeat(group, generation + 5, "<member-0>"))  # ILLEGAL_GENERATION
        s.call("a", 12, 4, heartbeat(group, generation, "nobody"))  # UNKNOWN_MEMBER_ID
        s.call("c", 12, 4, heartbeat(group, c["member_epoch"], "member-c"))  # not classic
        # the commit of a classic member is checked against its epoch
        s.call("a", 8, 9, commit(group, {(topic, 0): (6, "a")}, generation, "<member-0>"))
        s.call("a", 8, 9, commit(group, {(topic, 0): (6, "a")}, generation + 1, "<member-0>"))
        s.call("a", 8, 5, commit(group, {(topic, 1): (6, "a")}, generation, "<member-0>"))

        # member a rejoins owning 0-2; it keeps what it may keep
        a = s.call("a", 11, 9, classic_join(group, topic, "<member-0>", [0, 1, 2]))
        assert a["error_code"] == 0 and a["leader"] == "" and a["members"] == []
        s.call("a", 14, 5, sync(group, a["generation_id"], "<member-0>", protocol_name="roundrobin"))
        a_sync = s.call("a", 14, 5, sync(group, a["generation_id"], "<member-0>"))
        describe_consumer(s, group)
        if a_sync["error_code"] == 0 and assigned(a_sync) != [0, 1, 2]:
            # it revoked what it lost: it joins again owning only what it kept
            a = s.call("a", 11, 9, classic_join(group, topic, "<member-0>", assigned(a_sync)))
            a_sync = s.call("a", 14, 5, sync(group, a["generation_id"], "<member-0>"))
        b_hb = s.call("b", 12, 4, heartbeat(group, generation, "<member-1>"))
        assert b_hb["error_code"] == REBALANCE_IN_PROGRESS
        b = s.call("b", 11, 9, classic_join(group, topic, "<member-1>", [3, 4, 5]))
        b_sync = s.call("b", 14, 5, sync(group, b["generation_id"], "<member-1>"))
        if assigned(b_sync) != [3, 4, 5]:
            b = s.call("b", 11, 9, classic_join(group, topic, "<member-1>", assigned(b_sync)))
            b_sync = s.call("b", 14, 5, sync(group, b["generation_id"], "<member-1>"))
        c2 = s.call("c", 68, 1, hb(group, "member-c", c["member_epoch"], topic, []))
        describe_consumer(s, group)
        held = assigned(a_sync) + assigned(b_sync) + sorted(
            p for t in (c2["assignment"] or {}).get("topic_partitions", []) for p in t["partitions"])
        assert len(held) == len(set(held))  # never a partition owned twice

        # a classic member with protocols the group does not share is refused
        s.call("d", 11, 9, join(group, "", protocols=[{"name": "other",
                                                         "metadata": subscription(topic)}]))
        # the consumer-protocol member leaves: a classic group again, rebalancing
        s.call("c", 68, 1, hb(group, "member-c", -1))
        s.wait_state(group, "PreparingRebalance")
        describe_classic(s, group)
        s.call("c", 69, 1, {"group_ids": [group], "include_authorized_operations": False})
        s.call("a", 12, 4, heartbeat(group, a["generation_id"], "<member-0>"))
        s.send("a", 11, 9, classic_join(group, topic, "<member-0>", assigned(a_sync)))
        time.sleep(0.2)
        # which member leads is the broker's own (Kafka's: the hash order of random
        # member ids): each side's two answers are compared leader-agnostic
        b_answers = s.both("b", 11, 9, classic_join(group, topic, "<member-1>",
                                                    assigned(b_sync)))
        a_answers = [s.actors[i].from_wire(s.actors[i].conn("a").receive(11, 9))
                     for i in (0, 1)]
        s._pending.pop("a")
        shapes = []
        for a_again, b_again in zip(a_answers, b_answers):
            leader = a_again if a_again["members"] else b_again
            follower = b_again if leader is a_again else a_again
            assert a_again["error_code"] == b_again["error_code"] == 0
            assert a_again["generation_id"] == b_again["generation_id"]
            assert {m["member_id"] for m in leader["members"]} == {"<member-0>",
                                                                  "<member-1>"}
            assert follower["members"] == [] and follower["leader"] == leader["member_id"]
            shapes.append((a_again["generation_id"], a_again["protocol_name"],
                           a_again["protocol_type"]))
        assert shapes[0] == shapes[1], shapes
        s.call("a", 9, 7, {"group_id": group, "require_stable": False, "topics": None})
