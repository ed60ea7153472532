"""Consumer groups as CI suites use them: confluent-kafka (librdkafka) against
kcoord, next to librdkafka's own mock cluster and, in the full run, Apache
Kafka 4.x (with kcoord's development defaults: initial rebalance delay 0),
the same client and settings in the same run.

Figures per broker:

* subscribe to first assignment, for 1 consumer and for 10 consumers of a
  4-partition topic (the mock cluster's partition count): until every one of
  them has had its assignment and every partition is owned;
* a rebalance when one of 10 leaves (one that owns a partition): from its
  ``close()`` until the other 9 own every partition again;
* synchronous commits per second, over 1 connection and over 8 (each a
  consumer committing its own offsets in a loop, ``commit(asynchronous=False)``),
  and kcoord's CPU time per commit in each (its process, from /proc),
  also against a server that only answers (``commit_ceiling``: canned answers,
  no group, no log): over 1 connection that is the client's own ceiling on this
  machine (over 8 its threads share one interpreter lock: a lower bound only);
* the same canned answers served as a broker serves, by one event loop
  (uvloop) in a Python process of its own: its commits per second and its
  CPU per commit (from /proc), what a broker built this way spends on a
  commit before any of the commit's own work (issue #21's goal is 30 µs for
  all of it);
* heartbeats per second sustained by 20 members of one group (raw wire,
  Heartbeat v4 back to back on 20 connections);
* three consumers subscribing at once (heartbeat interval 1 s): until one
  generation holds all three.

kcoord only:

* memory per 1,000 groups of 3 members (the broker's resident set before and
  after, every group still Stable with its 3 members after), and the Python
  objects an in-process broker holds for them (``tracemalloc``: without what
  the process's allocator keeps besides); both measured once a group in each
  ``__consumer_offsets`` partition has written to it (what a partition's log
  costs once is not a group's; the resident set that first pass took is
  printed beside);
* start-up replay of a ``__consumer_offsets`` partition holding 1M records
  (100k in quick mode): from process start to the ``groups.loaded`` event;
* the worst wait of another client while the 8 connections commit (in a run
  of its own);
* synchronous commits per second under ``kcoord.fsync.policy=batch`` (every
  answer waits for an fsync that covers it) next to the default ``never``;
* the worst wait of another client while the broker serves one JoinGroup
  listing 50,000 protocols (goal, issue #20: under 100 ms, as Kafka);
* the worst wait of another client while one group of 1,000 members (200 in
  quick mode) completes its join: every parked JoinGroup answered, the
  leader's answer listing every member (goal, issue #21: under 20 ms);
* the worst wait of another client while 8 connections commit and
  ``__consumer_offsets`` (64 KiB segments) is compacted meanwhile, again and
  again (goal, issue #21: under 10 ms);
* three consumers started together (median of 9 starts, and how many took
  under 0.5 s) and the commit rates under each
  ``group.coordinator.append.linger.ms`` (-1 adaptive, 0, 5 ms), side by side.

Goals (issue #10): one consumer's first assignment within 50 ms; at least
twice the mock cluster's synchronous commits per second; 1M records replayed
in under 3 s.  Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from benchmarks.bench_server import broker_server, cpu_seconds
from benchmarks.bench_topics import LagProbe
from kcoord.protocol.client import WireClient

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
COMMIT_SECONDS = 0.5 if QUICK else 3.0
HEARTBEAT_SECONDS = 0.5 if QUICK else 3.0
STORM_SECONDS = 2.0 if QUICK else 6.0
REPLAY_RECORDS = 50_000 if QUICK else 1_000_000
MEMORY_GROUPS = 50 if QUICK else 1_000
REPEATS = 1 if QUICK else 3
# Starts of three consumers together per append linger: one start takes about 0.1 s
# or about 1 s (a first member alone in its generation hears of the next one at its
# heartbeat), so a median of a few says little; the count of fast ones is printed too.
TOGETHER_REPEATS = 1 if QUICK else 9
FAST_START_MS = 500
SUB = b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"


PARTITIONS = 4  # what librdkafka's mock cluster gives a topic it creates


def _admin_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    """A new topic: created by CreateTopics, or, on the mock cluster (which has no
    controller for it), by producing to it."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"bench-groups-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(name, partitions, 1)],
                            request_timeout=5)[name].result(10)
    except Exception:
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(name, b"")
        producer.flush(10)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # Kafka lists the leaders a little later
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic and topic.error is None and len(topic.partitions) == partitions and \
                all(p.leader >= 0 for p in topic.partitions.values()):
            return name
        time.sleep(0.05)
    raise RuntimeError(f"topic {name} not ready")


