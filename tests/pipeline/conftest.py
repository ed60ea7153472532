"""One Spark session for every pipeline test (``local[2]``, UI off, 2 shuffle
partitions, Spark's Kafka connector resolved from Maven), and one store: a
kcoord broker in which real clients produced and committed offsets.

Without Java 17+ the Spark tests skip with one line saying so, unless
``KCOORD_REQUIRE_REFERENCE=1`` (set by ``.ci/run``) makes that a failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.reference.fixtures import _unavailable
from tests.support import BrokerThread

T_GROUPS = ("billing", "audit", "gone", "trimmed")


def kafka_connector() -> str:
    import pyspark

    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"


@pytest.fixture(scope="session")
def spark():
    from kcoord.pipeline.cli import java_problem

    problem = java_problem()
    if problem:
        _unavailable(problem)
    from kcoord.pipeline import jobs

    session = jobs.session("local[2]", "kcoord tests", progress=False,
                           conf={"spark.sql.shuffle.partitions": "2",
                                 "spark.jars.packages": kafka_connector()})
    yield session
    session.stop()


@dataclass
class Store:
    """What the clients did to the store, as the live broker answered it."""

    broker: BrokerThread
    data_dir: Path
    commits: list = field(default_factory=list)  # (group, topic, partition, offset)
    # OffsetFetch from the live broker: (group, topic, partition) -> (offset, metadata)
    fetched: dict = field(default_factory=dict)
    end_offsets: dict = field(default_factory=dict)  # (topic, partition) -> high watermark
    commit_times: dict = field(default_factory=dict)  # group -> (first, last) commit time in ms

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap


def _produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions,
                         headers=[("n", str(i).encode())])
    assert producer.flush(30) == 0


def next_millisecond() -> None:
    """Return once the wall clock shows a later millisecond than when called
    (bounded: at most 1 s), so that a commit and a batch on either side of the
    call never share a timestamp."""
    start, deadline = int(time.time() * 1000), time.monotonic() + 1
    while int(time.time() * 1000) <= start and time.monotonic() < deadline:
        time.sleep(0.0002)


@pytest.fixture
def broker(tmp_path):
    """A broker of the test's own, on a store no other test reads."""
    running = BrokerThread(tmp_path / "broker-data").start()
    yield running
    running.stop()


def _watermarks(bootstrap: str, topics: dict) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe-unused"})
    try:
        return {(t, p): probe.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
                for t, n in topics.items() for p in range(n)}
    finally:
        probe.close()


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    """A running broker whose store holds:

    * ``orders`` (3 partitions, 300 then 60 more records) and ``payments`` (2, 40);
    * ``billing``: a confluent-kafka group member that read 150 records of orders
      committing every 30; the 60 later records are its lag;
    * ``audit``: kafka-python committing payments offsets by hand, with metadata;
    * ``gone``: a group deleted with DeleteGroups (its offsets are tombstones);
    * ``trimmed``: a simple group with one partition's offset deleted by OffsetDelete."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    from kcoord.protocol.client import WireClient

    data_dir = tmp_path_factory.mktemp("pipeline-store")
    broker = BrokerThread(data_dir).start()
    s = Store(broker, data_dir)
    topics = {"orders": 3, "payments": 2}
    admin = AdminClient({"bootstrap.servers": s.bootstrap})
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        f.result(30)
    _produce(s.bootstrap, "orders", 300, 3)
    _produce(s.bootstrap, "payments", 40, 2)

    def stamp(group):
        now = int(time.time() * 1000)
        first, _ = s.commit_times.get(group, (now, now))
        s.commit_times[group] = (first, now)

    billing = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "billing",
                        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    billing.subscribe(["orders"])
    read, deadline = 0, time.monotonic() + 60
    while read < 150 and time.monotonic() < deadline:
        m = billing.poll(0.5)
        if m is None or m.error():
            continue
        read += 1
        if read % 30 == 0:
            for tp in billing.commit(asynchronous=False):
                if tp.offset >= 0:  # partitions without a position are not committed
                    s.commits.append(("billing", tp.topic, tp.partition, tp.offset))
            stamp("billing")
            time.sleep(0.05)  # commits spread in time: the report draws billing's lag as a line
    billing.close()
    assert read == 150

    audit = KafkaConsumer(bootstrap_servers=s.bootstrap, group_id="audit", enable_auto_commit=False)
    for offsets in ({0: 5}, {0: 12, 1: 3}):
        audit.commit({KTP("payments", p): OffsetAndMetadata(o, f"audit-{o}", -1)
                      for p, o in offsets.items()})
        s.commits.extend(("audit", "payments", p, o) for p, o in offsets.items())
        stamp("audit")
    audit.close()

    for group, offsets in (("gone", {0: 10, 1: 11}), ("trimmed", {0: 20, 1: 21, 2: 22})):
        simple = Consumer({"bootstrap.servers": s.bootstrap, "group.id": group})
        simple.commit(offsets=[TopicPartition("orders", p, o) for p, o in offsets.items()],
                      asynchronous=False)
        simple.close()
        s.commits.extend((group, "orders", p, o) for p, o in offsets.items())
    admin.delete_consumer_groups(["gone"])["gone"].result(30)
    with WireClient.to(s.bootstrap) as wire:
        answer = wire.call(47, 0, {"group_id": "trimmed", "topics": [
            {"name": "orders", "partitions": [{"partition_index": 1}]}]})
        assert answer["error_code"] == 0, answer

    _produce(s.bootstrap, "orders", 60, 3)  # after every commit: the lag now
    with WireClient.to(s.bootstrap) as wire:  # OffsetFetch v8, every group in one request
        answer = wire.call(9, 8, {"groups": [{"group_id": g, "topics": None} for g in T_GROUPS],
                                  "require_stable": True})
    for group in answer["groups"]:
        assert group["error_code"] == 0, group
        for topic in group["topics"]:
            for p in topic["partitions"]:
                assert p["error_code"] == 0, p
                s.fetched[(group["group_id"], topic["name"], p["partition_index"])] = (
                    p["committed_offset"], p["metadata"])
    s.end_offsets = _watermarks(s.bootstrap, topics)
    yield s
    broker.stop()
