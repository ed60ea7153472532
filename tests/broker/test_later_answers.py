"""Answers that wait for the coordinator's append (``group.coordinator.append.linger.ms``
-1, the default: a commit's batch is appended once the event loop has served what it
holds): each is sent from the append's own callback, in request order, and one that
cannot be shaped closes its connection alone, with a log line."""

from __future__ import annotations

import asyncio
import time

import pytest

from kcoord.broker import server
from kcoord.broker.apis import REGISTRY, Later
from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ALL_APIS
from tests.support import captured_logs

TOPIC = "later-answers"


def _commit(group: str, offset: int) -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": offset,
                 "committed_leader_epoch": -1, "committed_metadata": None}]}]}


def _committed(client: WireClient, group: str) -> dict:
    answer = client.call(9, 8, {"require_stable": False, "groups": [
        {"group_id": group, "topics": None}]})["groups"][0]
    return {(t["name"], p["partition_index"]): p["committed_offset"]
            for t in answer["topics"] for p in t["partitions"]}


def _answer(client: WireClient, api: int, version: int, correlation_id: int) -> dict:
    """The next answer on a pipelined connection, which must be ``correlation_id``'s."""
    frame = client.recv_frame()
    assert int.from_bytes(frame[:4], "big") == correlation_id
    client.correlation_id = correlation_id
    return client.decode_response(ALL_APIS[api], version, frame)


def _ready(client: WireClient, group: str) -> None:
    """The topic exists and the group's offsets partition is loaded."""
    created = client.call(19, 5, {"topics": [
        {"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []}], "timeout_ms": 10_000, "validate_only": False})
    assert created["topics"][0]["error_code"] in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
    deadline = time.monotonic() + 30
    while True:
        error = client.call(9, 8, {"require_stable": False, "groups": [
            {"group_id": group, "topics": None}]})["groups"][0]["error_code"]
        if error == 0:
            return
        assert error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline


def test_pipelined_commits_are_answered_in_order_between_other_answers(broker):
    group = "later-pipelined"
    with WireClient.to(broker.bootstrap) as client:
        _ready(client, group)
        first = client.correlation_id + 1
        for offset in range(1, 41):
            client.send(8, 9, _commit(group, offset))
            client.send(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        for i in range(40):
            commit = _answer(client, 8, 9, first + 2 * i)
            assert commit["topics"][0]["partitions"][0]["error_code"] == 0
            assert _answer(client, 18, 3, first + 2 * i + 1)["error_code"] == 0
        assert _committed(client, group) == {(TOPIC, 0): 40}


def test_commits_of_many_connections_at_once_are_each_answered(broker):
    group = "later-many"
    clients = [WireClient.to(broker.bootstrap) for _ in range(8)]
    try:
        _ready(clients[0], group)
        for round_ in range(5):
            for i, client in enumerate(clients):
                client.send(8, 9, _commit(f"{group}-{i}", round_ * 10 + i))
            for client in clients:
                assert client.receive(8, 9)["topics"][0]["partitions"][0]["error_code"] == 0
        assert [_committed(clients[0], f"{group}-{i}") for i in range(8)] == \
            [{(TOPIC, 0): 40 + i} for i in range(8)]
    finally:
        for client in clients:
            client.close()


def test_a_commit_decoded_in_a_worker_is_answered_too(broker, monkeypatch):
    # Every request takes the large-request path: decoded in a worker thread, the
    # Later awaited there.
    group = "later-large"
    with WireClient.to(broker.bootstrap) as client:
        _ready(client, group)
        monkeypatch.setattr(server, "OFFLOAD_BYTES", 1)
        answer = client.call(8, 9, _commit(group, 77))
        assert answer["topics"][0]["partitions"][0]["error_code"] == 0
        monkeypatch.undo()
        assert _committed(client, group) == {(TOPIC, 0): 77}


@pytest.fixture
def later_heartbeat(monkeypatch):
    """Heartbeat answered through a Later, as the test sets it up."""
    registration = REGISTRY[12]
    shapes = []

    def handler(ctx, request):
        ticket = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(ticket.set_result, ErrorCode.NONE)
        return Later(ticket, shapes[0])

    monkeypatch.setattr(registration, "handler", handler)
    return shapes


def test_a_later_answer_that_fails_closes_its_connection_alone(broker, later_heartbeat):
    body = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    later_heartbeat.append(lambda error: {"throttle_time_ms": 0, "error_code": int(error)})
    with WireClient.to(broker.bootstrap) as good, WireClient.to(broker.bootstrap) as bad:
        assert good.call(12, 4, body)["error_code"] == 0
        later_heartbeat[0] = lambda error: 1 // 0
        with captured_logs() as logs:
            bad.send(12, 4, body)
            bad.sock.settimeout(10)  # closed at once, not left waiting
            with pytest.raises((ConnectionError, EOFError)):
                bad.receive(12, 4)
        [failed] = [e for e in logs if e["event"] == "request.handler_failed"]
        assert failed["api"] == "Heartbeat" and failed["log_level"] == "error"
        later_heartbeat[0] = lambda error: {"throttle_time_ms": 0, "error_code": int(error)}
        assert good.call(12, 4, body)["error_code"] == 0