class _Member:
    """A subscribed consumer polling in its own thread."""

    def __init__(self, bootstrap: str, group: str, topic: str):
        from confluent_kafka import Consumer
        self.assigned = threading.Event()
        self.partitions: set[int] = set()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000,
                                  "partition.assignment.strategy": "range"})
        self._stop = threading.Event()

        def on_assign(_c, partitions):
            self.partitions = {p.partition for p in partitions}
            self.assigned.set()

        def on_revoke(_c, _partitions):
            self.partitions = set()
            self.assigned.clear()

        self.began = time.perf_counter()
        self.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self):
        while not self._stop.is_set():
            self.consumer.poll(0.005)

    def close(self):
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def _first_assignment(bootstrap: str, count: int) -> tuple[float, list[_Member]]:
    """Until every consumer has had its assignment (some get no partition when
    there are more consumers than partitions) and every partition is owned."""
    topic = _admin_topic(bootstrap)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    began = time.perf_counter()
    members = [_Member(bootstrap, group, topic) for _ in range(count)]
    deadline = began + 60
    while time.perf_counter() < deadline:
        owned = sorted(p for m in members for p in m.partitions)
        if owned == list(range(PARTITIONS)) and all(m.assigned.is_set() for m in members):
            return (time.perf_counter() - began) * 1000, members
        time.sleep(0.001)
    raise RuntimeError(f"{count} consumers got no full assignment within 60 s")


def _assignments(bootstrap: str) -> dict:
    figures = {}
    one, members = _first_assignment(bootstrap, 1)
    for m in members:
        m.close()
    figures["first 1"] = one
    figures["first 3"] = _started_together(bootstrap)
    if QUICK:
        return figures  # ten consumers rebalance for seconds: the full run only
    ten, members = _first_assignment(bootstrap, 10)
    try:
        leaving = next(m for m in members if m.partitions)  # one that owns a partition
        members.remove(leaving)
        began = time.perf_counter()
        leaving.close()
        deadline = began + 60
        while time.perf_counter() < deadline:
            owned = sorted(p for m in members for p in m.partitions)
            if owned == list(range(PARTITIONS)):
                break
            time.sleep(0.001)
        else:
            raise RuntimeError("the 9 did not take over within 60 s")
        figures["leave"] = (time.perf_counter() - began) * 1000
    finally:
        for m in members:
            m.close()
    figures["first 10"] = ten
    return figures


def _started_together(bootstrap: str, count: int = 3) -> float:
    """Consumers subscribing at once (heartbeat interval 1 s): until one generation
    holds them all.  A first member whose one-member generation completes before
    the others' joins arrive learns of the next rebalance only at its next
    heartbeat."""
    one, members = _first_assignment(bootstrap, count)
    for m in members:
        m.close()
    return one


def _lingers() -> dict[int, dict]:
    """Three consumers started together and the commit rate, per append linger."""
    figures = {}
    for linger in (-1, 0, 5):
        with broker_server("--override",
                           f"group.coordinator.append.linger.ms={linger}") as (port, _pid):
            bootstrap = f"127.0.0.1:{port}"
            starts = [_started_together(bootstrap) for _ in range(TOGETHER_REPEATS)]
            figures[linger] = {
                "first 3": statistics.median(starts),
                "fast": sum(ms < FAST_START_MS for ms in starts), "starts": len(starts),
                **{n: _commits(bootstrap, n, COMMIT_SECONDS) for n in (1, 8)}}
    return figures


