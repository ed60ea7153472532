"""The pipeline on a copy of Apache Kafka's own log dirs: a consumer group hosted
by Apache Kafka 4.x, its ``__consumer_offsets`` and topic folders copied, and
``offsets`` and ``lag`` compared with what that Kafka answers.

The Kafka here is a broker of its own, not the shared reference: the topics and
the transaction state this test creates would show in the differential tests'
topic listings."""

from __future__ import annotations

import shutil
import time
import uuid

import pytest

from kcoord.pipeline import jobs
from kcoord.protocol.client import WireClient
from tests.pipeline.conftest import _produce, _watermarks
from tests.reference import kafka
from tests.reference.fixtures import _unavailable, create_offsets_topic


@pytest.fixture(scope="module")
def own_kafka():
    missing = kafka.missing_requirements()
    if missing:
        _unavailable(missing)
    try:
        broker = kafka.KafkaBroker(kafka.MAIN_VERSION).start()
    except kafka.ReferenceUnavailable as exc:
        _unavailable(str(exc).splitlines()[0])
    try:
        create_offsets_topic(broker)
        yield broker
    finally:
        broker.stop()


def test_offsets_and_lag_from_a_copy_of_kafka_s_log_dirs_equal_its_answers(spark, own_kafka,
                                                                           tmp_path):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = own_kafka.bootstrap
    suffix = uuid.uuid4().hex[:8]
    topic, readers, manual, dropped, txn = (f"lake-{suffix}", f"readers-{suffix}",
                                            f"manual-{suffix}", f"dropped-{suffix}",
                                            f"txn-{suffix}")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(60)
    _produce(bootstrap, topic, 90, 3)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": readers,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    read, deadline = 0, time.monotonic() + 60
    while read < 45 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            read += 1
            if read % 15 == 0:
                consumer.commit(asynchronous=False)
    consumer.close()
    assert read == 45
    for group, offsets in ((manual, {0: 7, 2: 9}), (dropped, {1: 4})):
        simple = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        simple.commit(offsets=[TopicPartition(topic, p, o, metadata=f"m{o}")
                               for p, o in offsets.items()], asynchronous=False)
        simple.close()
    admin.delete_consumer_groups([dropped])[dropped].result(60)
    _transactional_offsets(bootstrap, topic, txn, suffix)
    _produce(bootstrap, topic, 30, 3)

    with WireClient.to(bootstrap) as wire:
        answer = wire.call(9, 8, {"groups": [{"group_id": g, "topics": None}
                                             for g in (readers, manual, dropped, txn)]})
    expected = {}
    for group in answer["groups"]:
        for t in group["topics"]:
            for p in t["partitions"]:
                expected[(group["group_id"], t["name"], p["partition_index"])] = (
                    p["committed_offset"], p["metadata"])
    assert {g for g, _t, _p in expected} == {readers, manual, txn}
    assert [(t, p, o) for (g, t, p), (o, _m) in expected.items() if g == txn] == [(topic, 0, 11)]
    ends = _watermarks(bootstrap, {topic: 3})

    copy = tmp_path / "kafka-logs"
    logs = own_kafka.workdir / "logs"
    shutil.copytree(logs, copy, ignore=shutil.ignore_patterns("*.lock"))
    mine = {k: v for k, v in _offsets(spark, copy).items()
            if k[0] in (readers, manual, dropped, txn)}
    assert mine == expected
    per_partition, _ = jobs.lag(spark, [str(copy)])
    for r in per_partition.where(per_partition.group.isin(readers, manual)).collect():
        end = ends[(r.topic, r.partition)]
        assert (r.end_offset, r.lag) == (end, end - r.committed_offset), r


def _transactional_offsets(bootstrap: str, topic: str, group: str, suffix: str) -> None:
    """Offsets sent to transactions (sendOffsetsToTransaction): one committed, one aborted."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{suffix}"})
    producer.init_transactions(60)
    for partition, offset, outcome in ((0, 11, "commit"), (1, 22, "abort")):
        producer.begin_transaction()
        producer.produce(topic, value=b"in a transaction", partition=partition)
        producer.send_offsets_to_transaction([TopicPartition(topic, partition, offset)],
                                             consumer.consumer_group_metadata(), 60)
        if outcome == "commit":
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
    consumer.close()


def _offsets(spark, copy):
    return {(r.group, r.topic, r.partition): (r.committed_offset, r.metadata)
            for r in jobs.offsets(spark, [str(copy)]).collect()}
