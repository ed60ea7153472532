"""Consumer groups on the raw wire: the same scripted sessions go to kcoord and to
Apache Kafka 4.x (the new group coordinator, which kcoord follows), and every
answer must match field by field: joins (two-step, static), syncs, heartbeats,
leaves, commits, fetches, describe, list, delete, and the error branches a
script can reach.  Versions 4.x no longer serves are asked of Kafka 3.9 where
the two coordinators agree."""

from __future__ import annotations

import itertools
import time

import pytest

from kcoord.broker.groups.placement import coordinator_partition
from tests.reference.differential import Differential, differences
from tests.reference.group_script import GroupScript

_names = itertools.count()
SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0: ["t"]
SUB_TU = b"\x00\x00\x00\x00\x00\x02\x00\x01t\x00\x01u\xff\xff\xff\xff"


_loaded: set[str] = set()


def _pair(reference_pair, which: str) -> Differential:
    kcoord, ref = reference_pair(which)
    d = Differential(kcoord.bootstrap, ref.bootstrap, f"Kafka {ref.version}")
    if which not in _loaded:
        # Kafka loads each __consumer_offsets partition a while after creating it.
        with GroupScript(d) as s:
            s.ready(*_every_partition())
        _loaded.add(which)
    return d


@pytest.fixture
def diff(reference_pair):
    return _pair(reference_pair, "main")


@pytest.fixture
def diff_legacy(reference_pair):
    return _pair(reference_pair, "legacy")


def _group() -> str:
    return f"dg-{next(_names)}"


def _every_partition() -> list[str]:
    """One group id per ``__consumer_offsets`` partition."""
    found: dict[int, str] = {}
    for i in itertools.count():
        found.setdefault(coordinator_partition(f"ready-{i}", 50), f"ready-{i}")
        if len(found) == 50:
            return list(found.values())


def _topic(d: Differential, partitions: int = 2) -> str:
    name = f"dgt-{next(_names)}"
    d.create_topics(name, partitions=partitions)
    return name


def join(group, member="", *, instance=None, protocols=None, session=30_000,
         rebalance=60_000, protocol_type="consumer"):
    return {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
            "member_id": member, "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": protocols if protocols is not None else
            [{"name": "range", "metadata": SUB}], "reason": None}


def sync(group, generation, member, assignments=(), *, instance=None,
         protocol_type="consumer", protocol_name="range"):
    return {"group_id": group, "generation_id": generation, "member_id": member,
            "group_instance_id": instance, "protocol_type": protocol_type,
            "protocol_name": protocol_name,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]}


def heartbeat(group, generation, member, instance=None):
    return {"group_id": group, "generation_id": generation, "member_id": member,
            "group_instance_id": instance}


