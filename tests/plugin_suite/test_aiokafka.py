"""aiokafka against the session's kcoord broker, from an asyncio test."""

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


@pytest.mark.asyncio
async def test_an_asyncio_consumer_commits_what_it_read(kcoord):
    topic = kcoord.create_topic("events")
    producer = AIOKafkaProducer(bootstrap_servers=kcoord.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"first")
        await producer.send_and_wait(topic, b"second")
    finally:
        await producer.stop()
    group = kcoord.group()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=kcoord.bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        values = [(await consumer.getone()).value for _ in range(2)]
        await consumer.commit()
    finally:
        await consumer.stop()
    assert values == [b"first", b"second"]
    assert kcoord.committed(group) == {(topic, 0): 2}
