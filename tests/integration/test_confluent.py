"""confluent-kafka (librdkafka) AdminClient and Producer metadata against the broker."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})


def _wait(futures: dict, timeout=10):
    return {key: f.result(timeout) for key, f in futures.items()}


def test_create_list_describe_delete(admin, broker):
    _wait(admin.create_topics([NewTopic("ck-orders", num_partitions=4, replication_factor=1,
                                        config={"cleanup.policy": "compact"})]))
    metadata = admin.list_topics(timeout=10)
    assert "ck-orders" in metadata.topics
    assert sorted(metadata.topics["ck-orders"].partitions) == [0, 1, 2, 3]
    assert metadata.cluster_id == broker.broker.cluster_id
    assert metadata.controller_id == 1
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == {
        1: ("127.0.0.1", broker.port)
    }

    (configs,) = _wait(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "ck-orders")])).values()
    assert configs["cleanup.policy"].value == "compact"
    assert not configs["cleanup.policy"].is_default
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].is_default

    _wait(admin.delete_topics(["ck-orders"]))
    assert "ck-orders" not in admin.list_topics(timeout=10).topics


def test_create_with_broker_defaults(admin):
    # librdkafka sends -1/-1 when partitions and replication factor are left out.
    _wait(admin.create_topics([NewTopic("ck-defaults")]))
    assert len(admin.list_topics(timeout=10).topics["ck-defaults"].partitions) == 1


def test_create_existing_topic_reports_topic_already_exists(admin):
    _wait(admin.create_topics([NewTopic("ck-twice", 1)]))
    with pytest.raises(Exception) as info:
        _wait(admin.create_topics([NewTopic("ck-twice", 1)]))
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_delete_unknown_topic_reports_unknown_topic(admin):
    with pytest.raises(Exception) as info:
        _wait(admin.delete_topics(["ck-missing"]))
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_broker_configs(admin):
    (configs,) = _wait(admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])).values()
    assert configs["auto.create.topics.enable"].value == "true"
    assert configs["offsets.topic.num.partitions"].value == "50"


def test_producer_metadata_auto_creates_topic(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    metadata = producer.list_topics(topic="ck-auto-created", timeout=10)
    topic = metadata.topics["ck-auto-created"]
    assert topic.error is None
    assert list(topic.partitions) == [0]
    assert "ck-auto-created" in broker.broker.topics.topics
