"""DeleteRecords (Kafka Streams purges its repartition topics with it; so does
``kafka-delete-records``) through confluent-kafka's admin client: the log start
moves, consumers from the earliest offset start there, and the move survives a
restart and a SIGKILL."""

from __future__ import annotations

import signal

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import BrokerProcess


def _setup(bootstrap: str, topic: str) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        producer.produce(topic, b"v%d" % i, partition=i % 2)
    assert producer.flush(10) == 0
    return admin


def _earliest(bootstrap: str, topic: str, partitions: int = 2) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0]
                for p in range(partitions)]
    finally:
        c.close()


def test_deleted_records_are_gone_for_consumers(broker):
    admin = _setup(broker.bootstrap, "dr-orders")
    done = admin.delete_records([TopicPartition("dr-orders", 0, 4),
                                 TopicPartition("dr-orders", 1, -1)])
    lows = {tp.partition: f.result(10).low_watermark for tp, f in done.items()}
    assert lows == {0: 4, 1: 10}
    assert _earliest(broker.bootstrap, "dr-orders") == [4, 10]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dr-reader",
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("dr-orders", 0, -2), TopicPartition("dr-orders", 1, -2)])
    seen = []
    for _ in range(100):
        m = c.poll(0.1)
        if m is not None and not m.error():
            seen.append((m.partition(), m.offset()))
        if len(seen) == 6:
            break
    c.close()
    assert sorted(seen) == [(0, o) for o in range(4, 10)]


def test_a_moved_log_start_survives_a_sigkill(tmp_path):
    node = BrokerProcess(tmp_path).start()
    try:
        admin = _setup(node.bootstrap, "dr-kept")
        done = admin.delete_records([TopicPartition("dr-kept", 0, 7)])
        assert [f.result(10).low_watermark for f in done.values()] == [7]
    finally:
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(10)
    again = BrokerProcess(tmp_path).start()
    try:
        assert _earliest(again.bootstrap, "dr-kept") == [7, 0]
    finally:
        assert again.terminate() == 0


def test_kafka_python_and_aiokafka_delete_records(broker):
    """The other two clients' admin calls, against the same broker."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KafkaTopicPartition
    from aiokafka.structs import TopicPartition as AioTopicPartition

    _setup(broker.bootstrap, "dr-clients")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        done = admin.delete_records({KafkaTopicPartition("dr-clients", 0): 2})
    finally:
        admin.close()
    assert [r["low_watermark"] for r in done.values()] == [2]

    async def aio():
        client = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await client.start()
        try:
            return await client.delete_records(
                {AioTopicPartition("dr-clients", 1): RecordsToDelete(before_offset=3)})
        finally:
            await client.close()

    assert list(asyncio.run(aio()).values()) == [3]
    assert _earliest(broker.bootstrap, "dr-clients") == [2, 3]


def test_whole_segments_below_the_new_log_start_are_deleted(broker):
    """The disk space comes back at once: a repartition topic purged by Kafka
    Streams must not fill the disk."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("dr-space", 1, 1, config={
            "segment.bytes": str(1 << 20)})]).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "message.max.bytes": 2_000_000})
    for _ in range(6):
        producer.produce("dr-space", b"x" * 600_000, partition=0)
        producer.flush(10)
    folder = broker.data_dir / "dr-space-0"
    before = sorted(folder.glob("*.log"))
    assert len(before) >= 3
    done = admin.delete_records([TopicPartition("dr-space", 0, 5)])
    assert [f.result(10).low_watermark for f in done.values()] == [5]
    after = sorted(folder.glob("*.log"))
    assert len(after) < len(before)
    assert all(int(p.stem) <= 5 for p in after[:1])  # the first one left holds offset 5
    assert _earliest(broker.bootstrap, "dr-space", partitions=1) == [5]