def _commits(bootstrap: str, connections: int, seconds: float, topic: str | None = None) -> float:
    """Synchronous commits per second, summed over ``connections`` consumers."""
    from confluent_kafka import Consumer, TopicPartition
    topic = topic or _admin_topic(bootstrap)
    counts = [0] * connections
    start = threading.Barrier(connections + 1)

    def run(i):
        consumer = Consumer({"bootstrap.servers": bootstrap,
                             "group.id": f"bench-commit-{uuid.uuid4().hex[:8]}",
                             "enable.auto.commit": False})
        offsets = [TopicPartition(topic, 0, 0)]
        consumer.commit(offsets=offsets, asynchronous=False)  # coordinator found
        start.wait()
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            n += 1
            offsets[0].offset = n
            consumer.commit(offsets=offsets, asynchronous=False)
        counts[i] = n
        consumer.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    start.wait()
    for t in threads:
        t.join(seconds + 60)
    return sum(counts) / seconds


def _stable_group(bootstrap: str, group: str, size: int, assignment: bytes = b"",
                  timeout: float = 60, session_timeout_ms: int = 30_000,
                  ) -> list[tuple[WireClient, str, int]]:
    """``size`` members in a Stable group, each on its own connection, driven the
    way clients drive them (join, sync, heartbeat, re-join when told): with an
    initial delay of 0 the first joins complete before the later ones arrive."""
    join = {"group_id": group, "session_timeout_ms": session_timeout_ms,
            "rebalance_timeout_ms": 10_000,
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUB}], "reason": None}
    done = threading.Event()
    results: list = [None] * size

    def member(i):
        client = WireClient.to(bootstrap, timeout=timeout)
        member_id, generation = "", -1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if generation < 0:
                joined = client.call(11, 5, {**join, "member_id": member_id})
                member_id = joined["member_id"] if joined["error_code"] in (0, 79) else ""
                if joined["error_code"] != 0:
                    continue
                generation = joined["generation_id"]
                synced = client.call(14, 3, {
                    "group_id": group, "generation_id": generation, "member_id": member_id,
                    "group_instance_id": None,
                    "assignments": [{"member_id": m["member_id"], "assignment": assignment}
                                    for m in joined["members"]]})
                if synced["error_code"] != 0:
                    generation = -1
                    continue
            results[i] = (client, member_id, generation)
            if done.is_set():
                return
            beat = client.call(12, 3, {"group_id": group, "generation_id": generation,
                                       "member_id": member_id, "group_instance_id": None})
            if beat["error_code"] != 0:
                generation = -1
                results[i] = None
            time.sleep(0.002)
        raise RuntimeError(f"member {i} of {group} found no stable generation")

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(size)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = list(results)
        if all(current) and len({r[2] for r in current}) == 1:
            done.set()
            break
        time.sleep(0.002)
    done.set()
    for t in threads:
        t.join(timeout)
    if not all(results) or len({r[2] for r in results}) != 1:
        raise RuntimeError(f"{group}: no stable generation of {size} members")
    return results


