"""The topic calls of the three Python admin clients, as a user makes them: a
topic created, its configs altered and described, partitions added, records
deleted below an offset; with confluent-kafka's AdminClient
(IncrementalAlterConfigs), kafka-python's KafkaAdminClient and aiokafka's
AIOKafkaAdminClient (AlterConfigs).

Each test runs against kcoord and against Apache Kafka (the reference, skipped
without Java): whatever is asserted is what Kafka does too."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from kcoord.protocol.client import WireClient
from tests.integration.members import until


@pytest.fixture(params=["kcoord", "kafka"])
def bootstrap(request, make_broker):
    if request.param == "kafka":
        return request.getfixturevalue("scratch_kafka").bootstrap
    return make_broker().bootstrap


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"  # the reference Kafka is shared by the run


def _produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    """``count`` records to a partition just added: once it takes writes (a new
    partition's leader serves it a moment after Kafka lists it)."""
    until(lambda: _writable(bootstrap, topic, partition), 15, f"{topic}-{partition} writable")
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=partition,
                         on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(10) == 0
    assert errors == [None] * count, errors


def _writable(bootstrap: str, topic: str, partition: int) -> bool:
    with WireClient.to(bootstrap) as client:
        answer = client.call(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition,
                                            "current_leader_epoch": -1, "timestamp": -1}]}]})
    return answer["topics"][0]["partitions"][0]["error_code"] == 0


def _offsets(bootstrap: str, topic: str, partitions: int, timestamp: int) -> list[int]:
    with WireClient.to(bootstrap) as client:
        answer = client.call(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                for p in range(partitions)]}]})
    parts = sorted(answer["topics"][0]["partitions"], key=lambda p: p["partition_index"])
    assert all(p["error_code"] == 0 for p in parts), parts
    return [p["offset"] for p in parts]


def _partition_count(bootstrap: str, topic: str) -> int:
    with WireClient.to(bootstrap) as client:
        answer = client.call(3, 4, {"topics": [{"name": topic}],
                                    "allow_auto_topic_creation": False})
    return len(answer["topics"][0]["partitions"])


def test_confluent_kafka_admin(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = _topic("ck-admin")
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(10)
    until(lambda: _described_ck(admin, topic), 15, "the new topic")
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)
    until(lambda: _described_ck(admin, topic).get("retention.ms") == "3600000", 15,
          "the new retention")
    assert _described_ck(admin, topic)["cleanup.policy"] == "delete,compact"
    for future in admin.create_partitions([NewPartitions(topic, 4)]).values():
        future.result(10)
    until(lambda: _partition_count(bootstrap, topic) == 4, 15, "four partitions")
    _produce(bootstrap, topic, 3, 5)
    (future,) = admin.delete_records([CTP(topic, 3, 2)]).values()
    assert future.result(10).low_watermark == 2
    assert _offsets(bootstrap, topic, 4, -2) == [0, 0, 0, 2]


def _described_ck(admin: AdminClient, topic: str) -> dict[str, str]:
    (future,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    try:
        return {name: entry.value for name, entry in future.result(10).items()}
    except KafkaException:  # Kafka's broker learns of a new topic a moment later
        return {}


def test_kafka_python_admin(bootstrap):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import ConfigResource as KPResource
    from kafka.admin import ConfigResourceType, NewPartitions as KPPartitions
    from kafka.admin import NewTopic as KPTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    topic = _topic("kp-admin")
    try:
        admin.create_topics([KPTopic(topic, 2, 1)])
        until(lambda: _writable(bootstrap, topic, 1), 15, "the new topic")
        admin.alter_configs([KPResource(ConfigResourceType.TOPIC, topic,
                                        configs={"retention.ms": "7200000"})])

        def described() -> dict[str, str]:
            answer = admin.describe_configs([KPResource(ConfigResourceType.TOPIC, topic)])
            return {k: v["value"] for k, v in answer["topic"][topic].items()}
        until(lambda: described().get("retention.ms") == "7200000", 15, "the new retention")
        admin.create_partitions({topic: KPPartitions(total_count=3)})
        until(lambda: _partition_count(bootstrap, topic) == 3, 15, "three partitions")
        _produce(bootstrap, topic, 0, 4)
        admin.delete_records({TopicPartition(topic, 0): 3})
        assert _offsets(bootstrap, topic, 3, -2) == [3, 0, 0]
        assert _offsets(bootstrap, topic, 3, -1) == [4, 0, 0]
    finally:
        admin.close()


def test_aiokafka_admin(bootstrap):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic as AIOTopic
    from aiokafka.admin import NewPartitions as AIOPartitions, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource as AIOResource
    from aiokafka.admin.config_resource import ConfigResourceType as AIOType
    from aiokafka.structs import TopicPartition

    topic = _topic("aio-admin")

    async def scenario() -> dict[str, str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([AIOTopic(topic, 2, 1)])
            until(lambda: _writable(bootstrap, topic, 1), 15, "the new topic")
            await admin.alter_configs([AIOResource(AIOType.TOPIC, topic,
                                                   configs={"max.message.bytes": "500000"})])
            for _ in range(150):
                (answer,) = await admin.describe_configs([AIOResource(AIOType.TOPIC, topic)])
                values = {c[0]: c[1] for c in answer.resources[0][4]}
                if values.get("max.message.bytes") == "500000":
                    break
                await asyncio.sleep(0.1)
            await admin.create_partitions({topic: AIOPartitions(total_count=3)})
            for _ in range(150):
                if _partition_count(bootstrap, topic) == 3:
                    break
                await asyncio.sleep(0.1)
            _produce(bootstrap, topic, 2, 6)
            await admin.delete_records({TopicPartition(topic, 2): RecordsToDelete(before_offset=5)},
                                       timeout_ms=10000)
            return values
        finally:
            await admin.close()

    values = asyncio.run(scenario())
    assert values["max.message.bytes"] == "500000"
    assert _partition_count(bootstrap, topic) == 3
    assert _offsets(bootstrap, topic, 3, -2) == [0, 0, 5]