def commit(group, offsets, generation=-1, member="", instance=None):
    topics = {}
    for (t, p), (o, meta) in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o,
                                         "committed_leader_epoch": -1,
                                         "commit_timestamp": -1, "committed_metadata": meta})
    return {"group_id": group, "generation_id_or_member_epoch": generation,
            "member_id": member, "group_instance_id": instance, "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def fetch(group, topics=None, require_stable=False):
    return {"group_id": group, "require_stable": require_stable,
            "topics": None if topics is None else
            [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}


def fetch_v8(*groups, require_stable=False):
    return {"require_stable": require_stable, "groups": [
        {"group_id": g, "member_id": None, "member_epoch": -1,
         "topics": None if t is None else [{"name": n, "partition_indexes": ps}
                                           for n, ps in t.items()]} for g, t in groups]}


def _joined(s: GroupScript, conn: str, group: str, version: int = 9, **kw) -> dict:
    """A dynamic member's two-step join; returns the (parked, then answered) JoinGroup."""
    first = s.call(conn, 11, version, join(group, **kw))
    assert first["error_code"] == 79, first  # MEMBER_ID_REQUIRED
    return s.call(conn, 11, version, join(group, first["member_id"], **kw))


def _list(s: GroupScript, conn: str, version: int, groups: set[str], body=None) -> list:
    """A listing of this test's groups only (both brokers serve other tests too)."""
    answers = s.both(conn, 16, version, body or {"states_filter": [], "types_filter": []})
    for a in answers:
        a["groups"] = sorted((g for g in a["groups"] if g["group_id"] in groups),
                             key=lambda g: g["group_id"])
    assert answers[0] == answers[1], answers
    return answers[0]["groups"]


# -- whole sessions ------------------------------------------------------------------------


def test_one_consumer_from_join_to_deletion(diff):
    group, topic = _group(), _topic(diff)
    with GroupScript(diff) as s:
        joined = _joined(s, "a", group)
        assert (joined["generation_id"], joined["leader"]) == (1, "<member-0>")
        synced = s.call("a", 14, 5, sync(group, 1, "<member-0>", [("<member-0>", b"A")]))
        assert synced["assignment"] == b"A"
        assert s.call("a", 12, 4, heartbeat(group, 1, "<member-0>"))["error_code"] == 0
        s.call("a", 8, 9, commit(group, {(topic, 0): (5, "m"), (topic, 1): (7, None)},
                                 1, "<member-0>"))
        s.call("a", 9, 7, fetch(group, {topic: [0, 1, 2]}))
        s.call("a", 9, 7, fetch(group, None))
        s.call("a", 9, 9, fetch_v8((group, None), (_group(), {topic: [0]})))
        s.call("a", 15, 5, {"groups": [group], "include_authorized_operations": True})
        assert _list(s, "a", 5, {group})[0]["group_state"] == "Stable"
        s.call("a", 42, 2, {"groups_names": [group]})  # NON_EMPTY_GROUP
        s.call("a", 47, 0, {"group_id": group, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0}]},
            {"name": "dgt-missing", "partitions": [{"partition_index": 0}]}]})
        s.call("a", 13, 5, {"group_id": group, "members": [
            {"member_id": "<member-0>", "group_instance_id": None, "reason": "done"}]})
        described = s.call("a", 15, 5, {"groups": [group], "include_authorized_operations": False})
        assert described["groups"][0]["group_state"] == "Empty"
        s.call("a", 9, 7, fetch(group, None))
        s.call("a", 47, 0, {"group_id": group, "topics": [
            {"name": topic, "partitions": [{"partition_index": 1}]}]})
        s.call("a", 9, 7, fetch(group, None))
        s.call("a", 42, 2, {"groups_names": [group, group, "dg-never"]})
        s.call("a", 15, 5, {"groups": [group], "include_authorized_operations": False})
        s.call("a", 9, 7, fetch(group, None))