def _heartbeats(bootstrap: str, members: int = 20, seconds: float = HEARTBEAT_SECONDS) -> float:
    """Heartbeats per second from ``members`` members of one Stable group."""
    group = f"bench-hb-{uuid.uuid4().hex[:8]}"
    stable = _stable_group(bootstrap, group, members)
    counts = [0] * members

    def run(i):
        client, member_id, generation = stable[i]
        body = {"group_id": group, "generation_id": generation, "member_id": member_id,
                "group_instance_id": None}
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            answer = client.call(12, 4, body)
            if answer["error_code"] != 0:
                raise RuntimeError(f"heartbeat answered {answer}")
            n += 1
        counts[i] = n

    threads = [threading.Thread(target=run, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 30)
    for client, _m, _g in stable:
        client.close()
    return sum(counts) / seconds


def _measure(bootstrap: str, port: int | None = None, heartbeats: bool = True,
             pid: int | None = None) -> dict:
    """``pid``: the broker's process, whose CPU time per commit is reported."""
    figures = {}
    runs = [_assignments(bootstrap) for _ in range(REPEATS)]
    for key in runs[0]:
        figures[key] = statistics.median(r[key] for r in runs)
    for connections in (1, 8):
        began = cpu_seconds(pid) if pid is not None else None
        rate = figures[f"commits {connections}"] = _commits(bootstrap, connections,
                                                            COMMIT_SECONDS)
        if began is not None and rate > 0:
            used = cpu_seconds(pid) - began
            figures[f"cpu per commit {connections}"] = used / (rate * COMMIT_SECONDS) * 1e6
    if port is not None:
        # The other client's worst wait, in a run of its own: its requests back to
        # back take a core's worth of CPU, which the figures above leave out.
        probe = LagProbe(port)
        probe.start()
        try:
            _commits(bootstrap, 8, COMMIT_SECONDS)
        finally:
            probe.stop.set()
            probe.join(60)
            figures["lag"] = probe.worst * 1000
    figures["heartbeats"] = _heartbeats(bootstrap) if heartbeats else None
    return figures


def _compaction_under_storm(seconds: float = STORM_SECONDS) -> dict:
    """Another client's worst wait while 8 connections commit the same offsets
    over and over and ``__consumer_offsets`` segments (64 KiB here) roll and are
    compacted every few hundred milliseconds under the storm."""
    events: list = []
    with broker_server("--override", "offsets.topic.segment.bytes=65536",
                       "--override", "log.cleaner.backoff.ms=100",
                       "--override", "kcoord.offsets.topic.min.compaction.lag.ms=0",
                       events=events) as (port, _pid):
        probe = LagProbe(port)
        probe.start()
        try:
            _commits(f"127.0.0.1:{port}", 8, seconds)
        finally:
            probe.stop.set()
            probe.join(60)
        compacted = [e for e in events if e.get("event") == "log_compacted"
                     and str(e.get("log", "")).startswith("__consumer_offsets")]
    return {"worst_wait_ms": probe.worst * 1000, "compactions": len(compacted),
            "swap_ms": max((e["seconds"] * 1000 for e in compacted), default=0.0)}


def _join_many_protocols(port: int, protocols: int = 50_000) -> dict:
    """Another client's worst wait while one JoinGroup listing ``protocols``
    protocols (a static member: answered at once) is served."""
    from kcoord.protocol.headers import frame_request
    from kcoord.protocol.messages import ALL_APIS

    body = {"group_id": "bench-many-protocols", "session_timeout_ms": 30_000,
            "rebalance_timeout_ms": 30_000, "member_id": "", "group_instance_id": "bench-1",
            "protocol_type": "consumer", "reason": None,
            "protocols": [{"name": f"bench-assignor-{i:06d}", "metadata": SUB}
                          for i in range(protocols)]}
    with WireClient("127.0.0.1", port) as client:
        client.correlation_id += 1
        frame = frame_request(ALL_APIS[11], 7, client.correlation_id, client.client_id, body)
        probe = LagProbe(port)
        probe.start()
        try:
            began = time.perf_counter()
            client.sock.sendall(frame)
            answer = client.receive(11, 7)
            served = time.perf_counter() - began
        finally:
            probe.stop.set()
            probe.join(60)
    assert answer["error_code"] == 0, answer["error_code"]
    return {"served_s": served, "worst_wait_ms": probe.worst * 1000,
            "frame_mib": len(frame) / 2**20}


def _join_of_many_members(port: int, members: int) -> dict:
    """Another client's worst wait while ``members`` static members, parked in the
    initial rebalance delay, all get their JoinGroup answers at once."""
    import resource
    import socket
    import struct

    from kcoord.broker.healthcheck import recv_exact
    from kcoord.protocol.headers import frame_request
    from kcoord.protocol.messages import ALL_APIS

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(members)]
    began = time.perf_counter()
    for i, sock in enumerate(socks):
        sock.sendall(frame_request(ALL_APIS[11], 7, 1, f"bench-{i}", {
            "group_id": "bench-many-members", "session_timeout_ms": 30_000,
            "rebalance_timeout_ms": 30_000, "member_id": "",
            "group_instance_id": f"bench-member-{i:05d}", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUB}], "reason": None}))
    # The probe starts once every JoinGroup is parked (the initial delay, 1 s, is
    # extended by each new member, so the join phase ends 1 s after the last):
    # what it sees is the join phase ending, not the burst of requests arriving.
    probe = LagProbe(port)
    probe.start()
    try:
        sizes = []
        for sock in socks:
            (size,) = struct.unpack(">i", recv_exact(sock, 4))
            recv_exact(sock, size)
            sizes.append(size)
        answered = time.perf_counter() - began
    finally:
        probe.stop.set()
        probe.join(60)
        for sock in socks:
            sock.close()
    return {"members": members, "answered_s": answered, "worst_wait_ms": probe.worst * 1000,
            "leader_answer_kib": max(sizes) / 1024}


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


