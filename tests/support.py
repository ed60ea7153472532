"""Test helpers: a broker on a free loopback port, in a thread or a child process,
and a raw socket client that speaks through kafka-python's own protocol classes
(an implementation independent of ours)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from kcoord.broker.embedded import EmbeddedBroker

REPO = Path(__file__).resolve().parent.parent


class BrokerThread(EmbeddedBroker):
    """A broker running on its own event loop in a background thread (the
    product's in-process ``EmbeddedBroker``), which a test can reach into."""

    def __init__(self, data_dir: Path, overrides: dict | None = None, kafka_defaults: bool = False,
                 own_process: bool = False):
        super().__init__(data_dir, overrides=overrides, kafka_defaults=kafka_defaults,
                         own_process=own_process)

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the broker's loop and return its result."""
        async def runner():
            result = fn(*args)
            if inspect.isawaitable(result):
                result = await result
            return result
        return asyncio.run_coroutine_threadsafe(runner(), self.loop).result(10)


class BrokerProcess:
    """``kcoord serve`` in a child process, as a user runs it."""

    def __init__(self, data_dir: Path, *extra: str, env: dict | None = None):
        self.data_dir = data_dir
        self.args = [sys.executable, "-m", "kcoord.broker.cli", "serve", "--port", "0",
                     "--data-dir", str(data_dir), "--log-format", "json", *extra]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.events: list[dict] = []
        self._reader: threading.Thread | None = None
        self._started = threading.Event()

    def start(self, timeout: float = 20) -> "BrokerProcess":
        self.proc = subprocess.Popen(self.args, cwd=REPO, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._started.wait(timeout):
            self.kill()
            raise RuntimeError(f"broker did not start: {self.events}")
        return self

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "raw", "line": line.rstrip()}
            self.events.append(event)
            if event.get("event") == "broker.started":
                self.port = event["port"]
                self._started.set()
        self._started.set()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def terminate(self, timeout: float = 15) -> int:
        self.proc.terminate()
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        return rc

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def event_names(self) -> list[str]:
        return [e.get("event") for e in self.events]


def create_topic_offline(data_dir: Path, name: str, partitions: int) -> None:
    """Create a topic in a data dir with a broker started for that and stopped."""
    from kcoord.protocol.client import WireClient
    broker = BrokerProcess(data_dir).start()
    with WireClient("127.0.0.1", broker.port) as client:
        created = client.call(19, 4, {"topics": [{"name": name, "num_partitions": partitions,
                                                  "replication_factor": 1, "assignments": [],
                                                  "configs": []}],
                                      "timeout_ms": 5000, "validate_only": False})
        assert created["topics"][0]["error_code"] == 0, created
    broker.terminate()


def kill_during(data_dir: Path, workers, rng, context: str) -> None:
    """Start the broker as users do, run ``worker.run(port, stop)`` of every worker
    in a thread, SIGKILL the broker at a random moment (0.5-1.5 s), and wait for
    the workers to notice."""
    broker = BrokerProcess(data_dir).start()
    stop = threading.Event()
    threads = [threading.Thread(target=w.run, args=(broker.port, stop), daemon=True)
               for w in workers]
    for t in threads:
        t.start()
    time.sleep(rng.uniform(0.5, 1.5))
    broker.kill()
    stop.set()
    for t in threads:
        t.join(15)
        assert not t.is_alive(), context


class RawClient:
    """One TCP connection sending requests built with kafka-python's protocol classes."""

    def __init__(self, port: int, timeout: float = 10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def send(self, request, client_id: str = "kcoord-tests") -> int:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id=client_id)
        self.sock.sendall(request.encode(header=True, framed=True))
        return self.correlation_id

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, request):
        """Send one request and decode its response with kafka-python's classes."""
        correlation_id = self.send(request)
        return self.read_response(request, correlation_id)

    def read_response(self, request, correlation_id: int):
        frame = self.recv_frame()
        response_class = type(request).RESPONSE_TYPE if hasattr(type(request), "RESPONSE_TYPE") \
            else request.header.get_response_class()
        response = response_class.decode(frame, version=request.API_VERSION, header=True)
        assert response.header.correlation_id == correlation_id
        return response

    def is_closed_by_peer(self, wait: float = 5) -> bool:
        """True when the broker has closed this connection (EOF) within ``wait`` seconds."""
        self.sock.settimeout(wait)
        deadline = time.monotonic() + wait
        try:
            while time.monotonic() < deadline:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return False


# --- secured listeners ------------------------------------------------------------

SASL_USERS = {"alice": "alice-secret", "admin": "admin-secret"}


class Secured:
    """A broker with one listener of each secured kind on free loopback ports:
    SASL_PLAINTEXT and SASL_SSL (PLAIN with ``SASL_USERS``, SCRAM-SHA-256 and
    -512 with the same users' credentials), and SSL asking for a client
    certificate; certificates from the development CA in ``folder``."""

    def __init__(self, data_dir: Path, folder: Path, extra: dict | None = None,
                 client_auth: str = "required"):
        from kcoord.broker.security import devcerts

        self.certs = devcerts.ensure(folder)
        users = " ".join(f'user_{u}="{p}"' for u, p in SASL_USERS.items())
        self.overrides = {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                         "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.certs / "broker.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.certs / "ca.pem"),
            "listener.name.ssl.ssl.client.auth": client_auth,
            **(extra or {}),
        }
        self.node = BrokerThread(data_dir, overrides=self.overrides)

    def start(self) -> "Secured":
        self.node.start()
        for user, password in SASL_USERS.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                self.node.call(self.node.broker.scram_credentials.set_password, user,
                               mechanism, password)
        return self

    def stop(self) -> None:
        self.node.stop()

    def port(self, listener: str) -> int:
        broker = self.node.broker
        return next(server.sockets[0].getsockname()[1]
                    for spec, server in zip(broker.config.listeners, broker._servers)
                    if spec.name == listener)

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.port(listener)}"

    @property
    def ca(self) -> str:
        return str(self.certs / "ca.pem")

    def client_context(self, certificate: bool = True):
        import ssl
        context = ssl.create_default_context(cafile=self.ca)
        if certificate:
            context.load_cert_chain(str(self.certs / "client.pem"))
        return context


@contextlib.contextmanager
def captured_logs(level: int = logging.INFO):
    """The structlog events logged at ``level`` and above meanwhile (the test
    suite otherwise logs warnings only)."""
    import structlog

    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(level))
    try:
        with structlog.testing.capture_logs() as captured:
            yield captured
    finally:
        structlog.configure(wrapper_class=wrapper)


def closed_by_broker(client, wait: float = 5) -> bool:
    """Whether the broker closes a WireClient's connection (within ``wait``
    seconds) with no answer before the close, instead of leaving it open; a
    request sent to a closed connection may find it reset."""
    client.sock.settimeout(wait)
    try:
        return client.sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
