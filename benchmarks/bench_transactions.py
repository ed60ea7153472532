"""Transactions (issue #23) on kcoord next to Apache Kafka 4.4, in the same run,
with the same client (confluent-kafka, librdkafka's defaults but for the
settings named here).  Each broker starts from an empty data dir with kcoord's
development defaults (Kafka as ``tests/reference/kafka.py`` runs it); kcoord is
measured first, then Kafka, never both at once.

Figures per broker:

* transactions per second, each transaction 10 records of 100 B: one
  transactional producer, ``begin_transaction``, 10 ``produce``,
  ``commit_transaction``, back to back, to 1 partition and spread over 8
  partitions (every transaction touches all 8); each run bounded by a count and
  by a time, runs of the two in turn, the best run (Kafka's rate still moves
  from run to run by a quarter where kcoord's stays within 5%).  Before the first,
  each broker gets 30 s of such transactions, not counted (not in quick mode):
  Kafka's JVM needs about that long to reach its steady rate (its first
  seconds run at a fifth of it); kcoord's rate does not move;
* reading one partition's log of transactional data (transactions of 100
  records of 1 KiB, every 10th one aborted) from its start to its end with
  ``isolation.level=read_committed`` and with ``read_uncommitted``: MB/s =
  the log's record values (aborted ones included, the same for both) over the
  time to read through it, the consumer already connected to the partition's
  leader; after a first read not counted, the runs of the two alternate
  (median of each);
* commit-to-visible latency, p50 and p99: a read_committed consumer already at
  the partition's end polls in a thread of its own (its fetch parked, the
  client's default ``fetch.wait.max.ms=500``); the producer produces a
  transaction of 10 records, flushes them (in the log, not yet visible), and
  commits; the time from ``commit_transaction()`` returning, and from it being
  called, to the consumer receiving the 10th record.  The first can be a little
  below zero: the records may reach the consumer before the commit's answer
  reaches the producer (on both brokers).

The same transactions are also run against ``commit_ceiling.TransactionCeiling``,
a server that only answers (no coordinator, no log): the most this client can
reach on this machine, printed with each broker's share of it, and the share
that twice Kafka's rate would be.

Ratios are kcoord's figure over Kafka's (for latency, lower is better).  Goals
(issue #23): transactions/s at least 2x Kafka's; read_committed at least 0.9 of
read_uncommitted.  Kafka's figures are reported unavailable, with the reason,
without Java 17+ or Maven.  Quick mode (``KCOORD_BENCH_QUICK=1``) has small
counts and no warm-up, so Kafka's rates there are those of a cold JVM.
``KCOORD_BENCH_TRACE=1`` adds each run's figures and the brokers' CPU per
transaction.  Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import uuid

from benchmarks.bench_server import broker_server, cpu_seconds
from tests.reference import kafka

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
TRACE = bool(os.environ.get("KCOORD_BENCH_TRACE"))
TXN_RECORDS = 10
TXN_RECORD_SIZE = 100
TXN_MAX = 100 if QUICK else 3_000          # transactions per run, at most ...
TXN_SECONDS = 0.5 if QUICK else 5.0        # ... and seconds per run, at most
TXN_WARMUP = 3                             # transactions not counted at each run's start
WARM_UP_SECONDS = 0.0 if QUICK else 30.0   # each broker's warm-up before the first run ...
WARM_UP_MAX = 20_000                       # ... bounded in transactions too
TXN_REPEATS = 1 if QUICK else 3
READ_TXNS = 20 if QUICK else 1_000         # transactions in the read_committed log
READ_TXN_RECORDS = 100
READ_RECORD_SIZE = 1_024
ABORT_EVERY = 10                           # every 10th transaction aborted
READ_REPEATS = 1 if QUICK else 7
LATENCY_SAMPLES = 10 if QUICK else 100
TIMEOUT_S = 30                             # any one client call
READ_DEADLINE_S = 120                      # one read of the log


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(bootstrap: str, partitions: int) -> str:
    """A new topic of ``partitions``, once the broker's metadata lists all of them."""
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = _name(f"bench-txn-{partitions}p")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:  # Kafka's metadata cache catches up a little later
        listed = admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        if listed is not None and listed.error is None and len(listed.partitions) == partitions:
            return topic
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} not listed with {partitions} partitions")


def _txn_producer(bootstrap: str):
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": _name("bench-txn")})
    producer.init_transactions(TIMEOUT_S)
    return producer


def _transaction(producer, topic: str, partitions: int, value: bytes) -> None:
    producer.begin_transaction()
    for i in range(TXN_RECORDS):
        producer.produce(topic, value, partition=i % partitions)
    producer.commit_transaction(TIMEOUT_S)


