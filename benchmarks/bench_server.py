"""Server figures: requests per second over loopback, and start-up time.

Throughput: the real broker (``python -m kcoord.broker.cli serve`` in a child process,
so it runs exactly as users start it, uvloop included when installed) is
measured next to a minimal length-prefixed echo server (one
``asyncio.Protocol`` that answers every frame with a fixed 10-byte frame, on the
same event loop implementation) in the same run, with the same load client:
a separate process holding N connections with K requests in flight on each.
The ratio broker/echo is the headline figure: the share of the bare transport's
rate that decoding, handling and encoding leave.  Next to it, the server's own
CPU time per request (from /proc), which does not depend on how fast the client
is.

Start-up: from spawning ``python -m kcoord.broker.cli serve --port 0`` to the first
answered ApiVersions request, median of several runs, each on a fresh data dir.

Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from kcoord.broker.healthcheck import recv_exact
from kcoord.protocol.headers import frame_request, response_header_codec, response_header_version
from kcoord.protocol.messages.api_versions import API_VERSIONS
from kcoord.protocol.messages.create_topics import CREATE_TOPICS
from kcoord.protocol.messages.metadata import METADATA

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"

CONNECTIONS = 4
DEPTH = 16
SECONDS = 0.25 if QUICK else 2.0
MAX_REQUESTS = 20_000 if QUICK else 200_000
WARMUP_SECONDS = 0.1 if QUICK else 0.3
ROUNDS = 1 if QUICK else 3  # measurements are interleaved; the best round is reported
TOPICS = 5
PARTITIONS = 3
STARTUP_RUNS = 3 if QUICK else 5

_SIZE = struct.Struct(">i")


def _take_frames(buf: bytearray) -> int:
    """Drop the complete length-prefixed frames at the front of ``buf``; return how many."""
    pos, end, n = 0, len(buf), 0
    unpack = _SIZE.unpack_from
    while end - pos >= 4:
        (size,) = unpack(buf, pos)
        if end - pos - 4 < size:
            break
        pos += 4 + size
        n += 1
    if pos:
        del buf[:pos]
    return n
ECHO_ANSWER = struct.pack(">iih", 6, 0, 0)  # size 6: correlation id 0, error code 0

_CTX = multiprocessing.get_context("spawn")


# -- frames built with the project's own codecs -----------------------------------------


def request_frame(api, version: int, body: dict, correlation_id: int = 1,
                  client_id: str = "kcoord-bench") -> bytes:
    return frame_request(api, version, correlation_id, client_id, body)


def metadata_answer_bytes(port: int) -> bytes:
    """The raw Metadata v1 (all topics) answer frame, to report its size."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(request_frame(METADATA, 1, {"topics": None}))
        (size,) = _SIZE.unpack(recv_exact(sock, 4))
        return recv_exact(sock, size)


def call(port: int, api, version: int, body: dict) -> dict:
    """One blocking request/response with the project's codecs."""
    import io

    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(request_frame(api, version, body, correlation_id=7))
        (size,) = _SIZE.unpack(recv_exact(sock, 4))
        stream = io.BytesIO(recv_exact(sock, size))
    hv = response_header_version(api.key, api.is_flexible(version))
    header = response_header_codec(hv).read(stream)
    assert header["correlation_id"] == 7, header
    return api.codec(version, "response").read(stream)


# -- event loops -------------------------------------------------------------------------


