"""A Kafka Streams application (``java/WordCountApp.java``: Kafka Streams' word
count, a repartition by word) run against kcoord and against Kafka 4.4 with
the same input, at-least-once and exactly-once (``exactly_once_v2``: every
task's output, changelog and input offsets in one transaction, read back by a
read_committed consumer): it reaches RUNNING on both, counts every word right
on both, and trims its repartition topic with DeleteRecords (Kafka Streams
purges what it has consumed), so the topic's log start offset moves on kcoord
as it does on Kafka."""

from __future__ import annotations

import collections
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from kcoord.protocol.client import WireClient
from tests.reference.fixtures import compiled_java

APP = Path(__file__).with_name("java") / "WordCountApp.java"
LINES = [f"the quick brown fox {i % 7} jumps over the lazy dog {i % 3}" for i in range(300)]


@pytest.fixture(scope="module")
def app_classpath(tmp_path_factory) -> str:
    return compiled_java(APP, tmp_path_factory.mktemp("wordcount"))


def _create(bootstrap: str, *topics: str) -> None:
    with WireClient.to(bootstrap) as client:
        answer = client.call(19, 4, {"topics": [
            {"name": t, "num_partitions": 2, "replication_factor": 1, "assignments": [],
             "configs": []} for t in topics], "timeout_ms": 10000, "validate_only": False})
    assert [t["error_code"] for t in answer["topics"]] == [0] * len(topics), answer


def _earliest(bootstrap: str, topic: str, partitions: int = 2) -> list[int]:
    with WireClient.to(bootstrap) as client:
        answer = client.call(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": -2}
                for p in range(partitions)]}]})
    parts = answer["topics"][0]["partitions"]
    assert all(p["error_code"] == 0 for p in parts), parts
    return [p["offset"] for p in sorted(parts, key=lambda p: p["partition_index"])]


def _counts(bootstrap: str, topic: str, expected: dict[str, int], timeout: float) -> dict:
    """The last count the application wrote for each word, once they are all there
    (committed: what an exactly-once application wrote counts once it commits)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    latest: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while latest != expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                latest[message.key().decode()] = int.from_bytes(message.value(), "big")
    finally:
        consumer.close()
    return latest


def _run(bootstrap: str, classpath: str, tmp: Path, tag: str,
         guarantee: str = "at_least_once") -> dict:
    source, sink, app_id = f"wc-in-{tag}", f"wc-out-{tag}", f"wordcount-{tag}"
    _create(bootstrap, source, sink)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, line in enumerate(LINES):
        producer.produce(source, line.encode(), key=str(i).encode())
    assert producer.flush(10) == 0
    expected = collections.Counter(w for line in LINES for w in line.split())
    proc = subprocess.Popen(
        ["java", "-Xmx512M", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "-cp", classpath, "WordCountApp", bootstrap, app_id, source, sink, "90",
         str(tmp / f"state-{tag}"), guarantee],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        counts = _counts(bootstrap, sink, dict(expected), timeout=90)
        repartition = f"{app_id}-by-word-repartition"
        deadline = time.monotonic() + 30
        while sum(_earliest(bootstrap, repartition)) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        trimmed = _earliest(bootstrap, repartition)
    finally:
        proc.terminate()
        output = proc.communicate(timeout=60)[0]
    return {"counts": counts, "expected": dict(expected), "trimmed": trimmed,
            "states": [line.split()[1] for line in output.splitlines()
                       if line.startswith("STATE ")], "output": output}


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_word_count_runs_counts_and_purges_its_repartition_topic_as_on_kafka(
        app_classpath, make_broker, scratch_kafka, tmp_path, guarantee):
    ours = _run(make_broker().bootstrap, app_classpath, tmp_path, f"kcoord-{guarantee}",
                guarantee)
    theirs = _run(scratch_kafka.bootstrap, app_classpath, tmp_path,
                  f"kafka-{guarantee}-{time.time_ns()}", guarantee)
    for side, run in (("Kafka", theirs), ("kcoord", ours)):
        assert "RUNNING" in run["states"] and "ERROR" not in run["states"], (side, run["output"])
        assert run["counts"] == run["expected"], side
        # DeleteRecords moved the repartition topic's start past what was consumed
        assert sum(run["trimmed"]) > 0, (side, run["trimmed"])
