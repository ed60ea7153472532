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
        [sys.executable, "-m", "broker.healthcheck", "--host", "127.0.0.1", "--port", str(port),
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
            [sys.executable, "-m", "broker.healthcheck", "--port", str(port), "--timeout", "5"],
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
    assert "python -m broker.healthcheck" in last["HEALTHCHECK"]
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
