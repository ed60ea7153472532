"""The consumer group protocol (KIP-848) on kcoord next to Apache Kafka 4.4, in
the same run, with the same client (confluent-kafka, ``group.protocol=consumer``):
the time to a first assignment for 1 and for 10 consumers, the rebalance when
1 of 10 leaves, steady heartbeats per second, and the memory 1,000 consumer
groups of 3 members take.  kcoord runs with its development defaults
(heartbeat interval 500 ms, assignment at once), Kafka with its own (5 s, at
most one assignment a second): what a user gets from each out of the box.
Ratios are kcoord's figure over Kafka's.  Skipped, with a line saying why,
without Java 17+ or Maven.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid

from benchmarks.bench_kafka import kafka_ready, with_kafka
from benchmarks.bench_server import call, load, request_frame, spawn_broker, stop_broker
from kcoord.broker.config import DEV_DEFAULTS
from kcoord.broker.healthcheck import probe
from kcoord.protocol.messages.consumer_group_heartbeat import CONSUMER_GROUP_HEARTBEAT
from kcoord.protocol.messages.create_topics import CREATE_TOPICS
from kcoord.protocol.messages.metadata import METADATA
from tests.reference import kafka

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
PARTITIONS = 20
GROUPS = 100 if QUICK else 1_000
DEADLINE_S = 60


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _topic(port: int, name: str) -> None:
    created = call(port, CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": PARTITIONS, "replication_factor": 1,
         "assignments": [], "configs": []}], "timeout_ms": 30_000})
    assert created["topics"][0]["error_code"] == 0, created
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # Kafka's metadata cache catches up a little later
        listed = call(port, METADATA, 1, {"topics": [{"name": name}]})["topics"]
        if listed and listed[0]["error_code"] == 0 and listed[0]["partitions"]:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {name} not listed")


def _consumers(port: int, group: str, count: int) -> list:
    from confluent_kafka import Consumer
    return [Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": group,
                      "group.protocol": "consumer", "enable.auto.commit": False})
            for _ in range(count)]


def _until_owned(consumers, deadline_s: float = DEADLINE_S) -> float:
    """Poll every consumer until the partitions are owned exactly once among them;
    the seconds it took."""
    began = time.perf_counter()
    while time.perf_counter() - began < deadline_s:
        for c in consumers:
            c.poll(0.01)
        owned = [tp.partition for c in consumers for tp in c.assignment()]
        if sorted(owned) == list(range(PARTITIONS)) and \
                all(c.assignment() for c in consumers[:PARTITIONS]):
            return time.perf_counter() - began
    raise RuntimeError(f"not assigned in {deadline_s} s")


def _assignment_times(port: int) -> dict[str, float]:
    topic = f"bench848-{uuid.uuid4().hex[:6]}"
    _topic(port, topic)
    figures = {}
    one = _consumers(port, f"{topic}-one", 1)
    one[0].subscribe([topic])
    figures["first_1"] = _until_owned(one)
    one[0].close()
    ten = _consumers(port, f"{topic}-ten", 10)
    for c in ten:
        c.subscribe([topic])
    figures["first_10"] = _until_owned(ten)
    ten[0].close()
    figures["leave_1_of_10"] = _until_owned(ten[1:])
    for c in ten[1:]:
        c.close()
    return figures


def _join(port: int, group: str, member: str, topic: str) -> dict:
    return call(port, CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": 0,
        "rebalance_timeout_ms": 60_000, "subscribed_topic_names": [topic],
        "topic_partitions": []})


def _heartbeats_and_memory(port: int, pid: int) -> dict[str, float]:
    topic = f"bench848-{uuid.uuid4().hex[:6]}"
    _topic(port, topic)
    joined = _join(port, f"{topic}-hb", "steady", topic)
    steady = request_frame(CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": f"{topic}-hb", "member_id": "steady",
        "member_epoch": joined["member_epoch"], "rebalance_timeout_ms": -1,
        "subscribed_topic_names": None, "topic_partitions": None})
    figures = {"heartbeats": load(port, steady, pid)["rate"]}
    before = _rss(pid)
    for g in range(GROUPS):
        for m in range(3):
            answer = _join(port, f"{topic}-mem-{g}", f"member-{m}", topic)
            assert answer["error_code"] == 0, answer
    time.sleep(1.0)
    figures["memory_per_1000"] = (_rss(pid) - before) * 1000 / GROUPS
    return figures


def _kcoord() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-") as data_dir:
        proc, event = spawn_broker(
            data_dir, "--override", "group.coordinator.rebalance.protocols=classic,consumer")
        try:
            probe("127.0.0.1", event["port"])
            figures = _assignment_times(event["port"])
            figures.update(_heartbeats_and_memory(event["port"], proc.pid))
            return figures
        finally:
            stop_broker(proc)


def _kafka() -> dict[str, float]:
    own = {name: kafka_value for name, (_dev, kafka_value) in DEV_DEFAULTS.items()
           if name.startswith("group.consumer.")}
    return with_kafka(_measure, extra=own)


def _measure(broker) -> dict[str, float]:
    figures = _assignment_times(broker.port)
    figures.update(_heartbeats_and_memory(broker.port, broker.proc.pid))
    return figures


def run() -> None:
    if not kafka_ready("consumer group protocol next to Apache Kafka"):
        return
    ours, theirs = _kcoord(), _kafka()
    print(f"consumer group protocol (KIP-848), kcoord next to Apache Kafka "
          f"{kafka.MAIN_VERSION} (confluent-kafka; kcoord's development defaults, Kafka's "
          f"own; ratio = kcoord / Kafka)")
    seconds = lambda v: f"{v * 1000:8.0f} ms"  # noqa: E731
    rows = [
        (f"first assignment, 1 consumer, {PARTITIONS} partitions", "first_1", seconds,
         "goal <= 0.20"),
        ("first assignment, 10 consumers", "first_10", seconds, "goal <= 0.20"),
        ("rebalance when 1 of 10 leaves", "leave_1_of_10", seconds, "goal <= 0.20"),
        ("steady heartbeats (one member)", "heartbeats", lambda v: f"{v:8,.0f} req/s",
         "goal >= 1"),
        (f"memory per 1,000 groups of 3 ({GROUPS} made)", "memory_per_1000",
         lambda v: f"{v / 2**20:8.2f} MiB", ""),
    ]
    for label, key, fmt, goal in rows:
        ratio = ours[key] / theirs[key] if theirs[key] else float("nan")
        print(f"  {label:<44} kcoord {fmt(ours[key])}   Kafka {fmt(theirs[key])}   "
              f"ratio {ratio:6.2f}   {goal}")
    print()
