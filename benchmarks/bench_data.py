"""The data plane as CI suites use it: confluent-kafka (librdkafka) producing and
consuming through kcoord, next to librdkafka's own mock cluster
(``test.mock.num.brokers``) and, where Java 17+ and Maven are present, next to
Apache Kafka, with the same client and settings in the same run.

Figures per broker:

* producing 200,000 messages of 100 B and 10,000 of 10 KiB (one partition,
  default producer settings, ``linger.ms=5``): MB/s until every delivery
  report is in;
* consuming them from the start: MB/s;
  (each the median of five runs, a new topic each);
* end-to-end latency, p50 and p99 of 100 messages: one message at a time to a
  consumer already waiting on the partition (its fetch is parked, with the
  client's default ``fetch.wait.max.ms=500``), from ``produce`` to the consumer
  returning it; this is the long-poll wake-up time (the mock cluster answers a
  parked fetch only when the wait ends);
* for kcoord, the worst wait of another client (ApiVersions back to back)
  while the producer runs, in a produce run of its own; goal: under 50 ms.

Goals (issue #9): produce at least half the mock cluster's MB/s and consume at
least as fast.  Quick mode (``KCOORD_BENCH_QUICK=1``) leaves Kafka out.
Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import threading
import time
import uuid

from benchmarks.bench_server import broker_server
from benchmarks.bench_topics import LagProbe

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
LOADS = [(20_000, 100), (1_000, 10_240)] if QUICK else [(200_000, 100), (10_000, 10_240)]
LATENCY_SAMPLES = 10 if QUICK else 100
REPEATS = 1 if QUICK else 5  # throughput figures are the median of this many runs


def _producer(bootstrap: str, extra: dict | None = None):
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **(extra or {})})


def _consumer(bootstrap: str, topic: str, extra: dict | None = None):
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 500,
                         **(extra or {})})
    consumer.assign([TopicPartition(topic, 0, 0)])
    return consumer


def _produce(bootstrap: str, topic: str, count: int, size: int, extra=None) -> float:
    producer = _producer(bootstrap, extra)
    value = os.urandom(size // 2).hex().encode()[:size]
    failed = []
    began = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0,
                                 on_delivery=lambda err, _m: err and failed.append(err))
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    elapsed = time.perf_counter() - began
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed, first: {failed[0]}")
    return count * size / elapsed / 1e6


def _consume(bootstrap: str, topic: str, count: int, size: int, extra=None) -> float:
    """MB/s reading the partition from its start.  librdkafka's mock cluster keeps
    only the last few MB of a partition, so what is read is what is there."""
    from confluent_kafka import TopicPartition
    consumer = _consumer(bootstrap, topic, extra)
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.assign([TopicPartition(topic, 0, low)])
    count = high - low
    seen = 0
    began = time.perf_counter()
    deadline = began + 120
    while seen < count and time.perf_counter() < deadline:
        # Asking for no more than is left: consume() returns as soon as it has them.
        # A short timeout: librdkafka sometimes waits it out with messages queued.
        for message in consumer.consume(num_messages=min(10_000, count - seen), timeout=0.1):
            if not message.error():
                seen += 1
    elapsed = time.perf_counter() - began
    consumer.close()
    if seen < count:
        raise RuntimeError(f"consumed {seen} of {count}")
    return count * size / elapsed / 1e6


def _latency(bootstrap: str, extra=None) -> tuple[float, float]:
    topic = f"bench-latency-{uuid.uuid4().hex[:8]}"
    producer = _producer(bootstrap, {**(extra or {}), "linger.ms": 0})
    producer.produce(topic, b"warm-up", partition=0)
    producer.flush(30)
    consumer = _consumer(bootstrap, topic, extra)
    while not [m for m in consumer.consume(num_messages=1, timeout=1) if not m.error()]:
        pass
    samples = []
    for _ in range(LATENCY_SAMPLES):
        time.sleep(0.005)  # the consumer's fetch is parked again by now
        began = time.perf_counter()
        producer.produce(topic, b"ping", partition=0)
        producer.poll(0)
        while True:
            got = [m for m in consumer.consume(num_messages=1, timeout=1) if not m.error()]
            if got:
                break
        samples.append(time.perf_counter() - began)
    consumer.close()
    producer.flush(10)
    samples.sort()
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.99) - 1] * 1000


def _measure(bootstrap: str, extra=None, port: int | None = None) -> dict:
    figures = {}
    for count, size in LOADS:
        began = time.perf_counter()
        produced, consumed = [], []
        for _ in range(REPEATS):
            topic = f"bench-data-{size}-{uuid.uuid4().hex[:8]}"
            produced.append(_produce(bootstrap, topic, count, size, extra))
            consumed.append(_consume(bootstrap, topic, count, size, extra))
        figures[f"produce {size}"] = statistics.median(produced)
        figures[f"consume {size}"] = statistics.median(consumed)
        if port is not None:
            # The other client's worst wait, in a run of its own: its requests back
            # to back take a core's worth of CPU, which the figures above leave out.
            probe = LagProbe(port)
            probe.start()
            try:
                _produce(bootstrap, f"bench-lag-{size}-{uuid.uuid4().hex[:8]}", count, size, extra)
            finally:
                probe.stop.set()
                probe.join(60)
                figures[f"lag {size}"] = probe.worst * 1000
        if os.environ.get("KCOORD_BENCH_TRACE"):
            print(f"    ({bootstrap} {size} B: {time.perf_counter() - began:.1f} s)")
    began = time.perf_counter()
    figures["p50"], figures["p99"] = _latency(bootstrap, extra)
    if os.environ.get("KCOORD_BENCH_TRACE"):
        print(f"    ({bootstrap} latency: {time.perf_counter() - began:.1f} s)")
    return figures


@contextlib.contextmanager
def mock_cluster():
    """librdkafka's mock cluster lives in a client: a keeper producer starts it and
    its log line names the address the other clients use."""
    from confluent_kafka import Producer
    found = threading.Event()
    address = []

    class Catch:
        def log(self, _level, message, *args, **kwargs):
            text = message % args if args else str(message)
            m = re.search(r"replaced with (\S+)", text)
            if m:
                address.append(m.group(1).rstrip(","))
                found.set()

    keeper = Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "unused:1"},
                      logger=Catch())
    keeper.poll(0.5)
    if not found.wait(10):
        raise RuntimeError("the mock cluster did not say where it listens")
    try:
        yield address[0]
    finally:
        keeper.flush(1)


def _mock() -> dict:
    with mock_cluster() as address:
        return _measure(address)


def on_kafka(measure, prepare=None) -> dict | None:
    """``measure(bootstrap)`` on Apache Kafka 4.x (the full run only, and where Java
    and Maven are there); ``prepare(broker)`` first, if given."""
    from tests.reference import kafka
    if QUICK:
        print("  (Apache Kafka: in the full run only)")
        return None
    missing = kafka.missing_requirements()
    if missing:
        print(f"  (Apache Kafka skipped: {missing})")
        return None
    kafka.resolve(kafka.MAIN_VERSION)
    broker = kafka.KafkaBroker(kafka.MAIN_VERSION)
    broker.start()
    try:
        if prepare is not None:
            prepare(broker)
        return measure(broker.bootstrap)
    finally:
        broker.stop()


def _kafka() -> dict | None:
    return on_kafka(_measure)


def run() -> None:
    print("data plane: confluent-kafka through kcoord, librdkafka's mock cluster and Kafka")
    with broker_server() as (port, _pid):
        ours = _measure(f"127.0.0.1:{port}", port=port)
    mock = _mock()
    kafka = _kafka()
    rows = []
    for count, size in LOADS:
        rows.append((f"produce {count:,} x {size:,} B", f"produce {size}", "MB/s"))
        rows.append((f"consume {count:,} x {size:,} B", f"consume {size}", "MB/s"))
    rows += [("end-to-end latency p50", "p50", "ms"), ("end-to-end latency p99", "p99", "ms")]
    for label, key, unit in rows:
        line = f"  {label:<28} kcoord {ours[key]:8.1f} {unit:<4}  mock {mock[key]:8.1f}  " \
               f"(kcoord/mock {ours[key] / mock[key]:5.2f})"
        if kafka:
            line += f"  Kafka {kafka[key]:8.1f}  (kcoord/Kafka {ours[key] / kafka[key]:5.2f})"
        print(line)
    for count, size in LOADS:
        print(f"  worst wait of another client while producing {size:,} B messages: "
              f"{ours[f'lag {size}']:.1f} ms (goal: under 50 ms)")
    print()
