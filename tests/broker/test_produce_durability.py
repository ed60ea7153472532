"""Produce and OffsetCommit answers under each ``kcoord.fsync.policy``.

``batch`` and ``always`` promise that an acknowledged write survives a machine
crash: the answer must leave only after the fsync of the segment holding the
bytes has returned.  ``never`` (the default) promises a process crash only: the
answer must not wait for any fsync.

The broker runs in this process, so ``os.fsync`` is wrapped: an fsync of the
watched segment files is recorded and held until the test releases it.  While
it is held the answer must not have arrived (checked after a full round trip
on another connection, which shows the broker is serving); once released, it
arrives.  Every wait is bounded.
"""

from __future__ import annotations

import os
import select
import threading
import time

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import Record, build_batch
from kcoord.protocol.client import WireClient

DEADLINE_S = 15
TOPIC = "durable"


class FsyncGate:
    """Holds every fsync of a file whose path ``watch`` accepts until released."""

    def __init__(self, watch):
        self.watch = watch
        self.real = os.fsync
        self.cond = threading.Condition()
        self.started = 0
        self.finished = 0
        self.permits = 0
        self.opened = False
        self.events: list[str] = []

    def fsync(self, fd: int) -> None:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = ""
        if not self.watch(path):
            return self.real(fd)
        with self.cond:
            self.started += 1
            self.events.append("fsync started")
            self.cond.notify_all()
            # Bounded: a test that forgets to release fails on its own assertions.
            self.cond.wait_for(lambda: self.opened or self.permits > 0, timeout=DEADLINE_S)
            if self.permits > 0:
                self.permits -= 1
        self.real(fd)
        with self.cond:
            self.finished += 1
            self.events.append("fsync returned")
            self.cond.notify_all()

    def wait_started(self, count: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.started >= count, timeout=DEADLINE_S), \
                f"{count} fsync(s) of the watched files expected, {self.started} started"

    def release(self, count: int = 1) -> None:
        with self.cond:
            self.permits += count
            self.cond.notify_all()

    def open(self) -> None:
        with self.cond:
            self.opened = True
            self.cond.notify_all()

    def note(self, event: str) -> None:
        with self.cond:
            self.events.append(event)


@pytest.fixture
def gated(monkeypatch):
    """Install a gate on ``os.fsync``; it is opened (nothing held) at the end."""
    gates = []

    def install(watch) -> FsyncGate:
        gate = FsyncGate(watch)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        gates.append(gate)
        return gate

    yield install
    for gate in gates:
        gate.open()


def _segment_of(topic: str):
    return lambda path: f"/{topic}-" in path and path.endswith(".log")


def _start(make_broker, policy: str):
    node = make_broker(overrides={"kcoord.fsync.policy": policy})
    with WireClient.to(node.bootstrap) as client:
        answer = client.call(19, 5, {"topics": [{"name": TOPIC, "num_partitions": 1,
                                                 "replication_factor": 1, "configs": []}],
                                     "timeout_ms": 5000})
        assert answer["topics"][0]["error_code"] == 0, answer
    return node


def _send_produce(client: WireClient, value: bytes) -> None:
    client.send(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                       "topic_data": [{"name": TOPIC, "partition_data": [
                           {"index": 0, "records": build_batch(
                               [Record(None, int(time.time() * 1000), None, value)])}]}]})


def _produce_answer(client: WireClient) -> dict:
    return client.receive(0, 9)["responses"][0]["partition_responses"][0]


def _log_end(client: WireClient) -> int:
    answer = client.call(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return answer["topics"][0]["partitions"][0]["offset"]


def _wait_log_end(client: WireClient, offset: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while _log_end(client) < offset:
        assert time.monotonic() < deadline, f"the log never reached offset {offset}"
        time.sleep(0.01)


def _assert_unanswered(waiting: WireClient, other: WireClient) -> None:
    """No answer on ``waiting``, after a round trip on ``other`` shows the broker serving."""
    assert other.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})[
        "error_code"] == 0
    readable, _, _ = select.select([waiting.sock], [], [], 0.2)
    assert not readable, "answered while the fsync of its bytes was still running"


