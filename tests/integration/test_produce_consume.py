"""kafka-python, confluent-kafka and aiokafka produce to kcoord and read it back:
every acks setting, every codec the client has, keys, headers, timestamps,
earliest and latest, seek by timestamp, a waiting consumer woken by a new
message, and everything read back byte for byte after a restart."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

CODECS = {
    "kafka-python": [None, "gzip", "snappy", "lz4", "zstd"],
    "confluent-kafka": ["none", "gzip", "snappy", "lz4", "zstd"],
    "aiokafka": [None, "gzip", "snappy", "lz4", "zstd"],
}
ACKS = {"kafka-python": [0, 1, "all"], "confluent-kafka": [0, 1, "all"], "aiokafka": [0, 1, "all"]}
BASE_TS = 1_700_000_000_000


def _messages(tag: str, n: int = 20):
    return [(b"key-%d" % i if i % 3 else None, b"%s-value-%d" % (tag.encode(), i),
             [("h", b"%d" % i)], BASE_TS + i * 1000) for i in range(n)]


# --- one adapter per client: produce(messages, acks, codec), consume(partition, start) -------


class KafkaPython:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap

    def produce(self, topic, messages, acks=1, codec=None):
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks=acks,
                                 compression_type=codec, enable_idempotence=acks == "all")
        for key, value, headers, ts in messages:
            producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts,
                          partition=0)
        producer.flush(30)
        producer.close()

    def consume(self, topic, start="earliest", count=None, timeout=5.0, seek_ts=None):
        from kafka import KafkaConsumer, TopicPartition
        tp = TopicPartition(topic, 0)
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, auto_offset_reset=start,
                                 consumer_timeout_ms=int(timeout * 1000))
        consumer.assign([tp])
        if seek_ts is not None:
            found = consumer.offsets_for_times({tp: seek_ts})[tp]
            consumer.seek(tp, found.offset)
        out = []
        for m in consumer:
            out.append((m.key, m.value, list(m.headers), m.timestamp, m.offset))
            if count is not None and len(out) >= count:
                break
        consumer.close()
        return out


class Confluent:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap

    def produce(self, topic, messages, acks=1, codec="none"):
        from confluent_kafka import Producer
        errors = []
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": str(acks),
                             "compression.codec": codec, "linger.ms": 5,
                             "enable.idempotence": acks == "all"})
        for key, value, headers, ts in messages:
            producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts,
                             partition=0, on_delivery=lambda e, m: e and errors.append(e))
        assert producer.flush(30) == 0
        assert errors == []

    def consume(self, topic, start="earliest", count=None, timeout=5.0, seek_ts=None):
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused",
                             "enable.auto.commit": False})
        offset = OFFSET_BEGINNING if start == "earliest" else OFFSET_END
        if seek_ts is not None:
            (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, seek_ts)], 10)
            offset = found.offset
        consumer.assign([TopicPartition(topic, 0, offset)])
        out, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline and (count is None or len(out) < count):
            m = consumer.poll(0.2)
            if m is None or m.error():
                continue
            out.append((m.key(), m.value(), list(m.headers() or []), m.timestamp()[1],
                        m.offset()))
        consumer.close()
        return out


class AioKafka:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap

    def produce(self, topic, messages, acks=1, codec=None):
        from aiokafka import AIOKafkaProducer

        async def run():
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks=acks,
                                        compression_type=codec,
                                        enable_idempotence=acks == "all")
            await producer.start()
            try:
                futures = [await producer.send(topic, value, key=key, headers=headers,
                                               timestamp_ms=ts, partition=0)
                           for key, value, headers, ts in messages]
                await producer.flush()
                await asyncio.gather(*futures)
            finally:
                await producer.stop()

        asyncio.run(run())

    def consume(self, topic, start="earliest", count=None, timeout=5.0, seek_ts=None):
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def run():
            tp = TopicPartition(topic, 0)
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, auto_offset_reset=start)
            await consumer.start()
            out = []
            try:
                consumer.assign([tp])
                if seek_ts is not None:
                    found = (await consumer.offsets_for_times({tp: seek_ts}))[tp]
                    consumer.seek(tp, found.offset)
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline and (count is None or len(out) < count):
                    batch = await consumer.getmany(tp, timeout_ms=200)
                    for m in batch.get(tp, []):
                        out.append((m.key, m.value, list(m.headers), m.timestamp, m.offset))
            finally:
                await consumer.stop()
            return out

        return asyncio.run(run())


CLIENTS = {"kafka-python": KafkaPython, "confluent-kafka": Confluent, "aiokafka": AioKafka}


def _create(broker, name):
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        admin.close()


def _expected(messages, first_offset=0):
    return [(k, v, h, ts, first_offset + i) for i, (k, v, h, ts) in enumerate(messages)]


@pytest.mark.parametrize("client", CLIENTS)
def test_every_codec_and_acks_setting_reads_back_exactly(broker, client):
    c = CLIENTS[client](broker.bootstrap)
    topic = f"pc-{client}"
    _create(broker, topic)
    sent = []
    for codec in CODECS[client]:
        for acks in ACKS[client]:
            messages = _messages(f"{codec}-{acks}", 10)
            c.produce(topic, messages, acks=acks, codec=codec)
            sent += messages
    got = c.consume(topic, count=len(sent), timeout=20)
    assert got == _expected(sent)


def _wait_for_a_parked_fetch(node, topic, within_s=20.0):
    """Until a Fetch for partition 0 of ``topic`` waits on the broker: the
    consumer that sent it knows its position (bounded)."""
    waiters = node.broker.fetch_waiters
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if node.call(lambda: waiters.parked_on((topic, 0))):
            return
        time.sleep(0.02)
    raise AssertionError(f"no consumer of {topic} waited within {within_s} s")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_consumer_at_latest_gets_only_what_comes_after(broker, client):
    c = CLIENTS[client](broker.bootstrap)
    topic = f"pc-latest-{client}"
    _create(broker, topic)
    old = _messages("old")
    c.produce(topic, old)
    new = [(k, v.replace(b"old", b"new"), h, ts + 100_000) for k, v, h, ts in _messages("old", 5)]
    got = {}
    reader = threading.Thread(target=lambda: got.setdefault(
        "messages", c.consume(topic, start="latest", count=len(new), timeout=20)))
    reader.start()
    try:
        # Positioned at the end of the old records and waiting for more.
        _wait_for_a_parked_fetch(broker, topic)
        c.produce(topic, new)
    finally:
        reader.join(30)
    # Exactly the new records, at the offsets after the old ones; none of the old.
    assert got["messages"] == _expected(new, first_offset=len(old))


@pytest.mark.parametrize("client", CLIENTS)
def test_seek_by_timestamp(broker, client):
    c = CLIENTS[client](broker.bootstrap)
    topic = f"pc-seek-{client}"
    _create(broker, topic)
    messages = _messages("seek")
    c.produce(topic, messages)
    from_ts = c.consume(topic, count=5, seek_ts=BASE_TS + 15_000, timeout=10)
    assert from_ts == _expected(messages)[15:]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_waiting_consumer_gets_a_new_message(broker, client):
    c = CLIENTS[client](broker.bootstrap)
    topic = f"pc-wait-{client}"
    _create(broker, topic)
    got = {}
    reader = threading.Thread(target=lambda: got.setdefault(
        "messages", c.consume(topic, start="earliest", count=1, timeout=20)))
    reader.start()
    time.sleep(1.0)  # the consumer is polling an empty partition by now
    message = (b"k", b"arrives", [("h", b"1")], BASE_TS)
    c.produce(topic, [message])
    reader.join(30)
    assert got["messages"] == _expected([message])


@pytest.mark.parametrize("client", CLIENTS)
def test_everything_reads_back_after_a_restart(make_broker, tmp_path, client):
    data_dir = tmp_path / "restart"
    node = make_broker(data_dir)
    c = CLIENTS[client](node.bootstrap)
    _create(node, "pc-restart")
    messages = _messages("restart", 30)
    c.produce("pc-restart", messages[:15], codec=CODECS[client][1])
    c.produce("pc-restart", messages[15:])
    node.stop()
    node = make_broker(data_dir)
    c = CLIENTS[client](node.bootstrap)
    assert c.consume("pc-restart", count=30, timeout=15) == _expected(messages)


@pytest.mark.parametrize("api_version", [(0, 10, 1), (0, 9)], ids=["magic-1", "magic-0"])
def test_kafka_python_pinned_to_an_old_protocol(broker, api_version):
    """Old tutorials pin ``api_version``: kafka-python then produces legacy message
    sets (Produce v2 with magic 1, or v1 with magic 0) and fetches them back in
    that format (Fetch v2 or v1, down-converted and padded as Kafka sends it)."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    topic = "pc-old-%d-%d" % api_version[:2]
    _create(broker, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version,
                             compression_type="gzip")
    for i in range(5):
        producer.send(topic, b"old-%d" % i, key=b"k", partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, 0)])
    assert [(m.offset, m.key, m.value) for m in consumer] == [
        (i, b"k", b"old-%d" % i) for i in range(5)]
    consumer.close()
