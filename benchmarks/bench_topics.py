"""Topic operations as a CI suite does them: cost per create and delete as the topic
count grows, and how long other clients wait meanwhile.

The broker runs as users start it (``python -m kcoord.broker.cli serve``, in a child
process).  Figures:

* Metadata auto-creating 1,000 new names in one request, twice;
* the median time of one CreateTopics (one topic, one partition) and one
  DeleteTopics, with 10 topics and again with ``LARGE`` topics in the broker
  (grown with batched creates); goal: the same cost at both sizes;
* the worst wait of a second connection while another pipelines 400
  Metadata(all topics) requests in one write;
* the time to create and to delete one topic of 1,000 partitions, and the
  worst wait a second connection sees meanwhile (it sends ApiVersions one after
  the other); goal: no stall over 50 ms.

Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import socket
import statistics
import struct
import time

from benchmarks.bench_server import HOST, broker_server, request_frame
from kcoord.broker.healthcheck import recv_exact
from kcoord.protocol.headers import response_header_codec, response_header_version
from kcoord.protocol.messages.api_versions import API_VERSIONS
from kcoord.protocol.messages.create_topics import CREATE_TOPICS
from kcoord.protocol.messages.delete_topics import DELETE_TOPICS
from kcoord.protocol.messages.metadata import METADATA

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
LARGE = 1_000 if QUICK else 10_000
SAMPLES = 10 if QUICK else 30
GROW_BATCH = 500
BIG_PARTITIONS = 1_000

_SIZE = struct.Struct(">i")


class Connection:
    def __init__(self, port: int):
        self.sock = socket.create_connection((HOST, port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def call(self, api, version: int, body: dict) -> dict:
        self.correlation += 1
        self.sock.sendall(request_frame(api, version, body, correlation_id=self.correlation))
        (size,) = _SIZE.unpack(recv_exact(self.sock, 4))
        stream = io.BytesIO(recv_exact(self.sock, size))
        hv = response_header_version(api.key, api.is_flexible(version))
        header = response_header_codec(hv).read(stream)
        assert header["correlation_id"] == self.correlation
        return api.codec(version, "response").read(stream)

    def close(self) -> None:
        self.sock.close()


def _create(conn: Connection, names: list[str], partitions: int = 1) -> float:
    body = {"topics": [{"name": n, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [], "configs": []} for n in names],
            "timeout_ms": 60_000, "validate_only": False}
    began = time.perf_counter()
    answer = conn.call(CREATE_TOPICS, 4, body)
    elapsed = time.perf_counter() - began
    bad = [t for t in answer.topics if t.error_code != 0]
    assert not bad, bad[:3]
    return elapsed


def _delete(conn: Connection, names: list[str]) -> float:
    began = time.perf_counter()
    answer = conn.call(DELETE_TOPICS, 4, {"topic_names": names, "timeout_ms": 60_000})
    elapsed = time.perf_counter() - began
    bad = [r for r in answer.responses if r.error_code != 0]
    assert not bad, bad[:3]
    return elapsed


def _per_operation(conn: Connection, prefix: str) -> tuple[float, float]:
    names = [f"{prefix}-{i}" for i in range(SAMPLES)]
    creates = [_create(conn, [n]) for n in names]
    deletes = [_delete(conn, [n]) for n in names]
    return statistics.median(creates) * 1000, statistics.median(deletes) * 1000


def _auto_create(conn: Connection, names: list[str]) -> float:
    began = time.perf_counter()
    answer = conn.call(METADATA, 9, {"topics": [{"name": n} for n in names],
                                     "allow_auto_topic_creation": True,
                                     "include_cluster_authorized_operations": False,
                                     "include_topic_authorized_operations": False})
    elapsed = time.perf_counter() - began
    # the request that creates them is answered UNKNOWN_TOPIC_OR_PARTITION, as on Kafka
    assert all(t.error_code == 3 for t in answer.topics)
    return elapsed


def _probe_main(port: int, stop, result) -> None:
    conn = Connection(port)
    conn.call(API_VERSIONS, 0, {})  # untimed: this process's own first call compiles its codecs
    worst, samples = 0.0, 0
    deadline = time.monotonic() + 300
    while not stop.is_set() and time.monotonic() < deadline:
        began = time.perf_counter()
        conn.call(API_VERSIONS, 0, {})
        worst = max(worst, time.perf_counter() - began)
        samples += 1
    conn.close()
    result.send((worst, samples))


class LagProbe:
    """A second client, in a process of its own (so that the load client's work
    cannot delay it), sending ApiVersions back to back; records the worst wait."""

    def __init__(self, port: int):
        ctx = multiprocessing.get_context("spawn")
        self.stop = ctx.Event()
        self._result, child = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_probe_main, args=(port, self.stop, child), daemon=True)
        self.worst = 0.0
        self.samples = 0

    def start(self) -> None:
        self._proc.start()
        time.sleep(0.5)  # let it start and settle before the load begins

    def join(self, timeout: float) -> None:
        if self._result.poll(timeout):
            self.worst, self.samples = self._result.recv()
        self._proc.join(timeout)
        if self._proc.is_alive():
            self._proc.kill()


def pipelined_burst(port: int, requests: int = 400) -> dict:
    """Another client's worst wait while one connection pipelines ``requests``
    Metadata(all topics) requests in a single write."""
    conn = Connection(port)
    probe = LagProbe(port)
    probe.start()
    try:
        time.sleep(0.05)
        burst = b"".join(request_frame(METADATA, 1, {"topics": None}, correlation_id=i)
                         for i in range(requests))
        began = time.perf_counter()
        conn.sock.sendall(burst)
        for _ in range(requests):
            (size,) = _SIZE.unpack(recv_exact(conn.sock, 4))
            recv_exact(conn.sock, size)
        elapsed = time.perf_counter() - began
    finally:
        probe.stop.set()
        probe.join(60)
        conn.close()
    return {"burst_s": elapsed, "worst_wait_ms": probe.worst * 1000, "probes": probe.samples,
            "bytes": len(burst)}


def _memory_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def huge_request(port: int, pid: int, names: int = 1_000_000) -> dict:
    """Another client's worst wait while the broker serves one Metadata v1 request
    naming ``names`` empty topic names (a 2 MB frame), and how much the broker's
    peak resident memory grew for it."""
    resident = _memory_kib(pid, "VmRSS")
    peak = _memory_kib(pid, "VmHWM")
    conn = Connection(port)
    probe = LagProbe(port)
    probe.start()
    try:
        time.sleep(0.05)
        began = time.perf_counter()
        answer = conn.call(METADATA, 1, {"topics": [{"name": ""}] * names})
        elapsed = time.perf_counter() - began
        assert len(answer.topics) == 1  # a name asked many times is answered once
    finally:
        probe.stop.set()
        probe.join(60)
        conn.close()
    grown = _memory_kib(pid, "VmHWM") - max(resident, peak)
    return {"served_s": elapsed, "worst_wait_ms": probe.worst * 1000, "probes": probe.samples,
            "peak_growth_mib": max(grown, 0) / 1024, "frame_mib": (4 + 2 * names) / 2**20}


def big_topic(port: int) -> dict:
    conn = Connection(port)
    probe = LagProbe(port)
    probe.start()
    try:
        time.sleep(0.05)
        create = _create(conn, ["big"], BIG_PARTITIONS)
        delete = _delete(conn, ["big"])
    finally:
        probe.stop.set()
        probe.join(60)
        conn.close()
    return {"create_s": create, "delete_s": delete, "worst_wait_ms": probe.worst * 1000,
            "probes": probe.samples}


def run() -> None:
    print(f"topics: cost per operation at 10 and {LARGE:,} topics, "
          f"and one topic of {BIG_PARTITIONS:,} partitions")
    with broker_server() as (port, pid):
        conn = Connection(port)
        _create(conn, [f"base-{i}" for i in range(10)])
        small = _per_operation(conn, "small")
        _create(conn, [f"meta-{i}" for i in range(190)])
        burst = pipelined_burst(port)
        huge = huge_request(port, pid, 200_000 if QUICK else 1_000_000)
        _delete(conn, [f"meta-{i}" for i in range(190)])
        began = time.perf_counter()
        for start in range(10, LARGE, GROW_BATCH):
            _create(conn, [f"grow-{i}" for i in range(start, min(start + GROW_BATCH, LARGE))])
        grow = time.perf_counter() - began
        large = _per_operation(conn, "large")
        auto = [_auto_create(conn, [f"auto{k}-{i}" for i in range(1_000)]) for k in range(2)]
        conn.close()
        big = big_topic(port)
    print(f"  create one topic: {small[0]:7.2f} ms at 10 topics, {large[0]:7.2f} ms at "
          f"{LARGE:,} (ratio {large[0] / small[0]:.2f})")
    print(f"  delete one topic: {small[1]:7.2f} ms at 10 topics, {large[1]:7.2f} ms at "
          f"{LARGE:,} (ratio {large[1] / small[1]:.2f})")
    print(f"  growing to {LARGE:,} topics in batches of {GROW_BATCH}: {grow:.1f} s")
    print(f"  Metadata auto-creating 1,000 names: {auto[0]:.2f} s, 1,000 more: {auto[1]:.2f} s")
    print(f"  400 pipelined Metadata(all 200 topics) requests in one {burst['bytes']:,}-byte write: "
          f"served in {burst['burst_s']:.2f} s; worst wait of another client meanwhile "
          f"{burst['worst_wait_ms']:.1f} ms over {burst['probes']} requests (goal: under 50 ms)")
    print(f"  one Metadata request naming {200_000 if QUICK else 1_000_000:,} topics: served in "
          f"{huge['served_s']:.2f} s; worst wait of another client meanwhile "
          f"{huge['worst_wait_ms']:.1f} ms (goal: under 50 ms); the broker's peak memory "
          f"grew {huge['peak_growth_mib']:.0f} MiB for the {huge['frame_mib']:.1f} MiB frame")
    print(f"  {BIG_PARTITIONS:,} partitions: create {big['create_s']:.2f} s, delete "
          f"{big['delete_s']:.2f} s; worst wait of another client meanwhile "
          f"{big['worst_wait_ms']:.1f} ms over {big['probes']} requests (goal: under 50 ms)")
    print()