@pytest.mark.parametrize("policy", ["batch", "always"])
def test_produce_is_answered_only_after_its_fsync_returned(make_broker, gated, policy):
    node = _start(make_broker, policy)
    gate = gated(_segment_of(TOPIC))
    with WireClient.to(node.bootstrap) as producer, WireClient.to(node.bootstrap) as other:
        _send_produce(producer, b"must survive a machine crash")
        gate.wait_started(1)
        _assert_unanswered(producer, other)
        gate.release()
        answer = _produce_answer(producer)
        gate.note("answered")
    assert (answer["error_code"], answer["base_offset"]) == (0, 0)
    assert gate.events[:3] == ["fsync started", "fsync returned", "answered"]


def test_batch_policy_appends_during_an_fsync_wait_for_the_next_one(make_broker, gated):
    """Group commit: an fsync covers the appends written before it started; an append
    written while it runs is answered only after the next fsync."""
    node = _start(make_broker, "batch")
    gate = gated(_segment_of(TOPIC))
    with WireClient.to(node.bootstrap) as first, WireClient.to(node.bootstrap) as second, \
            WireClient.to(node.bootstrap) as other:
        _send_produce(first, b"one")
        gate.wait_started(1)
        _send_produce(second, b"two")
        _wait_log_end(other, 2)  # "two" is written, while the first fsync is held
        _assert_unanswered(first, other)
        _assert_unanswered(second, other)
        gate.release()
        assert (_produce_answer(first)["base_offset"]) == 0
        gate.wait_started(2)  # the next round, for "two"
        _assert_unanswered(second, other)
        gate.release()
        answer = _produce_answer(second)
        gate.note("second answered")
    assert (answer["error_code"], answer["base_offset"]) == (0, 1)
    assert gate.events.index("second answered") > \
        [i for i, e in enumerate(gate.events) if e == "fsync returned"][1]


def test_never_policy_answers_without_waiting_for_an_fsync(make_broker, gated):
    node = _start(make_broker, "never")
    gate = gated(_segment_of(TOPIC))  # any fsync of the segment would be held
    with WireClient.to(node.bootstrap) as producer:
        for i in range(3):
            _send_produce(producer, b"fast %d" % i)
            answer = _produce_answer(producer)
            assert (answer["error_code"], answer["base_offset"]) == (0, i)
    assert gate.started == 0


# -- offset commits: the coordinator's appends to __consumer_offsets ----------------

GROUP = "durable-group"


def _ready_group(client: WireClient) -> None:
    """Wait until the group's __consumer_offsets partition is loaded."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        group = _fetch_offsets(client)
        if group["error_code"] == 0:
            return
        assert group["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, group
        assert time.monotonic() < deadline, "the coordinator never loaded"
        time.sleep(0.01)


def _fetch_offsets(client: WireClient) -> dict:
    return client.call(9, 8, {"require_stable": False, "groups": [
        {"group_id": GROUP, "topics": None}]})["groups"][0]


def _send_commit(client: WireClient, offset: int) -> None:
    client.send(8, 9, {
        "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": None}]}]})


def _commit_error(client: WireClient) -> int:
    return client.receive(8, 9)["topics"][0]["partitions"][0]["error_code"]


def test_offset_commit_under_batch_is_answered_after_its_fsync(make_broker, gated):
    node = _start(make_broker, "batch")
    gate = gated(lambda path: "/__consumer_offsets-" in path and path.endswith(".log"))
    with WireClient.to(node.bootstrap) as committer, WireClient.to(node.bootstrap) as other:
        _ready_group(other)
        _send_commit(committer, 42)
        gate.wait_started(1)
        _assert_unanswered(committer, other)
        gate.release()
        assert _commit_error(committer) == 0
        gate.note("answered")
        committed = _fetch_offsets(other)["topics"][0]["partitions"][0]["committed_offset"]
    assert committed == 42
    assert gate.events[:3] == ["fsync started", "fsync returned", "answered"]


def test_offset_commit_under_never_does_not_wait_for_an_fsync(make_broker, gated):
    node = _start(make_broker, "never")
    gate = gated(lambda path: "/__consumer_offsets-" in path and path.endswith(".log"))
    with WireClient.to(node.bootstrap) as client:
        _ready_group(client)
        _send_commit(client, 7)
        assert _commit_error(client) == 0
        assert _fetch_offsets(client)["topics"][0]["partitions"][0]["committed_offset"] == 7
    assert gate.started == 0