def _warm_up(bootstrap: str) -> None:
    """Transactions to 1 and to 8 partitions in turn for WARM_UP_SECONDS, not counted:
    Kafka's JVM takes tens of seconds of them to reach its steady rate."""
    if WARM_UP_SECONDS <= 0:
        return
    value = os.urandom(TXN_RECORD_SIZE // 2).hex().encode()
    producer = _txn_producer(bootstrap)
    topics = {partitions: _topic(bootstrap, partitions) for partitions in (1, 8)}
    deadline = time.perf_counter() + WARM_UP_SECONDS
    done = 0
    while done < WARM_UP_MAX and time.perf_counter() < deadline:
        for partitions, topic in topics.items():
            _transaction(producer, topic, partitions, value)
            done += 1
    producer.flush(TIMEOUT_S)


def _txn_rate(bootstrap: str, partitions: int, pid: int | None,
              topic: str | None = None) -> tuple[float, float | None]:
    """Transactions per second of one producer, each of 10 records over ``partitions``
    (of ``topic``, else of a new topic), and the broker's CPU seconds per
    transaction (None without ``pid`` or where /proc cannot say)."""
    topic = topic or _topic(bootstrap, partitions)
    producer = _txn_producer(bootstrap)
    value = os.urandom(TXN_RECORD_SIZE // 2).hex().encode()
    for _ in range(TXN_WARMUP):
        _transaction(producer, topic, partitions, value)
    done = 0
    cpu_before = None if pid is None else cpu_seconds(pid)
    began = time.perf_counter()
    deadline = began + TXN_SECONDS
    while done < TXN_MAX and time.perf_counter() < deadline:
        _transaction(producer, topic, partitions, value)
        done += 1
    elapsed = time.perf_counter() - began
    cpu_after = None if pid is None else cpu_seconds(pid)
    producer.flush(TIMEOUT_S)
    cpu = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) / done
    return done / elapsed, cpu


def _fill(bootstrap: str) -> tuple[str, int, int]:
    """One partition of READ_TXNS transactions, every ABORT_EVERY-th aborted:
    (topic, records committed, records in the log)."""
    topic = _topic(bootstrap, 1)
    producer = _txn_producer(bootstrap)
    value = os.urandom(READ_RECORD_SIZE // 2).hex().encode()
    committed = 0
    deadline = time.monotonic() + READ_DEADLINE_S
    for t in range(READ_TXNS):
        if time.monotonic() > deadline:
            raise RuntimeError(f"filling the log: {t} of {READ_TXNS} transactions in "
                               f"{READ_DEADLINE_S} s")
        producer.begin_transaction()
        for _ in range(READ_TXN_RECORDS):
            while True:
                try:
                    producer.produce(topic, value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.01)
        if t % ABORT_EVERY == ABORT_EVERY - 1:
            producer.flush(TIMEOUT_S)  # in the log: abort_transaction drops what is not sent
            producer.abort_transaction(TIMEOUT_S)
        else:
            producer.commit_transaction(TIMEOUT_S)
            committed += READ_TXN_RECORDS
    return topic, committed, READ_TXNS * READ_TXN_RECORDS


def _read(bootstrap: str, topic: str, isolation: str, expected: int) -> float:
    """Seconds for a consumer of ``isolation`` to read the partition from its start
    until it has the ``expected`` records."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                         "enable.auto.commit": False, "isolation.level": isolation})
    try:
        # Connected to the partition's leader before the clock starts: what is timed
        # is reading, not the client's start.
        consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S, cached=False)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        seen = 0
        began = time.perf_counter()
        deadline = began + READ_DEADLINE_S
        while seen < expected and time.perf_counter() < deadline:
            for message in consumer.consume(num_messages=min(10_000, expected - seen),
                                            timeout=0.1):
                if not message.error():
                    seen += 1
        elapsed = time.perf_counter() - began
    finally:
        consumer.close()
    if seen != expected:
        raise RuntimeError(f"{isolation}: read {seen} of {expected} records")
    return elapsed


def _read_rates(bootstrap: str) -> dict[str, float]:
    topic, committed, total = _fill(bootstrap)
    log_mb = total * READ_RECORD_SIZE / 1e6
    expected = {"read_uncommitted": total, "read_committed": committed}
    _read(bootstrap, topic, "read_committed", committed)  # a first read, not counted
    times: dict[str, list[float]] = {iso: [] for iso in expected}
    order = list(expected)
    for _ in range(READ_REPEATS):  # alternated (AB BA ...), so that both see the same machine
        for iso in order:
            times[iso].append(_read(bootstrap, topic, iso, expected[iso]))
        order.reverse()
    return {f"mbps {iso}": log_mb / statistics.median(t) for iso, t in times.items()}


def _latency(bootstrap: str) -> dict[str, float]:
    """Commit to visible, from commit_transaction() returning and from it being called (ms)."""
    from confluent_kafka import Consumer, TopicPartition
    topic = _topic(bootstrap, 1)
    producer = _txn_producer(bootstrap)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, 0)])  # a new topic: its end
    arrived: dict[int, float] = {}
    arrival = threading.Condition()
    stop = threading.Event()
    last = str(TXN_RECORDS - 1).encode()

    failed: list[BaseException] = []

    def poll() -> None:
        try:
            while not stop.is_set():
                message = consumer.poll(0.05)
                if message is None or message.error():
                    continue
                sample, _, index = message.value().rpartition(b"-")
                if index == last:  # the transaction's last record: all of it is visible
                    now = time.perf_counter()
                    with arrival:
                        arrived[int(sample)] = now
                        arrival.notify_all()
        except BaseException as exc:  # reported by the producer's side
            failed.append(exc)
            with arrival:
                arrival.notify_all()

    def one(sample: int) -> tuple[float, float]:
        producer.begin_transaction()
        for i in range(TXN_RECORDS):
            producer.produce(topic, b"%d-%d" % (sample, i), partition=0)
        producer.flush(TIMEOUT_S)  # in the log, not yet visible: the commit alone is timed
        called = time.perf_counter()
        producer.commit_transaction(TIMEOUT_S)
        returned = time.perf_counter()
        with arrival:
            if not arrival.wait_for(lambda: sample in arrived or failed, TIMEOUT_S):
                raise RuntimeError(f"transaction {sample} not visible in {TIMEOUT_S} s")
            if failed:
                raise RuntimeError("the consumer's thread failed") from failed[0]
            seen = arrived[sample]
        return seen - returned, seen - called

    reader = threading.Thread(target=poll, name="bench-txn-reader", daemon=True)
    reader.start()
    try:
        one(-1)  # the consumer is positioned and has received once
        from_return, from_call = [], []
        for sample in range(LATENCY_SAMPLES):
            time.sleep(0.005)  # the consumer's fetch is parked again by now
            after_return, after_call = one(sample)
            from_return.append(after_return)
            from_call.append(after_call)
    finally:
        stop.set()
        reader.join(10)
        consumer.close()
        producer.flush(TIMEOUT_S)
    figures = {}
    for key, samples in (("return", from_return), ("call", from_call)):
        samples.sort()
        if TRACE:
            print(f"    ({bootstrap} commit {key} to visible: min {samples[0] * 1000:.2f}, "
                  f"max {samples[-1] * 1000:.2f} ms, "
                  f"{sum(s < 0 for s in samples)} of {len(samples)} below 0)")
        figures[f"p50 {key}"] = statistics.median(samples) * 1000
        figures[f"p99 {key}"] = samples[int(len(samples) * 0.99) - 1] * 1000
    return figures


def _measure(bootstrap: str, pid: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    _warm_up(bootstrap)
    runs: dict[int, list[tuple[float, float | None]]] = {1: [], 8: []}
    for _ in range(TXN_REPEATS):  # 1 and 8 partitions in turn, so that both see the same JVM
        for partitions in runs:
            runs[partitions].append(_txn_rate(bootstrap, partitions, pid))
    for partitions, done in runs.items():
        if TRACE:
            print(f"    ({bootstrap} {partitions} partitions: txn/s "
                  f"{', '.join(f'{rate:,.0f}' for rate, _ in done)}; broker CPU per transaction "
                  f"{', '.join('?' if cpu is None else f'{cpu * 1e6:,.0f}' for _, cpu in done)}"
                  f" µs)")
        figures[f"txn/s {partitions}"] = max(rate for rate, _ in done)
    figures.update(_read_rates(bootstrap))
    figures.update(_latency(bootstrap))
    return figures


def _ceiling() -> dict[int, float]:
    """Transactions per second against a server that only answers, for 1 and 8
    partitions: the client's own ceiling (best of TXN_REPEATS, as for the brokers)."""
    from benchmarks.commit_ceiling import TransactionCeiling
    rates = {}
    for partitions in (1, 8):
        server = TransactionCeiling("ceiling-topic", partitions)
        with server.running():
            rates[partitions] = max(
                _txn_rate(server.bootstrap, partitions, None, topic=server.topic)[0]
                for _ in range(TXN_REPEATS))
    return rates


def _kcoord() -> dict[str, float]:
    with broker_server() as (port, pid):
        return _measure(f"127.0.0.1:{port}", pid)


def _kafka() -> tuple[dict[str, float] | None, str]:
    """Kafka's figures, or None and why they are unavailable."""
    missing = kafka.missing_requirements()
    if missing:
        return None, missing
    try:
        kafka.resolve(kafka.MAIN_VERSION)
    except kafka.ReferenceUnavailable as exc:
        return None, str(exc).splitlines()[0]
    broker = kafka.KafkaBroker(kafka.MAIN_VERSION)
    broker.start()
    try:
        return _measure(broker.bootstrap, broker.proc.pid), ""
    finally:
        broker.stop()


def run() -> None:
    began = time.perf_counter()
    ours = _kcoord()
    theirs, why_not = _kafka()
    ceiling = _ceiling()
    print(f"transactions: confluent-kafka through kcoord and Apache Kafka {kafka.MAIN_VERSION} "
          f"(same machine, same run; ratio = kcoord / Kafka)")
    if theirs is None:
        print(f"  (Apache Kafka unavailable: {why_not})")

    def row(label: str, key: str, fmt, goal: str = "") -> None:
        line = f"  {label:<40} kcoord {fmt(ours[key])}"
        if theirs is None:
            line += "   Kafka      n/a"
        else:
            ratio = ours[key] / theirs[key] if theirs[key] else float("nan")
            line += f"   Kafka {fmt(theirs[key])}   ratio {ratio:6.2f}"
        print(line + (f"   {goal}" if goal else ""))

    rate = lambda v: f"{v:8,.0f} txn/s"  # noqa: E731
    ms = lambda v: f"{v:8.1f} ms"  # noqa: E731
    mbps = lambda v: f"{v:8.1f} MB/s"  # noqa: E731
    limit = f"at most {TXN_MAX:,} or {TXN_SECONDS:g} s, best of {TXN_REPEATS}"
    if WARM_UP_SECONDS:
        limit += f", after {WARM_UP_SECONDS:g} s of transactions not counted"
    elif theirs is not None:
        limit += "; Kafka's JVM not warmed up: its rates are far below its steady ones"
    print(f"  transactions of {TXN_RECORDS} x {TXN_RECORD_SIZE} B, one producer "
          f"({limit}):")
    row("transactions/s, 1 partition", "txn/s 1", rate, "goal >= 2")
    row("transactions/s, 8 partitions", "txn/s 8", rate, "goal >= 2")
    for partitions in (1, 8):
        line = (f"  against a server that only answers, {partitions} partition"
                f"{'s' if partitions > 1 else ''}: {ceiling[partitions]:,.0f} txn/s (the "
                f"client's ceiling); kcoord {ours[f'txn/s {partitions}'] / ceiling[partitions]:.2f}"
                f" of it")
        if theirs is not None:
            kafka_rate = theirs[f"txn/s {partitions}"]
            line += (f", Kafka {kafka_rate / ceiling[partitions]:.2f}, twice Kafka's rate "
                     f"{2 * kafka_rate / ceiling[partitions]:.2f}")
        print(line)
    print(f"  commit to visible, read_committed consumer waiting at the end "
          f"({LATENCY_SAMPLES} transactions):")
    row("latency p50, from commit returning", "p50 return", ms)
    row("latency p99, from commit returning", "p99 return", ms)
    row("latency p50, from commit called", "p50 call", ms)
    row("latency p99, from commit called", "p99 call", ms)
    records = READ_TXNS * READ_TXN_RECORDS
    print(f"  reading a log of {READ_TXNS:,} transactions ({records:,} x {READ_RECORD_SIZE:,} B, "
          f"every {ABORT_EVERY}th aborted) from start to end, MB/s of the whole log, "
          f"median of {READ_REPEATS}:")
    row("read_uncommitted", "mbps read_uncommitted", mbps)
    row("read_committed", "mbps read_committed", mbps)
    for name, figures in (("kcoord", ours), ("Kafka", theirs)):
        if figures is None:
            continue
        share = figures["mbps read_committed"] / figures["mbps read_uncommitted"]
        print(f"  read_committed / read_uncommitted, {name:<6} {share:5.2f}"
              + ("   goal >= 0.9" if name == "kcoord" else ""))
    if TRACE:
        print(f"    (transactions section: {time.perf_counter() - began:.1f} s)")
    print()


if __name__ == "__main__":
    run()
