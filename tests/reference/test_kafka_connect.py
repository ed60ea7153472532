"""A Kafka Connect worker in distributed mode (Kafka 4.4's ``ConnectDistributed``)
run against kcoord and against Kafka 4.4, with a source connector of its own
(``java/SeqSourceConnector.java``: "seq-0", "seq-1", ... its position kept in
Connect's offsets topic): on both brokers the worker joins its group (Connect's
own protocol), makes its three compacted topics, runs the connector and writes
every record once; stopped and started again, it reads its config and its
source position back from those topics and goes on from where it stopped,
without writing a record twice."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from kcoord.protocol.client import WireClient
from tests.reference import kafka
from tests.reference.fixtures import compiled_java

CONNECTOR = Path(__file__).with_name("java") / "SeqSourceConnector.java"
FIRST, TOTAL = 200, 300
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def worker_classpath(tmp_path_factory) -> str:
    into = tmp_path_factory.mktemp("connector")
    classpath = compiled_java(CONNECTOR, into, resolve=kafka.resolve_connect)
    # found as a plugin by its service manifest (plugin.discovery=service_load),
    # without scanning every jar on the classpath
    services = into / "META-INF" / "services"
    services.mkdir(parents=True)
    (services / "org.apache.kafka.connect.source.SourceConnector").write_text(
        "SeqSourceConnector\n")
    return classpath


class Worker:
    def __init__(self, classpath: str, bootstrap: str, tag: str, folder: Path):
        self.port = kafka.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.properties = folder / f"worker-{tag}.properties"
        self.properties.write_text("\n".join([
            f"bootstrap.servers={bootstrap}",
            f"group.id=connect-{tag}",
            f"config.storage.topic=connect-configs-{tag}",
            f"offset.storage.topic=connect-offsets-{tag}",
            f"status.storage.topic=connect-status-{tag}",
            "config.storage.replication.factor=1",
            "offset.storage.replication.factor=1",
            "status.storage.replication.factor=1",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.storage.StringConverter",
            "offset.flush.interval.ms=500",
            "plugin.discovery=service_load",
            f"listeners=http://127.0.0.1:{self.port}",
            ""]))
        self.classpath = classpath
        self.output = folder / f"worker-{tag}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.output, "a")
        self.proc = subprocess.Popen(
            ["java", "-Xmx384M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", self.classpath,
             "org.apache.kafka.connect.cli.ConnectDistributed", str(self.properties)],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.until(lambda: self.call("GET", "/connectors") is not None, "the worker's REST API")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # a graceful stop: the task's position is committed
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def call(self, method: str, path: str, body=None):
        request = urllib.request.Request(
            self.url + path, method=method, headers={"Content-Type": "application/json"},
            data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                text = answer.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None
        return json.loads(text) if text else {}

    def until(self, check, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not check():
            assert self.proc.poll() is None, f"the worker stopped:\n{self.log()}"
            assert time.monotonic() < deadline, f"{what}: not in {TIMEOUT_S} s\n{self.log()}"
            time.sleep(0.2)

    def running(self, name: str) -> bool:
        status = self.call("GET", f"/connectors/{name}/status")
        return bool(status) and status.get("connector", {}).get("state") == "RUNNING" \
            and [t.get("state") for t in status.get("tasks", [])] == ["RUNNING"]

    def log(self) -> str:
        return self.output.read_text()[-5000:]


def _values(bootstrap: str, topic: str, count: int) -> list[str]:
    """Every value in ``topic``, once ``count`` are there (or the time is up)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value().decode())
        # anything written twice would be there by now too
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            message = consumer.poll(0.3)
            if message is not None and not message.error():
                values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def _configs(bootstrap: str, topic: str) -> dict[str, str]:
    with WireClient.to(bootstrap) as client:
        answer = client.call(32, 4, {"resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": ["cleanup.policy"]}],
            "include_synonyms": False, "include_documentation": False})
    return {c["name"]: c["value"] for c in answer["results"][0]["configs"]}


def _run(bootstrap: str, classpath: str, folder: Path, tag: str) -> dict:
    worker = Worker(classpath, bootstrap, tag, folder)
    topic, name = f"seq-{tag}", f"seq-source-{tag}"
    try:
        worker.start()
        config = {"connector.class": "SeqSourceConnector", "tasks.max": "1", "topic": topic,
                  "count": str(FIRST)}
        assert worker.call("PUT", f"/connectors/{name}/config", config) is not None, \
            worker.log()
        worker.until(lambda: worker.running(name), "the connector RUNNING")
        first = _values(bootstrap, topic, FIRST)
        worker.stop()
        # started again: it reads the connector's config and its position back
        worker.start()
        worker.until(lambda: worker.running(name), "the connector RUNNING after a restart")
        config["count"] = str(TOTAL)
        assert worker.call("PUT", f"/connectors/{name}/config", config) is not None
        every = _values(bootstrap, topic, TOTAL)
        worker.until(lambda: worker.running(name), "the connector RUNNING after its change")
        policies = {kind: _configs(bootstrap, f"connect-{kind}-{tag}")["cleanup.policy"]
                    for kind in ("configs", "offsets", "status")}
    finally:
        worker.stop()
    return {"first": first, "every": every, "policies": policies, "log": worker.log()}


@pytest.mark.timeout(600)  # four worker starts, two on each broker
def test_a_connect_worker_runs_restarts_and_resumes_as_on_kafka(
        worker_classpath, make_broker, scratch_kafka, tmp_path):
    tag = uuid.uuid4().hex[:8]
    ours = _run(make_broker().bootstrap, worker_classpath, tmp_path, f"kcoord-{tag}")
    theirs = _run(scratch_kafka.bootstrap, worker_classpath, tmp_path, f"kafka-{tag}")
    for side, run in (("Kafka", theirs), ("kcoord", ours)):
        assert run["first"] == [f"seq-{i}" for i in range(FIRST)], (side, run["log"])
        # every record once, in order: the position was read back after the restart
        assert run["every"] == [f"seq-{i}" for i in range(TOTAL)], (side, run["log"])
        assert run["policies"] == {"configs": "compact", "offsets": "compact",
                                   "status": "compact"}, side
