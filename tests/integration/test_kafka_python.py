"""kafka-python (KafkaAdminClient, KafkaConsumer) against the broker over loopback."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError


@pytest.fixture
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def test_create_list_describe_delete(admin):
    admin.create_topics({"kp-orders": {"num_partitions": 3, "replication_factor": 1,
                                       "configs": {"retention.ms": "3600000"}}})
    assert "kp-orders" in admin.list_topics()

    (described,) = admin.describe_topics(["kp-orders"])
    assert described["error_code"] == 0
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
    assert all(p["leader_id"] == 1 and p["replica_nodes"] == [1] for p in described["partitions"])

    modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-orders")])
    assert list(modified["topic"]["kp-orders"]) == ["retention.ms"]
    assert modified["topic"]["kp-orders"]["retention.ms"]["value"] == "3600000"
    every = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-orders")],
                                   include_synonyms=True, config_filter="all")
    cleanup = every["topic"]["kp-orders"]["cleanup.policy"]
    assert cleanup["value"] == "delete"
    assert cleanup["config_source"] == "DEFAULT_CONFIG"
    assert every["topic"]["kp-orders"]["retention.ms"]["synonyms"][0]["source"] == "DYNAMIC_TOPIC_CONFIG"

    broker_configs = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                            config_filter="all")["broker"]["1"]
    assert broker_configs["num.partitions"]["value"] == "1"
    assert broker_configs["group.initial.rebalance.delay.ms"]["value"] == "0"

    admin.delete_topics(["kp-orders"])
    assert "kp-orders" not in admin.list_topics()


def test_create_existing_topic_fails(admin):
    dupe = {"kp-dupe": {"num_partitions": 1, "replication_factor": 1}}
    admin.create_topics(dupe)
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics(dupe)
    result = admin.create_topics(dupe, raise_errors=False)
    assert result["topics"][0]["error_code"] == 36


def test_create_topic_errors_and_validate_only(admin):
    one = {"num_partitions": 1, "replication_factor": 1}
    result = admin.create_topics({"kp-ok": one, "bad/name": one}, raise_errors=False)
    by_name = {t["name"]: t for t in result["topics"]}
    assert by_name["kp-ok"]["error_code"] == 0
    assert by_name["bad/name"]["error_code"] == 17  # INVALID_TOPIC_EXCEPTION
    result = admin.create_topics({"kp-rf3": {"num_partitions": 1, "replication_factor": 3}},
                                 raise_errors=False)
    assert result["topics"][0]["error_code"] == 38  # INVALID_REPLICATION_FACTOR
    result = admin.create_topics({"kp-badcfg": {**one, "configs": {"cleanup.policy": "shred"}}},
                                 raise_errors=False)
    assert result["topics"][0]["error_code"] == 40  # INVALID_CONFIG
    result = admin.create_topics({"kp-validate": one}, validate_only=True)
    assert result["topics"][0]["error_code"] == 0
    assert "kp-validate" not in admin.list_topics()


def test_delete_unknown_topic_fails(admin):
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["kp-never-created"])


def test_describe_cluster_names_this_broker(admin, broker):
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert cluster["cluster_id"] == broker.broker.cluster_id
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
        (1, "127.0.0.1", broker.port)
    ]


def test_consumer_topics_lists_created_topics(admin, broker):
    admin.create_topics({"kp-listed": {"num_partitions": 2, "replication_factor": 1}})
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        assert "kp-listed" in consumer.topics()
        assert consumer.partitions_for_topic("kp-listed") == {0, 1}
    finally:
        consumer.close()


def test_internal_offsets_topic_is_listed_as_internal(admin):
    (described,) = admin.describe_topics(["__consumer_offsets"])
    assert described["is_internal"] is True
    assert len(described["partitions"]) == 50
