"""Apache Kafka on demand: resolved with Maven, run as a single-node KRaft broker.

``resolve(version)`` copies ``kafka_2.13``, ``kafka-tools`` and an SLF4J binding,
with all their dependencies, into ``~/.cache/kcoord/kafka-<version>/libs``
(``KCOORD_CACHE_DIR`` moves the cache) using ``tests/reference/pom.xml``;
``resolve_connect(version)`` Kafka Connect's runtime into ``connect-<version>``
using ``tests/reference/connect/pom.xml``.
``KafkaBroker`` formats a combined broker+controller in a temporary folder,
starts it on free loopback ports with kcoord's development defaults, waits
until it answers Metadata with itself as a registered broker, and stops it.
``run_tool`` runs one of Kafka's command-line tools from the same jars.

Kafka 4.x (``MAIN_VERSION``) is the main reference; Kafka 3.9
(``LEGACY_VERSION``) is the reference for the old versions 4.x dropped.

Command line (``make reference-kafka`` runs the first)::

    python -m tests.reference.kafka resolve [VERSION ...]
    python -m tests.reference.kafka serve [VERSION]      # until Ctrl-C
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kcoord.broker.config import DEV_DEFAULTS
from kcoord.protocol.client import WireClient

MAIN_VERSION = "4.4.0"
LEGACY_VERSION = "3.9.2"

NODE_ID = 1  # the same as kcoord's default node.id, so node ids need no normalizing
# Set in the server.properties of both the reference and the kcoord beside it.
KCOORD_STATIC_PROPERTIES = {"node.id": NODE_ID, "num.partitions": 1}
POM = Path(__file__).with_name("pom.xml")
CONNECT_POM = Path(__file__).with_name("connect") / "pom.xml"

# kafka-run-class.sh's defaults (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS), so
# that start-up time and memory are those of Kafka as its scripts run it.
JVM_OPTS = [
    "-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
TOOL_JVM_OPTS = ["-Xmx512M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]


class ReferenceUnavailable(RuntimeError):
    """Java 17+, Maven or the Kafka artifacts cannot be had on this machine."""


def cache_dir() -> Path:
    root = os.environ.get("KCOORD_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "kcoord"


def java_major(java: str = "java") -> int | None:
    """The major version of ``java`` on the PATH, or None when there is none."""
    if shutil.which(java) is None:
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 else major  # "1.8.0" is Java 8


def missing_requirements() -> str | None:
    """None when Kafka can be resolved and run here, else one line naming what is missing."""
    missing = []
    major = java_major()
    if major is None:
        missing.append("Java 17+ (no java on PATH)")
    elif major < 17:
        missing.append(f"Java 17+ (java is {major})")
    if shutil.which("mvn") is None and not _all_resolved():
        missing.append("Maven (no mvn on PATH)")
    return "Apache Kafka reference needs " + " and ".join(missing) if missing else None


def _all_resolved() -> bool:
    return all((cache_dir() / f"kafka-{v}" / ".complete").exists()
               for v in (MAIN_VERSION, LEGACY_VERSION))


def resolve(version: str = MAIN_VERSION) -> Path:
    """The folder holding every jar of Kafka ``version``; resolved once, then cached."""
    return _resolved(POM, f"kafka-{version}", version, f"kafka_2.13-{version}.jar")


def resolve_connect(version: str = MAIN_VERSION) -> Path:
    """The folder holding Kafka Connect's runtime of ``version`` (``connect/pom.xml``)."""
    return _resolved(CONNECT_POM, f"connect-{version}", version,
                     f"connect-runtime-{version}.jar")