# Groups measured for memory: their members' sessions outlast the measurement
# (30 s would end some on a slow machine, and a group with fewer members holds less).
MEMORY_SESSION_MS = 600_000


def _memory_per_1000_groups(port: int, pid: int) -> tuple[float, float]:
    """KiB of broker memory per 1,000 Stable groups of 3 members, each member
    with a 40-byte assignment (the broker's resident set before and after), once
    every ``__consumer_offsets`` partition has been written to (what a partition
    costs once is not a group's); and the KiB that first pass took (the
    partitions' logs and those groups)."""
    bootstrap = f"127.0.0.1:{port}"
    start = _rss_kib(pid)
    _make_groups(bootstrap, _warm_names(PARTITIONS_FOR_MEMORY))
    before = _rss_kib(pid)
    names = [f"memory-{g}" for g in range(MEMORY_GROUPS)]
    _make_groups(bootstrap, names)
    after = _rss_kib(pid)
    _check_stable(bootstrap, names)
    return (after - before) * 1000 / MEMORY_GROUPS, before - start


PARTITIONS_FOR_MEMORY = 50  # offsets.topic.num.partitions of the brokers measured


def _warm_names(partitions: int) -> list[str]:
    """A group name for each ``__consumer_offsets`` partition."""
    from kcoord.broker.groups.placement import coordinator_partition
    names: dict[int, str] = {}
    i = 0
    while len(names) < partitions:
        name = f"warm-{i}"
        names.setdefault(coordinator_partition(name, partitions), name)
        i += 1
    return [names[p] for p in range(partitions)]


def _make_groups(bootstrap: str, names: list[str]) -> None:
    for name in names:
        for client, _m, _g in _stable_group(bootstrap, name, 3, assignment=b"\x00" * 40,
                                            session_timeout_ms=MEMORY_SESSION_MS):
            client.close()


def _check_stable(bootstrap: str, names: list[str]) -> None:
    """Every group measured is still Stable with its 3 members (DescribeGroups)."""
    client = WireClient.to(bootstrap)
    try:
        for start in range(0, len(names), 200):
            asked = names[start:start + 200]
            answer = client.call(15, 0, {"groups": asked})
            if [g["group_id"] for g in answer["groups"]] != asked:
                raise RuntimeError("memory bench: DescribeGroups did not describe every group")
            for g in answer["groups"]:
                if g["group_state"] != "Stable" or len(g["members"]) != 3:
                    raise RuntimeError(f"memory bench: {g['group_id']} is {g['group_state']} "
                                       f"with {len(g['members'])} members")
    finally:
        client.close()


