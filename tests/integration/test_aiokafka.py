"""aiokafka (AIOKafkaAdminClient, AIOKafkaConsumer) against the broker."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType


async def test_admin_create_list_describe_delete(broker):
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("ak-events", num_partitions=5, replication_factor=1,
                                            topic_configs={"segment.bytes": "1048576"})])
        assert "ak-events" in await admin.list_topics()

        (described,) = await admin.describe_topics(["ak-events"])
        assert described["error_code"] == 0
        assert len(described["partitions"]) == 5

        (result,) = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "ak-events")])
        ((_err, _msg, _type, name, entries),) = result.resources
        assert name == "ak-events"
        values = {e[0]: e[1] for e in entries}
        assert values["segment.bytes"] == "1048576"

        await admin.delete_topics(["ak-events"])
        assert "ak-events" not in await admin.list_topics()
    finally:
        await admin.close()


async def test_consumer_start_and_topics(broker):
    broker.call(lambda: broker.broker.topics.create("ak-consumed", 2, {}))
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    await consumer.start()
    try:
        topics = await consumer.topics()
        assert "ak-consumed" in topics
        # Listed by the broker but flagged internal, so the consumer leaves it out.
        assert "__consumer_offsets" not in topics
    finally:
        await consumer.stop()
