"""The consumer group protocol (KIP-848) on the raw wire, against kcoord and
Apache Kafka 4.4 at once, answers compared field by field: members joining,
reconciling through revocation, leaving; static members; every error branch
a script can reach; ConsumerGroupDescribe, ListGroups, DescribeGroups and the
offset calls with member epochs.

Member ids are chosen by the client (v1), so both brokers see the same ones;
topic ids differ and are compared by label (``<topic-id-0>``), and the owned
partitions a member reports carry each broker's own ids.
"""

from __future__ import annotations

import itertools
import time
import uuid

import pytest

from kcoord.protocol.client import WireClient
from kcoord.protocol.wire import ZERO_UUID
from tests.reference.differential import Differential, differences

_names = itertools.count()

FENCED_MEMBER_EPOCH = 110
UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42


@pytest.fixture
def d(reference_pair) -> Differential:
    kcoord, ref = reference_pair("main")
    return Differential(kcoord.bootstrap, ref.bootstrap, f"Kafka {ref.version}")


def _setup(d: Differential, partitions: int = 4) -> tuple[str, str]:
    n = next(_names)
    group, topic = f"kip848-g{n}", f"kip848-t{n}"
    d.create_topics(topic, partitions=partitions)
    # Learn each side's topic id (and label it) before any answer names it.
    d.same(3, 12, {"topics": [{"topic_id": ZERO_UUID, "name": topic}],
                   "allow_auto_topic_creation": False,
                   "include_topic_authorized_operations": False})
    _coordinators_know(d, topic)
    return group, topic


def _coordinators_know(d: Differential, topic: str, timeout: float = 30) -> None:
    """Kafka's group coordinator learns of a new topic from its metadata image a
    little after Metadata lists it: a throwaway member joins until it is given
    the topic's partitions, then leaves."""
    for side in (d.kcoord, d.kafka):
        probe = join(f"probe-{topic}", "probe", topic)(side)
        deadline = time.monotonic() + timeout
        with WireClient.to(side.bootstrap) as client:
            while True:
                answer = client.call(68, 1, probe)
                assert answer["error_code"] == 0, (side.name, answer)
                if answer["assignment"] and answer["assignment"]["topic_partitions"]:
                    break
                assert time.monotonic() < deadline, (side.name, answer)
                client.call(68, 1, {**probe, "member_epoch": -1, "topic_partitions": None})
                time.sleep(0.05)
            client.call(68, 1, {**probe, "member_epoch": -1, "topic_partitions": None})


def hb(group: str, member: str, epoch: int, *, topic: str | None = None,
       owned: list[int] | None = None, instance: str | None = None,
       rebalance: int = -1, topics: list[str] | None = None, assignor: str | None = None):
    """A ConsumerGroupHeartbeat body; ``owned`` partitions of ``topic`` are sent
    with each broker's own topic id."""
    def body(side):
        return {"group_id": group, "member_id": member, "member_epoch": epoch,
                "instance_id": instance, "rack_id": None, "rebalance_timeout_ms": rebalance,
                "subscribed_topic_names": topics, "subscribed_topic_regex": None,
                "server_assignor": assignor,
                "topic_partitions": None if owned is None else
                ([{"topic_id": side.topic_ids[topic], "partitions": owned}] if owned else [])}
    return body


def join(group: str, member: str, topic: str, **kw):
    return hb(group, member, 0, topic=topic, owned=[], rebalance=60_000, topics=[topic], **kw)


def describe(d: Differential, version: int, group_ids: list[str], ops: bool = False) -> dict:
    """ConsumerGroupDescribe on both; Kafka keeps members in a hash map, so they
    are compared in member-id order."""
    ours, theirs = d.ask(69, version, {"group_ids": group_ids,
                                       "include_authorized_operations": ops})
    for answer in (ours, theirs):
        for g in answer["groups"]:
            g["members"] = sorted(g["members"], key=lambda m: m["member_id"])
    found = differences(ours, theirs)
    assert not found, "ConsumerGroupDescribe differs:\n  " + "\n  ".join(found)
    return ours


def parts(answer: dict) -> list[int]:
    assignment = answer["assignment"]
    if not assignment:
        return []
    return sorted(p for t in assignment["topic_partitions"] for p in t["partitions"])


