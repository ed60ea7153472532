"""The container's start-up command, run directly (no Docker engine needed).

docker/entrypoint.sh is started with the KCOORD_* variables the image sets,
pointed at a temporary data dir and a free loopback port; the health check the
image uses must pass against it, Metadata must advertise the host and port from
the environment, and SIGTERM (what ``docker stop`` sends) must stop it with
exit code 0.  The Dockerfile is checked to run these same two commands.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka.protocol.metadata import MetadataRequest

from tests.support import REPO, RawClient

DOCKER = REPO / "docker"
ENTRYPOINT = DOCKER / "entrypoint.sh"
BIN_DIR = Path(sys.executable).parent  # where the installed `kcoord` script lives


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthcheck(port: int, timeout: float = 2.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kcoord.broker.healthcheck", "--host", "127.0.0.1", "--port", str(port),
         "--timeout", str(timeout)],
        cwd=REPO, capture_output=True, text=True, timeout=30,
    )


class Entrypoint:
    def __init__(self, tmp_path: Path, env: dict[str, str], *args: str):
        self.port = _free_port()
        self.data_dir = tmp_path / "kcoord-data"
        self.log_path = tmp_path / "entrypoint.log"
        self.env = {
            **os.environ,
            "PATH": f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}",
            "KCOORD_HOST": "127.0.0.1",
            "KCOORD_PORT": str(self.port),
            "KCOORD_DATA_DIR": str(self.data_dir),
            **env,
        }
        self.args = args
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20) -> "Entrypoint":
        sh = shutil.which("sh") or "/bin/sh"
        self._log = open(self.log_path, "w")
        # Run from the data dir's parent, not the repository, as the image does.
        self.proc = subprocess.Popen([sh, str(ENTRYPOINT), *self.args], cwd=self.log_path.parent,
                                     env=self.env, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"entrypoint exited with {self.proc.returncode}:\n{self.log()}")
            if _healthcheck(self.port, timeout=1.0).returncode == 0:
                return self
            if time.monotonic() > deadline:
                raise AssertionError(f"broker did not answer within {timeout} s:\n{self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            self._log.close()


@pytest.fixture
def entrypoint(tmp_path):
    started: list[Entrypoint] = []

    def start(env: dict[str, str] | None = None, *args: str) -> Entrypoint:
        node = Entrypoint(tmp_path, env or {}, *args).start()
        started.append(node)
        return node

    yield start
    for node in started:
        node.stop()


def test_entrypoint_serves_healthcheck_advertises_and_stops_on_sigterm(entrypoint):
    node = entrypoint({"KCOORD_ADVERTISED_HOST": "kcoord.example.test",
                       "KCOORD_ADVERTISED_PORT": "19092",
                       "KCOORD_LOG_FORMAT": "json"})

    check = _healthcheck(node.port)
    assert check.returncode == 0, check.stderr
    assert "ok:" in check.stdout

    with RawClient(node.port) as client:
        metadata = client.request(MetadataRequest[1](topics=None))
    assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == \
        [(metadata.controller_id, "kcoord.example.test", 19092)]

    # The data dir from KCOORD_DATA_DIR is the one in use.
    assert node.data_dir.is_dir() and any(node.data_dir.iterdir())

    assert node.stop() == 0, node.log()
    assert '"broker.stopped"' in node.log()


def test_entrypoint_defaults_advertise_loopback_and_pass_extra_arguments(entrypoint):
    node = entrypoint({}, "--override", "num.partitions=3")
    with RawClient(node.port) as client:
        client.request(MetadataRequest[1](topics=["auto-created"]))  # creates it (error 3)
        metadata = client.request(MetadataRequest[1](topics=["auto-created"]))
    # Without KCOORD_ADVERTISED_*, the bound port is advertised (loopback host).
    assert [(b.host, b.port) for b in metadata.brokers] == [("127.0.0.1", node.port)]
    (topic,) = metadata.topics
    assert topic[0] == 0 and topic[1] == "auto-created"
    assert len(topic[3]) == 3  # --override given to the container reached kcoord serve
    assert node.stop() == 0, node.log()


def test_healthcheck_fails_against_a_closed_port():
    result = _healthcheck(_free_port(), timeout=1.0)
    assert result.returncode == 1
    assert "unhealthy" in result.stderr


def test_healthcheck_fails_against_something_that_is_not_kafka(tmp_path):
    # A listener that answers every connection with an HTTP error and closes.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "kcoord.broker.healthcheck", "--port", str(port), "--timeout", "5"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        conn, _ = server.accept()
        conn.recv(1024)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        conn.close()
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "unhealthy" in err


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_runs_the_tested_entrypoint_and_healthcheck():
    dockerfile = (DOCKER / "Dockerfile").read_text()
    instructions = _instructions(dockerfile)
    first = dict(reversed(instructions))  # the first FROM
    last = dict(instructions)  # the effective ENTRYPOINT / HEALTHCHECK / CMD

    assert re.match(r"python:3\.11(\.\d+)?-slim", first["FROM"])
    assert "docker/entrypoint.sh" in last["ENTRYPOINT"]
    copies = [args for word, args in instructions if word == "COPY"]
    assert any("docker/entrypoint.sh" in args for args in copies)
    assert "python -m kcoord.broker.healthcheck" in last["HEALTHCHECK"]
    assert "pip install ." in last["RUN"] or any(
        "pip install ." in args for word, args in instructions if word == "RUN")
    assert "/var/lib/kcoord" in last["VOLUME"]
    assert "9092" in last["EXPOSE"]

    script = ENTRYPOINT.read_text()
    assert script.startswith("#!/bin/sh")
    assert os.access(ENTRYPOINT, os.X_OK)
    assert re.search(r"^exec kcoord serve ", script, re.M)
    assert "/var/lib/kcoord" in script and "0.0.0.0" in script and "9092" in script

    compose = (DOCKER / "compose.yaml").read_text()
    assert "9092:9092" in compose
    assert "kcoord-data:/var/lib/kcoord" in compose
    assert "dockerfile: docker/Dockerfile" in compose


def test_apache_kafka_s_image_variables_configure_it_with_two_listeners(tmp_path):
    """The environment of Apache Kafka's own single-node compose example (a
    listener for the host, one for other containers, a KRaft controller
    listener kcoord does not serve), on loopback ports."""
    host_port, internal_port, controller_port = _free_port(), _free_port(), _free_port()
    logs = tmp_path / "kraft-combined-logs"
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
        "KAFKA_ADVERTISED_LISTENERS":
            f"PLAINTEXT_HOST://localhost:{host_port},PLAINTEXT://broker:{internal_port}",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": f"1@broker:{controller_port}",
        "KAFKA_LISTENERS": f"CONTROLLER://127.0.0.1:{controller_port},"
                           f"PLAINTEXT_HOST://127.0.0.1:{host_port},"
                           f"PLAINTEXT://127.0.0.1:{internal_port}",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "CLUSTER_ID": "4L6g3nShT-eMCtK--X86sw",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_LOG_DIRS": str(logs),
        "KAFKA_NUM_PARTITIONS": "3",
        "KAFKA_HEAP_OPTS": "-Xmx1G",  # a JVM setting: not a property
        "KCOORD_LOG_FORMAT": "json",
    }
    node = _started_on(tmp_path, env, host_port)
    try:
        seen = {port: _advertised(port, ["orders"]) for port in (host_port, internal_port)}
        # KAFKA_NUM_PARTITIONS made the auto-created topic:
        assert all(count == 3 for _brokers, count in seen.values())
        assert {port: brokers for port, (brokers, _p) in seen.items()} == \
            {host_port: [("localhost", host_port)], internal_port: [("broker", internal_port)]}
        with pytest.raises(OSError):  # the controller listener is not served
            socket.create_connection(("127.0.0.1", controller_port), timeout=1).close()
        assert logs.is_dir() and any(logs.iterdir())  # KAFKA_LOG_DIRS is the data dir
        assert not node.data_dir.exists()
        assert "unknown_property_ignored" not in node.log()
    finally:
        assert node.stop() == 0, node.log()


def test_the_compose_file_s_two_listeners_serve_the_host_and_other_containers(tmp_path):
    """docker/compose.yaml's environment, run by the entrypoint on loopback with
    free ports in place of 9092 and 19092."""
    compose = (DOCKER / "compose.yaml").read_text()
    env = dict(re.findall(r'^\s+(KAFKA_[A-Z_]+): "([^"]*)"$', compose, re.M))
    assert set(env) == {"KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS",
                        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"}
    host_port, internal_port = _free_port(), _free_port()
    for key in env:
        env[key] = env[key].replace("0.0.0.0", "127.0.0.1").replace(
            ":19092", f":{internal_port}").replace(":9092", f":{host_port}")
    node = _started_on(tmp_path, env, host_port)
    try:
        seen = {port: _advertised(port, [])[0] for port in (host_port, internal_port)}
        assert seen == {host_port: [("localhost", host_port)],
                        internal_port: [("kcoord", internal_port)]}
    finally:
        assert node.stop() == 0, node.log()


def _started_on(tmp_path: Path, env: dict, port: int) -> Entrypoint:
    """The entrypoint with ``env``, its health checked on ``port``."""
    node = Entrypoint(tmp_path, env)
    node.port = port
    return node.start()


def _advertised(port: int, topics: list[str]) -> tuple[list[tuple[str, int]], int]:
    """What Metadata through ``port`` advertises, and the partition count of the
    first topic asked for (0 if none)."""
    with RawClient(port) as client:
        metadata = client.request(MetadataRequest[1](topics=topics))
        if topics and metadata.topics[0][0] == 3:  # the request that created it, as Kafka
            metadata = client.request(MetadataRequest[1](topics=topics))
    partitions = len(metadata.topics[0][3]) if topics else 0
    return [(b.host, b.port) for b in metadata.brokers], partitions