# argv: bootstrap, then "warm" (a group in each __consumer_offsets partition) or a count.
_MAKE_GROUPS = """
import sys
from benchmarks.bench_groups import PARTITIONS_FOR_MEMORY, _make_groups, _warm_names
bootstrap, what = sys.argv[1], sys.argv[2]
_make_groups(bootstrap, _warm_names(PARTITIONS_FOR_MEMORY) if what == "warm"
             else [f"memory-{g}" for g in range(int(what))])
"""


def _live_memory_per_1000_groups() -> float:
    """KiB of Python objects an in-process broker holds per 1,000 Stable groups of
    3 members (``tracemalloc``: what the broker keeps alive, without what its
    process's allocator holds besides; the groups are made by another process,
    once every ``__consumer_offsets`` partition has been written to)."""
    import gc
    import tracemalloc

    from kcoord.broker.embedded import EmbeddedBroker
    with EmbeddedBroker() as broker:
        subprocess.run([sys.executable, "-c", _MAKE_GROUPS, broker.bootstrap, "warm"],
                       cwd=Path(__file__).resolve().parent.parent, check=True)
        gc.collect()
        tracemalloc.start()
        try:
            subprocess.run([sys.executable, "-c", _MAKE_GROUPS, broker.bootstrap,
                            str(MEMORY_GROUPS)], cwd=Path(__file__).resolve().parent.parent,
                           check=True)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        _check_stable(broker.bootstrap, [f"memory-{g}" for g in range(MEMORY_GROUPS)])
    return held / 1024 * 1000 / MEMORY_GROUPS


def offsets_log(data_dir: str, records: int) -> None:
    """``__consumer_offsets`` partition 0 of ``data_dir`` holding ``records`` commit records
    (1,000 groups x 10 partitions, committed again and again, 500 per batch)."""
    from kcoord.protocol import group_records as G
    from kcoord.protocol.records import Record, build_batch
    from kcoord.storage.config import LogConfig
    from kcoord.storage.log import PartitionLog
    from kcoord.storage.validator import AppendOrigin

    log = PartitionLog(os.path.join(data_dir, "__consumer_offsets-0"),
                       LogConfig(segment_bytes=100 << 20))
    value = G.offset_commit_value(123_456, "", 1_700_000_000_000)
    keys = [G.offset_commit_key(f"group-{g}", "topic", p) for g in range(1_000) for p in range(10)]
    for start in range(0, records, 500):
        log.append(build_batch([Record(i, 1_700_000_000_000, keys[(start + i) % len(keys)], value)
                                for i in range(min(500, records - start))]),
                   origin=AppendOrigin.COORDINATOR)
    log.close()


def _replay_seconds(probed: bool = False) -> tuple[float, int, float | None]:
    """A data dir whose ``__consumer_offsets`` partition 0 holds REPLAY_RECORDS commit
    records (``offsets_log``); the time from starting the broker process to its
    ``groups.loaded`` event, and with ``probed`` another client's worst wait
    meanwhile (it starts as the broker listens, after one request has warmed the
    broker's codec; the replay then shares the interpreter with it)."""
    with tempfile.TemporaryDirectory(prefix="kcoord-replay-") as data_dir:
        offsets_log(data_dir, REPLAY_RECORDS)
        began = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "kcoord.broker.cli", "serve", "--host",
                                 "127.0.0.1", "--port", "0", "--data-dir", data_dir,
                                 "--log-format", "json"],
                                cwd=Path(__file__).resolve().parent.parent,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        probe = None
        try:
            for line in proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") == "broker.started" and probed:
                    with WireClient("127.0.0.1", event["port"]) as client:
                        client.call(18, 0, {})
                    probe = LagProbe(event["port"])
                    probe._proc.start()  # at once: the replay is already running
                if event.get("event") == "groups.loaded":
                    loaded = time.perf_counter() - began
                    if probe is None:
                        return loaded, event["records"], None
                    probe.stop.set()
                    probe.join(60)
                    return loaded, event["records"], probe.worst * 1000
            raise RuntimeError("the broker exited before loading its groups")
        finally:
            if probe is not None and not probe.stop.is_set():
                probe.stop.set()
                probe.join(10)
            proc.terminate()
            proc.wait(15)


