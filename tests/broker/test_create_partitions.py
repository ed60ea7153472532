"""Growing a topic (CreatePartitions) as clients and a restart see it: the new
partitions take records at once, a consumer group rebalances onto them, they
survive a clean stop and a SIGKILL, two growths of one topic never make a
partition twice, and ``__consumer_offsets`` keeps its partition count."""

from __future__ import annotations

import asyncio
import signal

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from kcoord.broker.testing import Kcoord
from kcoord.broker.topics.manager import TopicError
from kcoord.protocol.errors import ErrorCode as E
from kcoord.storage.layout import OFFSETS_TOPIC
from tests.support import BrokerProcess


def _grow(kafka: Kcoord, topic: str, count: int, validate_only: bool = False) -> dict:
    answer = kafka.call(37, 3, {"topics": [{"name": topic, "count": count, "assignments": None}],
                                "timeout_ms": 5000, "validate_only": validate_only})
    return answer["results"][0]


def test_a_client_adds_partitions_and_a_group_rebalances_onto_them(broker):
    kafka = Kcoord(broker.bootstrap)
    topic = kafka.create_topic("grown", partitions=2)
    group = kafka.group()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 200})
    consumer.subscribe([topic])
    for _ in range(100):
        consumer.poll(0.05)
        if len(consumer.assignment()) == 2:
            break
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"on a new partition", partition=3)
    assert producer.flush(10) == 0
    got = None
    for _ in range(200):  # the consumer sees 4 partitions at its next metadata refresh
        message = consumer.poll(0.05)
        if message is not None and message.error() is None:
            got = (message.partition(), message.value())
            break
    assert got == (3, b"on a new partition")
    assert sorted(p for _t, p in kafka.assignment(group)[next(iter(kafka.assignment(group)))]) \
        == [0, 1, 2, 3]
    consumer.close()
    kafka.close()


def test_validate_only_and_the_offsets_topic_change_nothing(broker):
    kafka = Kcoord(broker.bootstrap)
    topic = kafka.create_topic("checked", partitions=2)
    assert _grow(kafka, topic, 5, validate_only=True)["error_code"] == E.NONE
    assert kafka.end_offsets(topic) == {(topic, 0): 0, (topic, 1): 0}
    refused = _grow(kafka, OFFSETS_TOPIC, 60)
    assert refused["error_code"] == E.INVALID_REQUEST
    assert "hashes to" in refused["error_message"]
    assert len(kafka.end_offsets(OFFSETS_TOPIC)) == 50
    kafka.close()


def test_two_growths_of_one_topic_never_make_a_partition_twice(broker):
    kafka = Kcoord(broker.bootstrap)
    topic = kafka.create_topic("raced", partitions=2)
    kafka.close()

    async def both():
        manager = broker.broker.topics
        t = manager.get(topic)
        return await asyncio.gather(manager.add_partitions(t, 4), manager.add_partitions(t, 3),
                                    return_exceptions=True)

    first, second = broker.call(both)
    assert first is None
    assert isinstance(second, TopicError) and second.code is E.INVALID_PARTITIONS
    assert broker.broker.topics.get(topic).partitions == 4
    logs = [key for key in broker.broker.logs.logs if key[0] == topic]
    assert sorted(logs) == [(topic, p) for p in range(4)]


@pytest.mark.parametrize("stop", ["clean", "sigkill"])
def test_added_partitions_survive_a_restart(tmp_path, stop):
    node = BrokerProcess(tmp_path).start()
    try:
        kafka = Kcoord(node.bootstrap)
        topic = kafka.create_topic("kept", partitions=1)
        assert _grow(kafka, topic, 3)["error_code"] == E.NONE
        assert kafka.produce(topic, [b"x"], partition=2) == [0]
        kafka.close()
    finally:
        if stop == "clean":
            assert node.terminate() == 0
        else:
            node.proc.send_signal(signal.SIGKILL)
            node.proc.wait(10)
    again = BrokerProcess(tmp_path).start()
    try:
        with Kcoord(again.bootstrap) as kafka:
            assert kafka.end_offsets(topic) == {(topic, 0): 0, (topic, 1): 0, (topic, 2): 1}
    finally:
        again.terminate()