def _resolved(pom: Path, name: str, version: str, expected: str) -> Path:
    home = cache_dir() / name
    libs = home / "libs"
    marker = home / ".complete"
    # resolved again when the pom changes (a dependency added)
    stamp = f"{version} {hashlib.sha256(pom.read_bytes()).hexdigest()[:16]}\n"
    if marker.exists() and marker.read_text() == stamp:
        return libs
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one resolver at a time (parallel test runs)
        if marker.exists() and marker.read_text() == stamp:
            return libs
        if shutil.which("mvn") is None:
            raise ReferenceUnavailable("Maven (mvn) is not on PATH")
        staging = Path(tempfile.mkdtemp(prefix="libs-", dir=home))
        cmd = ["mvn", "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
               f"-Dkafka.version={version}", f"-DoutputDirectory={staging}"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if done.returncode != 0 or not any(staging.glob(expected)):
            shutil.rmtree(staging, ignore_errors=True)
            raise ReferenceUnavailable(
                f"mvn could not resolve {name}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        if libs.exists():
            shutil.rmtree(libs)
        staging.rename(libs)
        marker.write_text(stamp)
    return libs


def classpath(version: str = MAIN_VERSION) -> str:
    return str(resolve(version) / "*")


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` different free ports: each held until all are picked (one at a
    time, the system may give the same port twice)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports


def run_tool(main_class: str, *args: str, version: str = MAIN_VERSION, timeout: float = 120,
             stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run one of Kafka's command-line tools (``kafka-topics`` is
    ``org.apache.kafka.tools.TopicCommand``) and return what it printed."""
    cmd = ["java", *TOOL_JVM_OPTS, "-cp", classpath(version), main_class, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=stdin,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


def broker_properties(data_dir: Path, port: int, controller_port: int,
                      extra: dict[str, object] | None = None) -> dict[str, str]:
    """server.properties of a one-node KRaft Kafka with kcoord's development defaults."""
    props: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": NODE_ID,
        "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir / "logs"),
        # One node holds one replica (kcoord forces these to 1 too).
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        # Kafka's default, set in the file so that a static property with its
        # default behind it is compared too (KCOORD_STATIC_PROPERTIES).
        **KCOORD_STATIC_PROPERTIES,
    }
    props.update({name: dev for name, (dev, _kafka) in DEV_DEFAULTS.items()
                  if not name.startswith("kcoord.")})  # kcoord's own: unknown to Kafka
    props.update(extra or {})
    return {k: str(v) for k, v in props.items()}


class KafkaBroker:
    """One Apache Kafka process (combined KRaft broker and controller) on loopback."""

    def __init__(self, version: str = MAIN_VERSION, extra: dict[str, object] | None = None,
                 workdir: Path | None = None, listeners: dict[str, str] | None = None):
        """``listeners``: more listeners beside PLAINTEXT, each name with its security
        protocol (``{"SASL_PLAINTEXT": "SASL_PLAINTEXT"}``), on free loopback ports
        (``listener_port(name)``); their settings go in ``extra``."""
        self.version = version
        self.extra = extra or {}
        self.listeners = dict(listeners or {})
        self.listener_ports: dict[str, int] = {}
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"kcoord-kafka-{version}-"))
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir / "kafka.log"
        self.started_in: float | None = None  # seconds from exec to the first Metadata answer

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> "KafkaBroker":
        cp = classpath(self.version)
        self.port, controller_port, *others = free_ports(2 + len(self.listeners))
        self._other_ports = others
        props = broker_properties(self.workdir, self.port, controller_port,
                                  {**self._listener_properties(controller_port), **self.extra})
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        cluster_id = _kafka_uuid()
        fmt = subprocess.run(
            ["java", *TOOL_JVM_OPTS, "-cp", cp, "kafka.tools.StorageTool", "format",
             "-t", cluster_id, "-c", str(config)],
            capture_output=True, text=True, timeout=120)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{fmt.stdout}{fmt.stderr}")
        began = time.monotonic()
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                ["java", *JVM_OPTS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                 "-cp", cp, "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        try:
            self._wait_ready(began + timeout)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        return self

    def _listener_properties(self, controller_port: int) -> dict[str, str]:
        if not self.listeners:
            return {}
        self.listener_ports = dict(zip(self.listeners, self._other_ports))
        extra = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.listener_ports.items())
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},{extra},"
                         f"CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},{extra}",
            "listener.security.protocol.map": ",".join(
                ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT",
                 *(f"{name}:{protocol}" for name, protocol in self.listeners.items())]),
        }

    def listener_port(self, name: str) -> int:
        """The port of one of the ``listeners`` given (PLAINTEXT's is ``port``)."""
        return self.port if name == "PLAINTEXT" else self.listener_ports[name]

    def _wait_ready(self, deadline: float) -> None:
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka {self.version} exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                with WireClient("127.0.0.1", self.port, timeout=5) as client:
                    answer = client.call(3, 1, {"topics": []})
                if answer["brokers"] and answer["controller_id"] == NODE_ID:
                    return
            except OSError as exc:
                last_error = exc
            time.sleep(0.1)
        raise RuntimeError(f"Kafka {self.version} did not answer in time ({last_error}):\n"
                           f"{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def rss_bytes(self) -> int:
        """Resident memory of the broker process (Linux)."""
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _kafka_uuid() -> str:
    """A cluster id as ``kafka-storage random-uuid`` prints it (22 base64url characters).

    Like Kafka's ``Uuid.randomUuid``, never one starting with '-': the command
    line of ``kafka-storage format`` would read it as an option.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def main(argv: list[str]) -> int:
    command, *rest = argv or ["resolve"]
    if command == "resolve":
        for version in rest or [MAIN_VERSION, LEGACY_VERSION]:
            print(f"Kafka {version}: {resolve(version)}")
        print(f"Kafka Connect {MAIN_VERSION}: {resolve_connect(MAIN_VERSION)}")
        return 0
    if command == "serve":
        with KafkaBroker(rest[0] if rest else MAIN_VERSION) as kafka:
            print(f"Kafka {kafka.version} on {kafka.bootstrap} (Ctrl-C stops it)", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                kafka.proc.wait()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