def test_a_second_member_triggers_a_rebalance_and_both_get_the_new_generation(diff):
    group, topic = _group(), _topic(diff)
    with GroupScript(diff) as s:
        _joined(s, "a", group)
        s.call("a", 14, 5, sync(group, 1, "<member-0>", [("<member-0>", b"A")]))
        first = s.call("b", 11, 9, join(group))
        assert first["member_id"] == "<member-1>"
        s.send("b", 11, 9, join(group, "<member-1>"))  # parked until a re-joins
        s.wait_state(group, "PreparingRebalance")
        s.call("a", 12, 4, heartbeat(group, 1, "<member-0>"))  # REBALANCE_IN_PROGRESS
        s.call("a", 8, 9, commit(group, {(topic, 0): (1, "")}, 1, "<member-0>"))  # allowed
        s.call("a", 14, 5, sync(group, 1, "<member-0>"))  # REBALANCE_IN_PROGRESS
        s.call("a", 15, 5, {"groups": [group], "include_authorized_operations": False})
        leader = s.call("a", 11, 9, join(group, "<member-0>"))
        follower = s.receive("b")
        assert leader["generation_id"] == follower["generation_id"] == 2
        assert len(leader["members"]) == 2 and follower["members"] == []
        s.call("a", 12, 4, heartbeat(group, 2, "<member-0>"))  # NONE in CompletingRebalance
        s.call("b", 12, 4, heartbeat(group, 1, "<member-1>"))  # ILLEGAL_GENERATION
        s.call("a", 8, 9, commit(group, {(topic, 0): (2, "")}, 2, "<member-0>"))  # REBALANCE_IN_PROGRESS
        s.call("a", 8, 9, commit(group, {(topic, 0): (2, "")}, 1, "<member-0>"))  # ILLEGAL_GENERATION
        s.send("b", 14, 5, sync(group, 2, "<member-1>"))  # parked until the leader syncs
        time.sleep(0.2)  # (no state shows a parked SyncGroup)
        s.call("a", 14, 5, sync(group, 2, "<member-0>", [("<member-0>", b"A"),
                                                       ("<member-1>", b"B")]))
        assert s.receive("b")["assignment"] == b"B"
        s.call("a", 15, 5, {"groups": [group], "include_authorized_operations": False})
        s.call("b", 13, 4, {"group_id": group, "members": [
            {"member_id": "<member-1>", "group_instance_id": None}]})
        s.call("a", 12, 4, heartbeat(group, 2, "<member-0>"))  # REBALANCE_IN_PROGRESS
        rejoined = s.call("a", 11, 9, join(group, "<member-0>"))
        assert rejoined["generation_id"] == 3 and len(rejoined["members"]) == 1


def test_static_member_restart_keeps_its_assignment_without_a_rebalance(diff):
    group = _group()
    with GroupScript(diff) as s:
        joined = s.call("a", 11, 9, join(group, instance="inst-1"))  # no MEMBER_ID_REQUIRED
        s.call("a", 14, 5, sync(group, 1, "<member-0>", [("<member-0>", b"A")],
                                instance="inst-1"))
        restarted = s.call("b", 11, 9, join(group, instance="inst-1"))
        assert restarted["skip_assignment"] and restarted["generation_id"] == joined["generation_id"]
        s.call("b", 14, 5, sync(group, 1, "<member-1>", instance="inst-1"))
        s.call("a", 12, 4, heartbeat(group, 1, "<member-0>", "inst-1"))  # FENCED_INSTANCE_ID
        s.call("a", 11, 9, join(group, "<member-0>", instance="inst-1"))  # FENCED_INSTANCE_ID
        s.call("a", 15, 5, {"groups": [group], "include_authorized_operations": False})
        old_version = s.call("c", 11, 8, join(group, instance="inst-1"))
        assert old_version["leader"] == "<member-1>" and not old_version["members"]
        s.call("a", 13, 5, {"group_id": group, "members": [
            {"member_id": "", "group_instance_id": "inst-1", "reason": None},
            {"member_id": "", "group_instance_id": "inst-unknown", "reason": None}]})
        s.call("a", 15, 5, {"groups": [group], "include_authorized_operations": False})


def test_simple_consumer_commits_and_admin_operations(diff):
    group, topic = _group(), _topic(diff, partitions=3)
    with GroupScript(diff) as s:
        s.call("a", 8, 9, commit(group, {(topic, 0): (10, "x" * 4096), (topic, 1): (11, "y" * 4097),
                                         ("dgt-missing", 0): (1, ""), (topic, 9): (1, "")}))
        s.call("a", 9, 9, fetch_v8((group, None)))
        assert _list(s, "a", 5, {group})[0]["protocol_type"] == ""
        s.call("a", 15, 5, {"groups": [group], "include_authorized_operations": True})
        s.call("a", 8, 9, commit(group, {(topic, 2): (3, "")}, 4, "someone"))  # not a member
        s.call("a", 8, 8, commit(_group(), {(topic, 2): (3, "")}, 4, "someone"))  # v8 missing group
        s.call("a", 8, 9, commit(_group(), {(topic, 2): (3, "")}, 4, "someone"))  # v9 missing group
        s.call("a", 47, 0, {"group_id": "dg-nobody", "topics": [
            {"name": topic, "partitions": [{"partition_index": 0}]}]})
        s.call("a", 42, 2, {"groups_names": [group]})
        s.call("a", 9, 9, fetch_v8((group, None)))


