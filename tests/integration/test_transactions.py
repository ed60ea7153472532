"""Transactions as applications use them, with each Python client's own API:
a transactional producer commits and aborts, a read_committed consumer reads
only what was committed, a consume-transform-produce loop commits its input
offsets in the same transaction (``send_offsets_to_transaction``), and a new
instance of a producer fences the old one.

Each test runs against kcoord and against Apache Kafka (the reference,
skipped without Java): whatever is asserted is what Kafka does too."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30


@pytest.fixture(params=["kcoord", "kafka"])
def bootstrap(request, make_broker):
    if request.param == "kafka":
        return request.getfixturevalue("scratch_kafka").bootstrap
    return make_broker().bootstrap


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"  # the reference Kafka is shared by the run


def _create(bootstrap: str, *topics: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        future.result(TIMEOUT_S)


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value a consumer of that isolation level reads, up to the end it
    sees (the last stable offset for read_committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("reader"),
                         "isolation.level": isolation, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([CTP(topic, p) for p in range(partitions)])
    values, ended = [], set()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(ended) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                ended.add(message.partition())
                continue
            values.append(message.value())
    finally:
        consumer.close()
    assert len(ended) == partitions, "the consumer never reached the end"
    return sorted(values)


def test_confluent_commit_and_abort(bootstrap):
    topic = _name("ck-txn")
    _create(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": _name("ck")})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, f"kept-{i}".encode(), partition=i % 2)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, f"dropped-{i}".encode(), partition=i % 2)
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    kept = sorted(f"kept-{i}".encode() for i in range(6))
    dropped = sorted(f"dropped-{i}".encode() for i in range(6))
    assert _read_all(bootstrap, topic, 2, "read_committed") == kept
    assert _read_all(bootstrap, topic, 2, "read_uncommitted") == sorted(kept + dropped)


def test_confluent_read_committed_stops_at_an_open_transaction(bootstrap):
    topic = _name("ck-open")
    _create(bootstrap, topic, partitions=1)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, b"before", partition=0)
    plain.flush(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": _name("ck-open")})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"pending", partition=0)
    producer.flush(TIMEOUT_S)
    plain.produce(topic, b"after", partition=0)
    plain.flush(TIMEOUT_S)
    # read_committed ends before the open transaction, whatever follows it
    assert _read_all(bootstrap, topic, 1, "read_committed") == [b"before"]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("wm"),
                         "isolation.level": "read_committed"})
    try:
        low, high = consumer.get_watermark_offsets(CTP(topic, 0), TIMEOUT_S, cached=False)
    finally:
        consumer.close()
    assert (low, high) == (0, 1)  # the last stable offset
    producer.commit_transaction(TIMEOUT_S)
    assert _read_all(bootstrap, topic, 1, "read_committed") == [b"after", b"before", b"pending"]


def test_confluent_consume_transform_produce_commits_its_offsets_with_its_output(bootstrap):
    source, sink, group = _name("ck-in"), _name("ck-out"), _name("ck-eos")
    _create(bootstrap, source, sink, partitions=1)
    feed = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        feed.produce(source, f"v{i}".encode(), partition=0)
    feed.flush(TIMEOUT_S)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.assign([CTP(source, 0)])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": _name("ck-eos")})
    producer.init_transactions(TIMEOUT_S)
    done = 0
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while done < 10 and time.monotonic() < deadline:
            batch = consumer.consume(4, 0.5)
            if not batch:
                continue
            producer.begin_transaction()
            for message in batch:
                producer.produce(sink, message.value().upper(), partition=0)
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), TIMEOUT_S)
            producer.commit_transaction(TIMEOUT_S)
            done += len(batch)
        # one more transaction, aborted: neither its output nor its offsets count
        producer.begin_transaction()
        producer.produce(sink, b"NEVER", partition=0)
        producer.send_offsets_to_transaction([CTP(source, 0, 3)],
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
        producer.abort_transaction(TIMEOUT_S)
        committed = consumer.committed([CTP(source, 0)], TIMEOUT_S)
    finally:
        consumer.close()
    assert done == 10
    assert [(c.topic, c.offset) for c in committed] == [(source, 10)]
    assert _read_all(bootstrap, sink, 1, "read_committed") == sorted(
        f"V{i}".encode() for i in range(10))


def test_confluent_a_new_instance_fences_the_old_one(bootstrap):
    topic, txn_id = _name("ck-fence"), _name("ck-fence")
    _create(bootstrap, topic, partitions=1)
    old = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    old.init_transactions(TIMEOUT_S)
    old.begin_transaction()
    old.produce(topic, b"zombie", partition=0)
    old.flush(TIMEOUT_S)
    new = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    new.init_transactions(TIMEOUT_S)  # aborts the old instance's transaction
    new.begin_transaction()
    new.produce(topic, b"fresh", partition=0)
    new.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaException) as fenced:
        old.produce(topic, b"late", partition=0)
        old.commit_transaction(TIMEOUT_S)
    assert fenced.value.args[0].fatal() or fenced.value.args[0].txn_requires_abort()
    assert _read_all(bootstrap, topic, 1, "read_committed") == [b"fresh"]


def test_kafka_python_commit_abort_and_offsets(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, source, group = _name("kp-txn"), _name("kp-in"), _name("kp-g")
    _create(bootstrap, topic, source, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=_name("kp"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"kept", partition=0)
        producer.send_offsets_to_transaction({TopicPartition(source, 0): OffsetAndMetadata(
            5, "", -1)}, group)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"dropped", partition=0)
        producer.send_offsets_to_transaction({TopicPartition(source, 0): OffsetAndMetadata(
            9, "", -1)}, group)
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             isolation_level="read_committed", enable_auto_commit=False)
    try:
        assert consumer.committed(TopicPartition(source, 0)) == 5
    finally:
        consumer.close()
    assert _read_all(bootstrap, topic, 1, "read_committed") == [b"kept"]


def test_aiokafka_transaction_and_read_committed_consumer(bootstrap):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = _name("aio-txn")
    _create(bootstrap, topic, partitions=1)

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                    transactional_id=_name("aio"))
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"kept", partition=0)
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    await producer.send_and_wait(topic, b"dropped", partition=0)
                    raise RuntimeError("the application fails: the transaction aborts")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap,
                                    isolation_level="read_committed",
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            end = (await consumer.end_offsets([TopicPartition(topic, 0)]))[
                TopicPartition(topic, 0)]
            values = []
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline and await consumer.position(
                    TopicPartition(topic, 0)) < end:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    values.extend(r.value for r in records)
            return end, values
        finally:
            await consumer.stop()

    end, values = asyncio.run(run())
    assert end == 4  # two records, two markers: the last stable offset is the end
    assert values == [b"kept"]
