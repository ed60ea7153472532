"""kcoord next to Apache Kafka on the same machine, in the same run.

Both brokers start from an empty data dir with kcoord's development defaults
(Kafka as ``tests/reference/kafka.py`` runs it: a one-node KRaft broker with
kafka-run-class.sh's JVM options). Figures: process start to first answered
request, resident memory when idle, and ApiVersions / Metadata requests per
second from the same load client (``bench_server.load``). Ratios are kcoord's
figure over Kafka's. Skipped, with a line saying why, without Java 17+ or Maven.
"""

from __future__ import annotations

import os
import tempfile
import time

from benchmarks.bench_server import (
    PARTITIONS, TOPICS, call, load, request_frame, spawn_broker, stop_broker,
)
from kcoord.broker.healthcheck import probe
from kcoord.protocol.messages.api_versions import API_VERSIONS
from kcoord.protocol.messages.create_topics import CREATE_TOPICS
from kcoord.protocol.messages.metadata import METADATA
from tests.reference import kafka

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
IDLE_SECONDS = 1.0 if QUICK else 3.0


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _load_both(port: int, pid: int) -> dict[str, float]:
    created = call(port, CREATE_TOPICS, 4, {"topics": [
        {"name": f"bench-{i}", "num_partitions": PARTITIONS, "replication_factor": 1,
         "assignments": [], "configs": []} for i in range(TOPICS)], "timeout_ms": 30_000})
    assert all(t["error_code"] == 0 for t in created["topics"]), created
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # Kafka's metadata cache catches up a little later
        listed = call(port, METADATA, 1, {"topics": None})["topics"]
        if sum(t["name"].startswith("bench-") for t in listed) == TOPICS:
            break
        time.sleep(0.05)
    api_versions = request_frame(API_VERSIONS, 3, {"client_software_name": "kcoord-bench",
                                                   "client_software_version": "1"})
    metadata = request_frame(METADATA, 1, {"topics": None})
    return {"api_versions": load(port, api_versions, pid)["rate"],
            "metadata": load(port, metadata, pid)["rate"]}


def _kcoord() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-") as data_dir:
        began = time.perf_counter()
        proc, event = spawn_broker(data_dir)
        try:
            probe("127.0.0.1", event["port"])
            figures = {"start": time.perf_counter() - began}
            time.sleep(IDLE_SECONDS)
            figures["rss"] = _rss(proc.pid)
            figures.update(_load_both(event["port"], proc.pid))
            return figures
        finally:
            stop_broker(proc)


def with_kafka(measure, extra: dict | None = None) -> dict[str, float]:
    """``measure(broker)`` on a fresh Apache Kafka 4.4 (stopped afterwards)."""
    broker = kafka.KafkaBroker(kafka.MAIN_VERSION, extra=extra)
    broker.start()
    try:
        return measure(broker)
    finally:
        broker.stop()


def kafka_ready(what: str) -> bool:
    """Java and Maven there and Kafka 4.4 resolved; else a line saying why not."""
    missing = kafka.missing_requirements()
    if missing:
        print(f"{what}: skipped ({missing})\n")
        return False
    kafka.resolve(kafka.MAIN_VERSION)
    return True


def _measure_kafka(broker) -> dict[str, float]:
    figures = {"start": broker.started_in}
    time.sleep(IDLE_SECONDS)
    figures["rss"] = broker.rss_bytes()
    figures.update(_load_both(broker.port, broker.proc.pid))
    return figures


def run() -> None:
    if not kafka_ready("kcoord next to Apache Kafka"):
        return
    ours, theirs = _kcoord(), with_kafka(_measure_kafka)
    print(f"kcoord next to Apache Kafka {kafka.MAIN_VERSION} (same machine, same run; "
          f"ratio = kcoord / Kafka)")
    rows = [
        ("process start to first answer", "start", lambda v: f"{v * 1000:8.0f} ms"),
        (f"resident memory, idle {IDLE_SECONDS:g} s", "rss", lambda v: f"{v / 2**20:8.1f} MiB"),
        ("ApiVersions v3", "api_versions", lambda v: f"{v:8,.0f} req/s"),
        (f"Metadata v1, {TOPICS} topics x {PARTITIONS}", "metadata",
         lambda v: f"{v:8,.0f} req/s"),
    ]
    for label, key, fmt in rows:
        ratio = ours[key] / theirs[key] if theirs[key] else float("nan")
        print(f"  {label:<34} kcoord {fmt(ours[key])}   Kafka {fmt(theirs[key])}   "
              f"ratio {ratio:6.2f}")
    print()