# -- error branches ----------------------------------------------------------------------------


def test_join_group_error_branches(diff):
    group = _group()
    with GroupScript(diff) as s:
        s.call("a", 11, 9, join(""))  # INVALID_GROUP_ID
        s.call("a", 11, 9, join(group, session=5_999))  # INVALID_SESSION_TIMEOUT
        s.call("a", 11, 9, join(group, session=1_800_001))
        s.call("a", 11, 9, join(group, "who-1234"))  # UNKNOWN_MEMBER_ID, group missing
        _joined(s, "a", group)
        s.call("b", 11, 9, join(group, protocols=[{"name": "roundrobin", "metadata": SUB}]))
        s.call("b", 11, 9, join(group, protocol_type="connect"))
        s.call("b", 11, 9, join(group, protocols=[]))
        s.call("b", 11, 9, join(group, "stranger-1234"))  # UNKNOWN_MEMBER_ID
        s.call("b", 11, 9, join(group, "<member-0>", instance="nobody"))
        s.call("a", 11, 9, join(group, "<member-0>"))  # the same metadata: current generation


def test_sync_heartbeat_leave_error_branches(diff):
    group = _group()
    with GroupScript(diff) as s:
        for version in (0, 3, 5):
            s.call("x", 14, version, sync("dg-none", 1, "m"))
            s.call("x", 12, min(version, 4), heartbeat("dg-none", 1, "m"))
        s.call("x", 13, 0, {"group_id": "dg-none", "member_id": "m"})
        s.call("x", 13, 5, {"group_id": "dg-none", "members": [
            {"member_id": "m", "group_instance_id": None, "reason": None}]})
        s.call("x", 14, 5, sync("", 1, "m"))
        s.call("x", 12, 4, heartbeat("", 1, "m"))
        s.call("x", 13, 5, {"group_id": "", "members": []})
        _joined(s, "a", group)
        s.call("a", 14, 5, sync(group, 1, "<member-0>", protocol_type=None))
        s.call("a", 14, 5, sync(group, 1, "<member-0>", protocol_name="roundrobin"))
        s.call("a", 14, 5, sync(group, 1, "<member-0>", protocol_type="connect"))
        s.call("a", 14, 5, sync(group, 2, "<member-0>"))
        s.call("a", 14, 5, sync(group, 1, "ghost"))
        s.call("a", 14, 5, sync(group, 1, "<member-0>", instance="nobody"))
        s.call("a", 14, 2, sync(group, 1, "<member-0>", [("<member-0>", b"A")]))
        for body in (heartbeat(group, 0, "<member-0>"), heartbeat(group, 1, "ghost"),
                     heartbeat(group, 1, "<member-0>", "nobody"),
                     heartbeat(group, 1, "<member-0>")):
            s.call("a", 12, 4, body)
        s.call("a", 13, 2, {"group_id": group, "member_id": "ghost"})
        s.call("a", 13, 5, {"group_id": group, "members": [
            {"member_id": "ghost", "group_instance_id": None, "reason": None},
            {"member_id": "<member-0>", "group_instance_id": "nobody", "reason": None},
            {"member_id": "<member-0>", "group_instance_id": None, "reason": "bye"}]})
        s.call("a", 12, 4, heartbeat(group, 2, "<member-0>"))  # Empty now