def test_members_join_reconcile_and_leave_as_on_kafka(d):
    group, topic = _setup(d)
    a = d.same(68, 1, join(group, "member-a", topic))
    assert a["member_epoch"] == 2 and parts(a) == [0, 1, 2, 3]
    b = d.same(68, 1, join(group, "member-b", topic))
    assert b["member_epoch"] == 3 and parts(b) == []
    # a is told to revoke half, and stays at its epoch until it has
    a2 = d.same(68, 1, hb(group, "member-a", 2, topic=topic, owned=[0, 1, 2, 3]))
    assert a2["member_epoch"] == 2 and len(parts(a2)) == 2
    describe(d, 1, [group])
    a3 = d.same(68, 1, hb(group, "member-a", 2, topic=topic, owned=parts(a2)))
    assert a3["member_epoch"] == 3
    b2 = d.same(68, 1, hb(group, "member-b", 3, topic=topic, owned=[]))
    assert sorted(parts(a2) + parts(b2)) == [0, 1, 2, 3]
    describe(d, 1, [group], ops=True)
    describe(d, 0, [group, "kip848-nope"])
    d.same(15, 5, {"groups": [group], "include_authorized_operations": False})
    # offsets with member epochs
    body = {"group_id": group, "generation_id_or_member_epoch": 3, "member_id": "member-b",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": parts(b2)[0], "committed_offset": 5,
                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    d.same(8, 9, body)
    d.same(8, 9, {**body, "generation_id_or_member_epoch": 4})  # newer: stale
    d.same(8, 9, {**body, "member_id": "member-z"})
    d.same(8, 8, body)  # a consumer-protocol member needs v9
    d.same(8, 9, {**body, "generation_id_or_member_epoch": 2})  # b got it at epoch 3
    # a is at epoch 3 and kept partitions it got at epoch 2: epoch 2 still commits them
    kept = {**body, "member_id": "member-a", "generation_id_or_member_epoch": 2,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": parts(a2)[0], "committed_offset": 3,
                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    assert d.same(8, 9, kept)["topics"][0]["partitions"][0]["error_code"] == 0
    fetch = {"require_stable": False, "groups": [
        {"group_id": group, "member_id": "member-b", "member_epoch": 3,
         "topics": [{"name": topic, "partition_indexes": [0, 1, 2, 3]}]}]}
    d.same(9, 9, fetch)
    d.same(9, 9, {**fetch, "groups": [{**fetch["groups"][0], "member_epoch": 1}]})
    d.same(42, 2, {"groups_names": [group]})  # not empty
    # b leaves; a gets everything back
    left = d.same(68, 1, hb(group, "member-b", -1, topic=topic, owned=parts(b2)))
    assert left["member_epoch"] == -1
    a4 = d.same(68, 1, hb(group, "member-a", 3, topic=topic, owned=parts(a2)))
    assert a4["member_epoch"] == 4 and parts(a4) == [0, 1, 2, 3]
    d.same(68, 1, hb(group, "member-a", -1, topic=topic, owned=[0, 1, 2, 3]))
    describe(d, 1, [group])
    d.same(42, 2, {"groups_names": [group]})
    describe(d, 1, [group])


def test_list_groups_by_type_and_state(d):
    group, topic = _setup(d)
    d.same(68, 1, join(group, "member-a", topic))
    ours, theirs = d.ask(16, 5, {"states_filter": [], "types_filter": ["consumer"]})
    mine = [g for g in ours["groups"] if g["group_id"] == group]
    kafkas = [g for g in theirs["groups"] if g["group_id"] == group]
    assert mine == kafkas and mine[0]["group_type"] == "consumer"
    ours, theirs = d.ask(16, 5, {"states_filter": ["stable"], "types_filter": ["classic"]})
    assert group not in {g["group_id"] for g in ours["groups"]}
    assert group not in {g["group_id"] for g in theirs["groups"]}


def test_static_members_leave_for_a_while_and_come_back(d):
    group, topic = _setup(d)
    d.same(68, 1, join(group, "static-a", topic, instance="inst-a"))
    d.same(68, 1, join(group, "static-b", topic, instance="inst-b"))
    # an instance id held by a live member
    d.same(68, 1, join(group, "static-x", topic, instance="inst-a"))
    d.same(68, 1, hb(group, "static-x", 2, instance="inst-a"))  # fenced by static-a
    d.same(68, 1, hb(group, "static-x", 2, instance="inst-zz"))  # unknown instance
    gone = d.same(68, 1, hb(group, "static-a", -2, instance="inst-a"))
    assert gone["member_epoch"] == -2
    describe(d, 1, [group])
    back = d.same(68, 1, join(group, "static-a2", topic, instance="inst-a"))
    assert back["error_code"] == 0
    describe(d, 1, [group])


@pytest.mark.parametrize("name, body", [
    ("empty group id", lambda t: hb("", "m", 0, topic=t, owned=[], rebalance=1000, topics=[t])),
    ("blank member id v1", lambda t: hb("g-err", " ", 0, topic=t, owned=[], rebalance=1000,
                                        topics=[t])),
    ("empty instance id", lambda t: hb("g-err", "m", 0, topic=t, owned=[], rebalance=1000,
                                       topics=[t], instance="")),
    ("no rebalance timeout", lambda t: hb("g-err", "m", 0, topic=t, owned=[], topics=[t])),
    ("owned on join", lambda t: hb("g-err", "m", 0, topic=t, owned=[0], rebalance=1000,
                                   topics=[t])),
    ("no owned list on join", lambda t: hb("g-err", "m", 0, rebalance=1000, topics=[t])),
    ("no subscription", lambda t: hb("g-err", "m", 0, topic=t, owned=[], rebalance=1000)),
    ("epoch -3", lambda t: hb("g-err", "m", -3)),
    ("static leave without instance", lambda t: hb("g-err", "m", -2)),
    ("unknown assignor", lambda t: hb("g-err", "m", 0, topic=t, owned=[], rebalance=1000,
                                      topics=[t], assignor="sticky")),
    ("unknown group", lambda t: hb("g-err-none", "m", 5)),
    ("leave of an unknown group", lambda t: hb("g-err-none", "m", -1)),
])
def test_refused_heartbeats_are_answered_as_kafka_answers_them(d, name, body):
    _group, topic = _setup(d)
    answer = d.same(68, 1, body(topic))
    assert answer["error_code"] != 0, name


def test_member_epoch_errors(d):
    group, topic = _setup(d)
    d.same(68, 1, join(group, "member-a", topic))
    assert d.same(68, 1, hb(group, "member-a", 9))["error_code"] == FENCED_MEMBER_EPOCH
    assert d.same(68, 1, hb(group, "member-q", 2))["error_code"] == UNKNOWN_MEMBER_ID
    d.same(68, 1, join(group, "member-b", topic))
    # a's previous epoch with a subset of its partitions: a lost answer, accepted
    d.same(68, 1, hb(group, "member-a", 2, topic=topic, owned=[]))
    d.same(68, 1, hb(group, "member-a", 1, topic=topic, owned=[]))
    d.same(68, 0, hb(group, "member-b", -1))


def test_a_regex_subscription_as_on_kafka(d):
    """A member subscribing by regular expression: the join is answered before
    the expression is resolved (epoch 1, nothing assigned); once resolved, the
    group's epoch moves on and the member gets the matching topic."""
    group, topic = _setup(d)
    regex = f"{topic}|kip848-nothing-.*"
    body = lambda side: {**hb(group, "member-r", 0, topic=topic, owned=[],  # noqa: E731
                              rebalance=60_000)(side), "subscribed_topic_regex": regex}
    joined = d.same(68, 1, body)
    assert joined["member_epoch"] == 1 and parts(joined) == []
    finals = []
    for side in (d.kcoord, d.kafka):
        deadline = time.monotonic() + 30
        with WireClient.to(side.bootstrap) as client:
            while True:
                answer = client.call(68, 1, hb(group, "member-r", 1, topic=topic,
                                              owned=[])(side))
                assert answer["error_code"] == 0, (side.name, answer)
                if answer["assignment"] and answer["assignment"]["topic_partitions"]:
                    break
                assert time.monotonic() < deadline, (side.name, answer)
                time.sleep(0.1)
        finals.append((answer["member_epoch"], parts(answer)))
    assert finals[0] == finals[1] == (2, [0, 1, 2, 3])
    describe(d, 1, [group])
    invalid = lambda side: {**hb(group, "member-s", 0, topic=topic, owned=[],  # noqa: E731
                                 rebalance=60_000)(side), "subscribed_topic_regex": "(oops"}
    refused = d.same(68, 1, invalid)
    assert refused["error_code"] == 128


@pytest.mark.parametrize("regex", ["(oops", "a**", "a)", "[a", "a\\", "(?=a)", "x{2,1}"])
def test_invalid_regexes_are_refused_with_kafkas_message(d, regex):
    group, topic = _setup(d)
    body = lambda side: {**hb(group, "member-x", 0, topic=topic, owned=[],  # noqa: E731
                              rebalance=60_000)(side), "subscribed_topic_regex": regex}
    assert d.same(68, 1, body)["error_code"] == 128


def test_offsets_by_topic_id_as_on_kafka(d):
    """OffsetCommit v10 and OffsetFetch v10 name topics by id (KIP-848): a simple
    consumer's commit, a member's, an id no topic has, and all of a group's
    offsets."""
    group, topic = _setup(d)
    nobody = uuid.UUID(int=0xDEAD)

    def commit(epoch=-1, member="", ids=True):
        def body(side):
            topics = [{"topic_id": side.topic_ids[topic], "partitions": [
                {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                 "committed_metadata": "m"},
                {"partition_index": 9, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]
            if ids:
                topics.append({"topic_id": nobody, "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                     "committed_metadata": ""}]})
            return {"group_id": group, "generation_id_or_member_epoch": epoch,
                    "member_id": member, "group_instance_id": None, "topics": topics}
        return body

    d.same(8, 10, commit())
    fetch = lambda side: {"require_stable": True, "groups": [  # noqa: E731
        {"group_id": group, "member_id": None, "member_epoch": -1, "topics": [
            {"topic_id": side.topic_ids[topic], "partition_indexes": [0, 1]},
            {"topic_id": nobody, "partition_indexes": [0]}]}]}
    d.same(9, 10, fetch)
    d.same(9, 10, {"require_stable": False, "groups": [
        {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None},
        {"group_id": "kip848-none", "member_id": None, "member_epoch": -1, "topics": None}]})
    joined = d.same(68, 1, join(group, "member-a", topic))
    d.same(8, 10, commit(joined["member_epoch"], "member-a", ids=False))
    d.same(8, 10, commit(joined["member_epoch"] + 1, "member-a", ids=False))
