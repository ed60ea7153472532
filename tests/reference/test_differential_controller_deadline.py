"""The requests a Kafka broker forwards to its KRaft controller (CreateTopics,
DeleteTopics, CreatePartitions, ElectLeaders, AlterPartitionReassignments)
with a ``timeout_ms`` of 0 or less: the controller's event is past its
deadline before it runs, so the whole request is answered REQUEST_TIMED_OUT
and nothing is created, deleted or grown; a request that leaves the
controller nothing to do (no topic, only names given twice) is answered as
usual.  Compared with Kafka on the raw wire, and what each broker then lists."""

from __future__ import annotations

import itertools
import uuid

import pytest

from tests.reference.differential import Differential
from tests.reference.fixtures import own_pair

ZERO = uuid.UUID(int=0)
TIMED_OUT, INVALID_REQUEST = 7, 42
_n = itertools.count()


def _topic(name: str, partitions: int = 2) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": 1,
            "assignments": [], "configs": []}


def _listed(d: Differential, *names: str) -> dict[str, tuple[int, int]]:
    """Each name's Metadata error code and partition count, the same on both."""
    answer = d.same(3, 12, {"topics": [{"name": n, "topic_id": ZERO} for n in names],
                            "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False})
    return {t["name"]: (t["error_code"], len(t["partitions"])) for t in answer["topics"]}


@pytest.mark.parametrize("which,version", [("legacy", 0), ("legacy", 1), ("main", 2),
                                           ("main", 7)])
def test_create_topics_past_deadline_as_kafka(diff, which, version):
    d = diff(which)
    tag = f"cd-ct-{which}-{version}-{next(_n)}"
    d.create_topics(f"{tag}-old")
    for timeout in (0, -1):
        new = f"{tag}-new{-timeout}"
        topics = [_topic(new), _topic(f"{tag}-old"), _topic("bad name!"),
                  _topic(f"{tag}-dup"), _topic(f"{tag}-dup")]
        answer = d.same(19, version, {"topics": topics, "timeout_ms": timeout,
                                      "validate_only": False})
        assert [t["error_code"] for t in answer["topics"]] == [TIMED_OUT] * 5
        if version >= 1:
            dry = d.same(19, version, {"topics": [_topic(new)], "timeout_ms": timeout,
                                       "validate_only": True})
            assert dry["topics"][0]["error_code"] == TIMED_OUT
        assert _listed(d, new)[new] == (3, 0)  # nothing was created
    # Nothing left for the controller: answered as usual.
    twice = d.same(19, version, {"topics": [_topic(f"{tag}-x"), _topic(f"{tag}-x")],
                                 "timeout_ms": 0, "validate_only": False})
    if version >= 1:
        assert [t["error_code"] for t in twice["topics"]] == [INVALID_REQUEST]
    assert d.same(19, version, {"topics": [], "timeout_ms": 0,
                                "validate_only": False})["topics"] == []


@pytest.mark.parametrize("which,version", [("legacy", 0), ("main", 1), ("main", 6)])
def test_delete_topics_past_deadline_as_kafka(diff, which, version):
    d = diff(which)
    name = f"cd-dt-{which}-{version}-{next(_n)}"
    d.create_topics(name, f"{name}-b")
    _listed(d, name, f"{name}-b")  # (the topic ids, learned per broker)
    if version >= 6:
        body = lambda side, timeout: {"topics": [  # noqa: E731
            {"name": name, "topic_id": ZERO},
            {"name": None, "topic_id": side.topic_ids[f"{name}-b"]},
            {"name": f"{name}-missing", "topic_id": ZERO},
            {"name": name, "topic_id": side.topic_ids[name]},  # both: refused alone
        ], "timeout_ms": timeout}
        entries = 4
    else:
        body = lambda side, timeout: {"topic_names": [  # noqa: E731
            name, f"{name}-b", f"{name}-missing"], "timeout_ms": timeout}
        entries = 3
    for timeout in (0, -1):
        answer = d.same(20, version, lambda side: body(side, timeout))
        assert [r["error_code"] for r in answer["responses"]] == [TIMED_OUT] * entries
    assert _listed(d, name, f"{name}-b") == {name: (0, 1), f"{name}-b": (0, 1)}
    twice = d.same(20, version, {"topic_names": [name, name],
                                 "topics": [{"name": name, "topic_id": ZERO}] * 2,
                                 "timeout_ms": 0})
    assert [r["error_code"] for r in twice["responses"]] == [INVALID_REQUEST]
    assert d.same(20, version, {"topic_names": [], "topics": [],
                                "timeout_ms": 0})["responses"] == []


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_past_deadline_as_kafka(diff, version):
    d = diff("main")
    name = f"cd-cp-{version}-{next(_n)}"
    d.create_topics(name, partitions=2)

    def grow(*topics, timeout=0, validate=False):
        return {"topics": [{"name": t, "count": c, "assignments": None} for t, c in topics],
                "timeout_ms": timeout, "validate_only": validate}

    for timeout in (0, -1):
        answer = d.same(37, version, grow((name, 4), (f"{name}-missing", 3), (name, 1),
                                          timeout=timeout))
        assert [r["error_code"] for r in answer["results"]] == [TIMED_OUT] * 3
        answer = d.same(37, version, grow((name, 4), timeout=timeout, validate=True))
        assert answer["results"][0]["error_code"] == TIMED_OUT
    assert _listed(d, name)[name] == (0, 2)  # not grown
    twice = d.same(37, version, grow((name, 4), (name, 5)))
    assert [r["error_code"] for r in twice["results"]] == [INVALID_REQUEST]
    assert d.same(37, version, grow())["results"] == []


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_past_deadline_as_kafka(diff, version):
    d = diff("main")
    name = f"cd-el-{version}-{next(_n)}"
    d.create_topics(name, partitions=2)
    for timeout in (0, -1):
        answer = d.same(43, version, {"election_type": 0, "timeout_ms": timeout,
                                      "topic_partitions": [
                                          {"topic": name, "partitions": [0, 9]},
                                          {"topic": "no-such-topic", "partitions": [0]},
                                          {"topic": f"{name}-none", "partitions": []}]})
        codes = [p["error_code"] for r in answer["replica_election_results"]
                 for p in r["partition_result"]]
        assert codes == [TIMED_OUT] * 3
        if version >= 1:
            assert answer["error_code"] == TIMED_OUT
            every = d.same(43, version, {"election_type": 1, "timeout_ms": timeout,
                                         "topic_partitions": None})
            assert every["error_code"] == TIMED_OUT
            assert every["replica_election_results"] == []
    nothing = d.same(43, version, {"election_type": 0, "timeout_ms": 0,
                                   "topic_partitions": []})
    assert nothing["replica_election_results"] == []


@pytest.mark.parametrize("version", [0, 1])
def test_alter_partition_reassignments_past_deadline_as_kafka(diff, version):
    d = diff("main")
    name = f"cd-ra-{version}-{next(_n)}"
    d.create_topics(name, partitions=2)
    for timeout in (0, -1):
        answer = d.same(45, version, {
            "timeout_ms": timeout, "allow_replication_factor_change": False,
            "topics": [{"name": name, "partitions": [
                {"partition_index": 0, "replicas": [1]},
                {"partition_index": 9, "replicas": None}]},
                {"name": "no-such-topic", "partitions": [
                    {"partition_index": 0, "replicas": [1]}]}]})
        assert answer["error_code"] == TIMED_OUT
        assert [p["error_code"] for r in answer["responses"]
                for p in r["partitions"]] == [TIMED_OUT] * 3
    for timeout in (0, 1000):
        nothing = d.same(45, version, {"timeout_ms": timeout,
                                       "allow_replication_factor_change": True, "topics": []})
        assert nothing["error_code"] == 0


@pytest.fixture(scope="module")
def no_deletion(tmp_path_factory):
    """kcoord and Kafka 4.x with ``delete.topic.enable=false``."""
    with own_pair(tmp_path_factory.mktemp("kcoord-no-deletion"),
                  {"delete.topic.enable": "false"}) as pair:
        yield pair


@pytest.mark.parametrize("version", [1, 2, 3, 5, 6])
def test_delete_topics_disabled_as_kafka(no_deletion, version):
    """Kafka refuses a deletion before it looks at any entry, and before it asks
    its controller anything (a past deadline changes nothing): every entry as
    given, existing or not, named twice or not, INVALID_REQUEST below v3 and
    TOPIC_DELETION_DISABLED from v3."""
    d = no_deletion
    name = f"cd-nd-{version}-{next(_n)}"
    d.create_topics(name)
    _listed(d, name)
    entries = 4 if version >= 6 else 3
    for timeout in (10_000, 0):
        body = lambda side: {  # noqa: E731
            "topic_names": [name, f"{name}-missing", name],
            "topics": [{"name": name, "topic_id": ZERO},
                       {"name": f"{name}-missing", "topic_id": ZERO},
                       {"name": None, "topic_id": ZERO},
                       {"name": None, "topic_id": side.topic_ids[name]}],
            "timeout_ms": timeout}
        answer = d.same(20, version, body)
        assert [r["error_code"] for r in answer["responses"]] == \
            [73 if version >= 3 else INVALID_REQUEST] * entries
    assert _listed(d, name)[name] == (0, 1)
    assert d.same(20, version, {"topic_names": [], "topics": [],
                                "timeout_ms": 0})["responses"] == []