# -- every version ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 10))
def test_join_and_sync_in_every_version(diff, version):
    group = _group()
    sync_version = min(version, 5) if version >= 1 else 0
    with GroupScript(diff) as s:
        if version >= 4:
            joined = _joined(s, "a", group, version)
        else:
            joined = s.call("a", 11, version, join(group))
        s.call("a", 14, sync_version, sync(group, joined["generation_id"], "<member-0>",
                                           [("<member-0>", b"A")]))
        s.call("a", 12, min(version, 4), heartbeat(group, 1, "<member-0>"))
        if version >= 3:
            s.call("a", 13, min(version, 5), {"group_id": group, "members": [
                {"member_id": "<member-0>", "group_instance_id": None, "reason": None}]})
        else:
            s.call("a", 13, version, {"group_id": group, "member_id": "<member-0>"})


@pytest.mark.parametrize("version", range(2, 10))
def test_offset_commit_and_fetch_in_every_version(diff, version):
    group, topic = _group(), _topic(diff)
    with GroupScript(diff) as s:
        s.call("a", 8, version, commit(group, {(topic, 0): (3, "meta"), (topic, 1): (4, None)}))
        if version >= 8:
            s.call("a", 9, version, fetch_v8((group, {topic: [0, 1]}), (group, None)))
        else:
            s.call("a", 9, version, fetch(group, {topic: [0, 1, 5]}))
            s.call("a", 9, version, fetch(group, None))


def test_offset_commit_and_fetch_v1_as_kafka_3_9(diff_legacy):
    group, topic = _group(), _topic(diff_legacy)
    with GroupScript(diff_legacy) as s:
        s.call("a", 8, 1, commit(group, {(topic, 0): (3, "meta")}))
        s.call("a", 9, 1, fetch(group, {topic: [0, 1]}))
        # v0 kept offsets in ZooKeeper: refused partition by partition by a KRaft
        # Kafka 3.9, which nonetheless lists v0 (old clients such as kafka-rust
        # go on with the connection); nothing is committed.
        s.call("a", 8, 0, commit(group, {(topic, 0): (7, "zk"), ("dd-missing", 2): (1, "")}))
        s.call("a", 9, 0, fetch(group, {topic: [0, 1], "dd-missing": [3]}))
        s.call("a", 9, 1, fetch(group, {topic: [0]}))


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator_in_every_version(diff, version):
    if version >= 4:
        body = {"key_type": 0, "coordinator_keys": [_group(), "", "other"]}
    else:
        body = {"key": _group(), "key_type": 0}
    d = diff
    ours, theirs = d.ask(10, version, body)
    for answer in (ours, theirs):  # each broker names its own host
        for entry in answer.get("coordinators", [answer]):
            assert entry["host"] == "127.0.0.1"
    assert not differences(ours, theirs)


@pytest.mark.parametrize("version", range(0, 7))
def test_describe_and_list_groups_in_every_version(diff, version):
    group = _group()
    with GroupScript(diff) as s:
        _joined(s, "a", group)
        s.call("a", 15, version, {"groups": [group, "dg-unknown"],
                                  "include_authorized_operations": True})
        s.call("a", 14, 5, sync(group, 1, "<member-0>", [("<member-0>", b"A")]))
        s.call("a", 15, version, {"groups": [group], "include_authorized_operations": False})
        version = min(version, 5)  # ListGroups: v0-5
        _list(s, "a", version, {group})
        if version >= 4:
            _list(s, "a", version, {group}, {"states_filter": ["stable"], "types_filter": []})
            _list(s, "a", version, {group}, {"states_filter": ["Empty"], "types_filter": []})
        if version >= 5:
            _list(s, "a", version, {group}, {"states_filter": [], "types_filter": ["consumer"]})
            _list(s, "a", version, {group}, {"states_filter": [], "types_filter": ["Classic"]})


@pytest.mark.parametrize("version", range(0, 4))
def test_delete_groups_in_every_version(diff, version):
    group, topic = _group(), _topic(diff)
    with GroupScript(diff) as s:
        s.call("a", 8, 9, commit(group, {(topic, 0): (3, "")}))
        s.call("a", 42, version, {"groups_names": [group, "dg-unknown"]})
        s.call("a", 9, 9, fetch_v8((group, None)))
