"""The admin calls about replicas and log directories, answered as a one-node
Kafka 4.4 answers them, compared on the raw wire: DescribeLogDirs (sizes of
the same batches), ElectLeaders (no election needed), the partition
reassignment APIs (nothing to move on one node) and DescribeProducers (what a
partition remembers of an idempotent producer)."""

from __future__ import annotations

import itertools
import time

import pytest

from kcoord.protocol.client import WireClient
from kcoord.protocol.records import Record, build_batch
from tests.reference.differential import Differential
from tests.reference.test_differential_data import _produce_body, _wait_until_fetchable

_names = itertools.count()
# Now, not a fixed past date: records older than retention.ms could be deleted by a
# retention pass on one broker and not yet on the other.
TS = int(time.time() * 1000)


@pytest.fixture
def d(diff) -> Differential:
    return diff("main")


def _topics(d: Differential, *names: str, partitions: int = 2) -> None:
    d.create_topics(*names, partitions=partitions)
    for name in names:
        _wait_until_fetchable(d, name, partitions)


def _batch(n: int, **kw) -> bytes:
    return build_batch([Record(None, TS + i, b"k%d" % i, b"v" * 10) for i in range(n)], **kw)


def _masked(answer: dict) -> dict:
    for result in answer["results"]:
        assert result["log_dir"].startswith("/")
        result["log_dir"] = "<log dir>"
        for key in ("total_bytes", "usable_bytes"):
            if result.get(key, -1) != -1:
                assert result[key] > 0
                result[key] = "<bytes>"
    return answer


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_describe_log_dirs_as_kafka(d, version):
    n = next(_names)
    t, other = f"ld-{version}-{n}", f"ld-{version}-{n}b"
    _topics(d, t, other)
    d.same(0, 9, _produce_body(t, _batch(5)))
    d.same(0, 9, _produce_body(t, _batch(2), partition=1))
    ours, theirs = d.ask(35, version, {"topics": [
        {"topic": t, "partitions": [0, 1, 7]}, {"topic": other, "partitions": [1]},
        {"topic": "no-such-topic", "partitions": [0]}]})
    assert _masked(ours) == _masked(theirs)
    sizes = {p["partition_index"]: p["partition_size"]
             for r in ours["results"] for tp in r["topics"] if tp["name"] == t
             for p in tp["partitions"]}
    assert sizes[0] > sizes[1] > 0
    ours, theirs = d.ask(35, version, {"topics": []})
    assert _masked(ours) == _masked(theirs)


@pytest.mark.parametrize("version", [1, 5])
def test_describe_log_dirs_lists_every_offsets_partition_as_kafka(d, version):
    """Kafka makes the 50 logs of ``__consumer_offsets`` with the topic; kcoord
    makes a partition's folder on its first write, and lists the others empty."""
    from tests.reference.fixtures import create_offsets_topic

    create_offsets_topic(d.kafka)
    ours, theirs = d.ask(35, version, {"topics": [
        {"topic": "__consumer_offsets", "partitions": list(range(60))}]})
    for answer in (ours, theirs):
        (result,) = answer["results"]
        (topic,) = result["topics"]
        assert [p["partition_index"] for p in topic["partitions"]] == list(range(50))
        assert all(p["partition_size"] >= 0 and p["offset_lag"] == 0
                   for p in topic["partitions"])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_as_kafka(d, version):
    t = f"el-{version}-{next(_names)}"
    _topics(d, t)
    for election in (0, 1):
        d.same(43, version, {"election_type": election, "timeout_ms": 1000, "topic_partitions": [
            {"topic": t, "partitions": [0, 1, 9]}, {"topic": "no-such-topic", "partitions": [0]}]})
    if version >= 1:
        d.same(43, version, {"election_type": 5, "timeout_ms": 1000,
                             "topic_partitions": [{"topic": t, "partitions": [0]}]})
    ours, theirs = d.ask(43, version, {"election_type": 0, "timeout_ms": 1000,
                                       "topic_partitions": None})
    for answer in (ours, theirs):
        listed = {r["topic"]: r["partition_result"] for r in answer["replica_election_results"]}
        assert listed[t] == []


@pytest.mark.parametrize("version", [0, 1])
def test_partition_reassignments_as_kafka(d, version):
    t = f"ra-{version}-{next(_names)}"
    _topics(d, t)

    def move(*partitions, allow=True):
        return {"timeout_ms": 1000, "allow_replication_factor_change": allow, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "replicas": r}
                                       for p, r in partitions]}]}

    d.same(45, version, move((0, [1]), (1, [2]), (9, [1]), (0, None)))
    d.same(45, version, move((1, [1, 1])))
    d.same(45, version, move((1, [])))
    d.same(45, version, move((1, [1, 2]), allow=False))
    d.same(45, version, {"timeout_ms": 1000, "allow_replication_factor_change": True, "topics": [
        {"name": "no-such-topic", "partitions": [{"partition_index": 0, "replicas": [1]}]}]})
    d.same(46, 0, {"timeout_ms": 1000, "topics": None})
    d.same(46, 0, {"timeout_ms": 1000, "topics": [{"name": t, "partition_indexes": [0, 5]},
                                                  {"name": "no-such", "partition_indexes": [0]}]})


def test_describe_producers_as_kafka(d):
    t = f"dp-{next(_names)}"
    _topics(d, t)
    pids = {}
    for side in (d.kcoord, d.kafka):
        deadline = time.monotonic() + 30
        with WireClient.to(side.bootstrap) as client:
            while True:  # Kafka answers COORDINATOR_LOAD_IN_PROGRESS for a while at start
                answer = client.call(22, 4, {"transactional_id": None,
                                             "transaction_timeout_ms": -1,
                                             "producer_id": -1, "producer_epoch": -1})
                if answer["error_code"] != 14 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        assert answer["error_code"] == 0, (side.name, answer)
        pids[side.name] = answer["producer_id"]

    def produce(base_sequence, count):
        def body(side):
            return _produce_body(t, _batch(count, producer_id=pids[side.name], producer_epoch=0,
                                           base_sequence=base_sequence))
        return body

    d.same(0, 9, produce(0, 3))
    d.same(0, 9, produce(3, 2))
    ours, theirs = d.ask(61, 0, {"topics": [{"name": t, "partition_indexes": [0, 1, 8]},
                                            {"name": "no-such-topic", "partition_indexes": [0]}]})
    for side, answer in ((d.kcoord, ours), (d.kafka, theirs)):
        for p in answer["topics"][0]["partitions"]:
            for producer in p["active_producers"]:
                assert producer["producer_id"] == pids[side.name]
                producer["producer_id"] = "<pid>"
    from tests.reference.differential import differences
    found = differences(ours, theirs)
    assert not found, found
    (active,) = ours["topics"][0]["partitions"][0]["active_producers"]
    assert active["last_sequence"] == 4 and active["last_timestamp"] == TS + 1