def _loop_name() -> str:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def _run(coro):
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def _nodelay(transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


# -- the echo server (child process) ---------------------------------------------------


class EchoProtocol(asyncio.Protocol):
    """Split frames by their size prefix, answer each with ECHO_ANSWER, one write per read."""

    def connection_made(self, transport):
        self.transport = transport
        self.buf = bytearray()
        _nodelay(transport)

    def data_received(self, data):
        self.buf += data
        n = _take_frames(self.buf)
        if n:
            self.transport.write(ECHO_ANSWER * n)


def _echo_main(port_pipe) -> None:
    async def main():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(EchoProtocol, HOST, 0, backlog=1024)
        port_pipe.send(server.sockets[0].getsockname()[1])
        port_pipe.close()
        await asyncio.Event().wait()  # until terminated

    _run(main())


# -- the load client (child process) ---------------------------------------------------


class _Budget:
    def __init__(self, max_requests: int, seconds: float):
        self.left = max_requests
        self.deadline = time.monotonic() + seconds
        self.done = 0
        self.last = time.monotonic()

    def take(self, n: int) -> int:
        if self.left <= 0 or time.monotonic() >= self.deadline:
            return 0
        n = min(n, self.left)
        self.left -= n
        return n


class LoadConnection(asyncio.Protocol):
    def __init__(self, frame: bytes):
        self.frame = frame
        self.buf = bytearray()
        self.inflight = 0
        self.budget: _Budget | None = None
        self.finished: asyncio.Future | None = None
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        _nodelay(transport)

    def start(self, budget: _Budget, depth: int) -> asyncio.Future:
        self.budget = budget
        self.finished = asyncio.get_running_loop().create_future()
        n = budget.take(depth)
        self.inflight = n
        if n:
            self.transport.write(self.frame * n)
        else:
            self.finished.set_result(None)
        return self.finished

    def data_received(self, data):
        self.buf += data
        n = _take_frames(self.buf)
        if not n:
            return
        budget = self.budget
        budget.done += n
        budget.last = time.monotonic()
        self.inflight -= n
        more = budget.take(n)
        if more:
            self.inflight += more
            self.transport.write(self.frame * more)
        elif self.inflight == 0 and not self.finished.done():
            self.finished.set_result(None)

    def connection_lost(self, exc):
        if self.finished is not None and not self.finished.done():
            self.finished.set_exception(ConnectionError(f"server closed the connection: {exc}"))


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process, from /proc (None where unavailable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load_main(port: int, frame: bytes, server_pid: int, connections: int, depth: int,
               max_requests: int, seconds: float, warmup: float, result_pipe) -> None:
    async def phase(conns, max_requests, seconds):
        budget = _Budget(max_requests, seconds)
        start = time.monotonic()
        await asyncio.gather(*(c.start(budget, depth) for c in conns))
        return budget.done, budget.last - start

    async def main():
        loop = asyncio.get_running_loop()
        conns = []
        for _ in range(connections):
            _t, proto = await loop.create_connection(lambda: LoadConnection(frame), HOST, port)
            conns.append(proto)
        if warmup > 0:
            await phase(conns, max_requests, warmup)
        cpu_before = cpu_seconds(server_pid)
        done, elapsed = await phase(conns, max_requests, seconds)
        cpu_after = cpu_seconds(server_pid)
        for c in conns:
            c.transport.close()
        cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
        return done, elapsed, cpu

    try:
        result_pipe.send(("ok", _run(main())))
    except BaseException as exc:  # reported to the parent
        result_pipe.send(("error", repr(exc)))


def load(port: int, frame: bytes, server_pid: int) -> dict:
    """Drive ``port`` with ``frame`` from a separate process: rate, and the server's CPU use."""
    parent, child = _CTX.Pipe(duplex=False)
    proc = _CTX.Process(target=_load_main, args=(port, frame, server_pid, CONNECTIONS, DEPTH,
                                                 MAX_REQUESTS, SECONDS, WARMUP_SECONDS, child),
                        daemon=True)
    proc.start()
    child.close()
    if not parent.poll(SECONDS + WARMUP_SECONDS + 60):
        proc.kill()
        raise RuntimeError("load client did not finish")
    status, value = parent.recv()
    proc.join(10)
    if status != "ok":
        raise RuntimeError(f"load client failed: {value}")
    done, elapsed, cpu = value
    return {"requests": done, "seconds": elapsed, "rate": done / elapsed if elapsed > 0 else 0.0,
            "server_cpu": cpu}


# -- the servers under test ------------------------------------------------------------


@contextmanager
def echo_server():
    parent, child = _CTX.Pipe(duplex=False)
    proc = _CTX.Process(target=_echo_main, args=(child,), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(20):
            raise RuntimeError("echo server did not start")
        yield parent.recv(), proc.pid
    finally:
        proc.terminate()
        proc.join(10)


def spawn_broker(data_dir: str, *extra: str, timeout: float = 30,
                 events: list | None = None) -> tuple[subprocess.Popen, dict]:
    """``python -m kcoord.broker.cli serve --port 0``; returns the process and its ``broker.started``
    event.  ``events``, if given, receives every later log event (parsed) as it comes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kcoord.broker.cli", "serve", "--host", HOST, "--port", "0",
         "--data-dir", data_dir, "--log-format", "json", *extra],
        cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    watchdog = threading.Timer(timeout, proc.kill)  # a broker that hangs silently
    watchdog.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "broker.started":
                # Keep draining the log so the broker never blocks on a full pipe.
                threading.Thread(target=_drain, args=(proc.stdout, events), daemon=True).start()
                return proc, event
    finally:
        watchdog.cancel()
    stop_broker(proc)
    raise RuntimeError("broker did not start:\n" + "".join(lines))


def stop_broker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _drain(stream, events: list | None) -> None:
    if events is None:
        stream.read()
        return
    for line in stream:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue


@contextmanager
def broker_server(*extra: str, events: list | None = None):
    """A broker process on a fresh data dir; ``extra``: more ``kcoord serve`` arguments;
    ``events``: a list that receives its log events.  Given once the broker has
    compiled the codecs of a client's first requests (``broker.codecs_warm``, in
    its first second), so that what is measured is not their compilation (the
    start-up benches time ``spawn_broker`` itself)."""
    events = [] if events is None else events
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-") as data_dir:
        proc, event = spawn_broker(data_dir, *extra, events=events)
        try:
            deadline = time.monotonic() + 30
            while not any(e.get("event") == "broker.codecs_warm" for e in list(events)) \
                    and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.02)
            yield event["port"], proc.pid
        finally:
            stop_broker(proc)


# -- the benchmarks ----------------------------------------------------------------------


def _fmt_rate(result: dict) -> str:
    cpu = result["server_cpu"]
    text = f"{result['rate']:>11,.0f} req/s"
    if cpu is not None and cpu >= 0.05 and result["requests"] and result["seconds"] > 0:
        # /proc counts in clock ticks (usually 10 ms): shown only when enough were counted.
        text += (f"   server CPU {cpu / result['seconds'] * 100:3.0f}%, "
                 f"{cpu / result['requests'] * 1e6:6.1f} µs/request")
    return text


def throughput() -> dict[str, dict]:
    api_versions = request_frame(API_VERSIONS, 3, {"client_software_name": "kcoord-bench",
                                                   "client_software_version": "1"})
    metadata = request_frame(METADATA, 1, {"topics": None})
    best: dict[str, dict] = {}

    def keep(name, result):
        if name not in best or result["rate"] > best[name]["rate"]:
            best[name] = result

    with echo_server() as (echo_port, echo_pid), broker_server() as (port, pid):
        # A few topics so that Metadata has something to describe.
        created = call(port, CREATE_TOPICS, 5, {"topics": [
            {"name": f"bench-{i}", "num_partitions": PARTITIONS, "replication_factor": 1,
             "assignments": [], "configs": []} for i in range(TOPICS)], "timeout_ms": 10_000})
        assert all(t["error_code"] == 0 for t in created["topics"]), created
        # Sanity: the frames the load sends are answered without error.
        assert call(port, API_VERSIONS, 3, {"client_software_name": "kcoord-bench",
                                            "client_software_version": "1"})["error_code"] == 0
        answer = call(port, METADATA, 1, {"topics": None})
        names = {t["name"] for t in answer["topics"]}
        assert {f"bench-{i}" for i in range(TOPICS)} <= names, sorted(names)
        # Internal topics, if the broker has any, are described too.
        best["metadata_shape"] = {"topics": len(answer["topics"]),
                                  "partitions": sum(len(t["partitions"]) for t in answer["topics"]),
                                  "bytes": len(metadata_answer_bytes(port))}
        for _ in range(ROUNDS):
            keep("echo", load(echo_port, api_versions, echo_pid))
            keep("api_versions", load(port, api_versions, pid))
            keep("metadata", load(port, metadata, pid))
    return best


def startup() -> list[tuple[float, float]]:
    """(seconds to first answer, broker.start()'s own share) per run."""
    from kcoord.broker.healthcheck import probe

    runs = []
    for _ in range(STARTUP_RUNS):
        with tempfile.TemporaryDirectory(prefix="kcoord-bench-") as data_dir:
            began = time.perf_counter()
            proc, event = spawn_broker(data_dir)
            try:
                probe(HOST, event["port"])
                runs.append((time.perf_counter() - began, event.get("startup_ms", 0.0) / 1000))
            finally:
                stop_broker(proc)
    return runs


def run() -> None:
    print(f"server throughput: loopback {HOST}, {_loop_name()}, {os.cpu_count()} CPUs; "
          f"load client in its own process, {CONNECTIONS} connections x {DEPTH} in flight, "
          f"{SECONDS:g} s or {MAX_REQUESTS:,} requests per measurement, best of {ROUNDS}")
    best = throughput()
    echo = best["echo"]["rate"]
    print(f"  echo server (asyncio.Protocol, fixed 10-byte answer)  {_fmt_rate(best['echo'])}")
    shape = best["metadata_shape"]
    for key, label in (("api_versions", "ApiVersions v3"),
                       ("metadata", f"Metadata v1, all topics ({shape['topics']} topics, "
                                    f"{shape['partitions']} partitions, {shape['bytes']:,} B)")):
        result = best[key]
        ratio = result["rate"] / echo if echo else 0.0
        print(f"  {label:<52} {_fmt_rate(result)}  ratio to echo {ratio:.3f}")
    print()
    runs = startup()
    total = statistics.median(r[0] for r in runs)
    inner = statistics.median(r[1] for r in runs)
    print(f"startup: `python -m kcoord.broker.cli serve --port 0` to first answered ApiVersions, "
          f"fresh data dir, median of {len(runs)}")
    print(f"  startup to first answer  {total * 1000:7.0f} ms  "
          f"(broker.start() {inner * 1000:.0f} ms; runs: "
          f"{', '.join(f'{r[0] * 1000:.0f}' for r in runs)} ms)")
    print()


if __name__ == "__main__":
    run()