def _mock() -> dict:
    from benchmarks.bench_data import mock_cluster
    with mock_cluster() as address:
        # Its JoinGroup answers carry a null member metadata where the field is
        # not nullable: raw-wire members cannot read them (librdkafka's own
        # parser lets it pass), so no heartbeat figure.
        return _measure(address, heartbeats=False)


def _kafka() -> dict | None:
    from benchmarks.bench_data import on_kafka
    from tests.reference.fixtures import create_offsets_topic
    return on_kafka(_measure, prepare=create_offsets_topic)


def _ceiling() -> dict[int, float]:
    """Synchronous commits per second against ``commit_ceiling`` (no group, no log,
    canned answers): the most this client reaches against any server here."""
    from benchmarks.commit_ceiling import CommitCeiling
    server = CommitCeiling("ceiling-topic")
    with server.running():
        return {n: _commits(server.bootstrap, n, COMMIT_SECONDS, topic=server.topic)
                for n in (1, 8)}


def _loop_ceiling() -> dict:
    """The same canned answers from one event loop in a process of its own, as a
    broker serves: commits per second and that process's CPU per commit, the
    least a broker built this way spends on a commit before doing its work."""
    from benchmarks.commit_ceiling import LoopCommitCeiling
    server = LoopCommitCeiling("ceiling-topic")
    figures = {}
    with server.running():
        for n in (1, 8):
            began = cpu_seconds(server.pid)
            rate = figures[n] = _commits(server.bootstrap, n, COMMIT_SECONDS, topic=server.topic)
            if began is not None and rate > 0:
                figures[f"cpu {n}"] = (cpu_seconds(server.pid) - began) / (
                    rate * COMMIT_SECONDS) * 1e6
    return figures


def run() -> None:
    print("consumer groups: confluent-kafka through kcoord, librdkafka's mock cluster and Kafka")
    with broker_server() as (port, pid):
        ours = _measure(f"127.0.0.1:{port}", port=port, pid=pid)
        memory, partitions_memory = _memory_per_1000_groups(port, pid)
        join = _join_many_protocols(port)
    with broker_server("--override", "group.initial.rebalance.delay.ms=1000") as (port, _pid):
        many = _join_of_many_members(port, 200 if QUICK else 1_000)
    with broker_server("--override", "kcoord.fsync.policy=batch") as (port, _pid):
        bootstrap = f"127.0.0.1:{port}"
        batch = {n: _commits(bootstrap, n, COMMIT_SECONDS) for n in (1, 8)}
    mock = _mock()
    kafka = _kafka()
    lingers = _lingers()
    storm = _compaction_under_storm()
    rows = [("first assignment, 1 consumer", "first 1", "ms"),
            ("3 consumers started together", "first 3", "ms"),
            ("first assignment, 10 consumers", "first 10", "ms"),
            ("rebalance when 1 of 10 leaves", "leave", "ms"),
            ("sync commits/s, 1 connection", "commits 1", "/s"),
            ("sync commits/s, 8 connections", "commits 8", "/s"),
            ("heartbeats/s, 20 members", "heartbeats", "/s")]
    for label, key, unit in rows:
        if key not in ours:
            continue  # the full run only
        line = f"  {label:<32} kcoord {ours[key]:9.1f} {unit:<3}"
        for name, theirs in (("mock", mock), ("Kafka", kafka)):
            if theirs and theirs.get(key):
                line += f" {name} {theirs[key]:9.1f}  (kcoord/{name} {ours[key] / theirs[key]:5.2f})"
            elif theirs:
                line += f" {name}       n/a"
        print(line)
    print(f"  memory per 1,000 groups of 3 members: {memory / 1024:.1f} MiB "
          f"(resident set, measured over {MEMORY_GROUPS:,} groups; before them, a group in each "
          f"of the {PARTITIONS_FOR_MEMORY} __consumer_offsets partitions, their logs and those "
          f"groups took {partitions_memory / 1024:.1f} MiB)")
    print(f"  Python objects held per 1,000 groups of 3 members: "
          f"{_live_memory_per_1000_groups() / 1024:.1f} MiB (tracemalloc, an in-process "
          f"broker, also after a group in each partition; goal for memory: under 3 MiB)")
    seconds, records, _ = _replay_seconds()
    _, _, replay_wait = _replay_seconds(probed=True)
    print(f"  start-up replay of {records:,} __consumer_offsets records: {seconds:.2f} s "
          f"(goal for 1M: under 3 s); worst wait of another client meanwhile "
          f"{replay_wait:.1f} ms (goal: under 10 ms)")
    print(f"  worst wait of another client while 8 connections commit: {ours['lag']:.1f} ms "
          f"(goal: under 50 ms)")
    print(f"  sync commits/s with kcoord.fsync.policy=batch (each answer after an fsync): "
          f"{batch[1]:,.0f} over 1 connection ({batch[1] / ours['commits 1']:.2f} of never), "
          f"{batch[8]:,.0f} over 8 ({batch[8] / ours['commits 8']:.2f} of never)")
    print(f"  worst wait of another client during one JoinGroup of 50,000 protocols "
          f"({join['frame_mib']:.1f} MiB, answered in {join['served_s'] * 1000:.0f} ms): "
          f"{join['worst_wait_ms']:.1f} ms (goal: under 100 ms)")
    print(f"  worst wait of another client while a group of {many['members']:,} members "
          f"completes its join (the leader's answer {many['leader_answer_kib']:.0f} KiB): "
          f"{many['worst_wait_ms']:.1f} ms (goal: under 20 ms)")
    print(f"  worst wait of another client while __consumer_offsets is compacted under a commit "
          f"storm ({storm['compactions']} compactions, the longest {storm['swap_ms']:.0f} ms): "
          f"{storm['worst_wait_ms']:.1f} ms (goal: under 10 ms)")
    for linger, figures in lingers.items():
        print(f"  group.coordinator.append.linger.ms={linger:<3} 3 consumers started together "
              f"{figures['first 3']:7.1f} ms, sync commits/s {figures[1]:8,.0f} over 1 "
              f"connection, {figures[8]:8,.0f} over 8 (starts: median of {figures['starts']}, "
              f"{figures['fast']} under {FAST_START_MS} ms)")
    ceiling = _ceiling()
    print(f"  sync commits/s against a server that only answers: {ceiling[1]:,.0f} over 1 "
          f"connection (the client's ceiling; mock/ceiling {mock['commits 1'] / ceiling[1]:.2f}, "
          f"kcoord/ceiling {ours['commits 1'] / ceiling[1]:.2f}; goal 0.7), {ceiling[8]:,.0f} "
          f"over 8 (a Python server: a lower bound; kcoord/ceiling "
          f"{ours['commits 8'] / ceiling[8]:.2f}, goal 0.6)")
    loop = _loop_ceiling()
    line = (f"  the same answers from one event loop (a Python process of its own, uvloop, no "
            f"work): {loop[1]:,.0f} over 1 connection ({loop[1] / ceiling[1]:.2f} of the "
            f"ceiling), {loop[8]:,.0f} over 8 ({loop[8] / ceiling[8]:.2f})")
    if "cpu 8" in loop:
        line += (f"; its CPU per commit {loop['cpu 1']:.0f} µs over 1, {loop['cpu 8']:.0f} µs "
                 f"over 8: a Python broker's cost before a commit's own work")
    print(line)
    if "cpu per commit 8" in ours:
        print(f"  broker CPU per synchronous commit: {ours['cpu per commit 1']:.0f} µs over 1 "
              f"connection, {ours['cpu per commit 8']:.0f} µs over 8 (goal, issue #21: at "
              f"most 30; /proc counts 10 ms ticks)")
    print(f"  goals: first assignment {ours['first 1']:.0f} ms (under 50), sync commits "
          f"{ours['commits 1'] / mock['commits 1']:.2f}x mock (at least 2)")
    print()
