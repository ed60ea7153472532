"""The codecs of a client's first requests are compiled while a broker that owns
its process is idle (and, for child-process brokers, once in the launcher before
it forks them), so that a client's first request of each kind holds no other
client while its codec compiles (2-9 ms each).  A broker embedded in a program
compiles them as they are used."""

from __future__ import annotations

import json
import os
import time

import pytest

from kcoord.broker import launcher
from kcoord.broker.apis import FIRST_REQUESTS, REGISTRY, codecs_to_warm, load_handlers
from kcoord.protocol.client import WireClient
from tests.support import BrokerThread


@pytest.fixture
def cold_codecs(monkeypatch):
    """The codecs of the first requests as in a process that has compiled none."""
    load_handlers()
    for key in FIRST_REQUESTS:
        monkeypatch.setattr(REGISTRY[key].schema, "_codecs", {})


def _compiled() -> int:
    return sum(schema.compiled(version, direction)
               for schema, version, direction in codecs_to_warm())


def test_every_served_version_of_the_first_requests_is_warmed_newest_first():
    load_handlers()
    warm = codecs_to_warm()
    expected = {(REGISTRY[key].schema.name, version, direction) for key in FIRST_REQUESTS
                for version in range(REGISTRY[key].min_version, REGISTRY[key].max_version + 1)
                for direction in ("request", "response")}
    assert {(schema.name, version, direction) for schema, version, direction in warm} == expected
    assert len(warm) == len(expected)
    # ApiVersions (a client's very first request) leads, at its newest version.
    assert (warm[0][0].key, warm[0][1]) == (18, REGISTRY[18].max_version)
    metadata = [version for schema, version, _d in warm if schema.key == 3]
    assert metadata == sorted(metadata, reverse=True)


def test_an_idle_broker_compiles_the_codecs_of_first_requests(cold_codecs, tmp_path):
    with BrokerThread(tmp_path, own_process=True) as node:
        assert node.call(lambda: node.broker.codecs_warm.wait()) is True
        assert _compiled() == len(codecs_to_warm())
        with WireClient("127.0.0.1", node.port) as client:
            assert client.call(18, 0, {})["error_code"] == 0


def test_a_broker_embedded_in_a_program_leaves_them_to_first_use(cold_codecs, tmp_path):
    with BrokerThread(tmp_path) as node:
        with WireClient("127.0.0.1", node.port) as client:
            assert client.call(18, 0, {})["error_code"] == 0
        time.sleep(0.3)  # ample for dozens of compilations
        assert not node.call(lambda: node.broker.codecs_warm.is_set())
        assert _compiled() <= 4  # ApiVersions v0 (and the newest a client asks first)


def test_warming_waits_while_clients_are_served(cold_codecs, tmp_path):
    with BrokerThread(tmp_path, own_process=True) as node:
        def hold():  # a client's bytes, as if received from now on for an hour
            node.broker.last_activity = time.monotonic() + 3600
            return _compiled()

        held_at = node.call(hold)
        time.sleep(0.3)  # ample for dozens of compilations
        assert node.call(_compiled) == held_at < len(codecs_to_warm())
        assert not node.call(lambda: node.broker.codecs_warm.is_set())

        def release():
            node.broker.last_activity = 0.0

        node.call(release)
        assert node.call(lambda: node.broker.codecs_warm.wait()) is True
        assert _compiled() == len(codecs_to_warm())


def test_warming_waits_for_the_groups_to_load(cold_codecs, tmp_path, monkeypatch):
    """The replay of ``__consumer_offsets`` at start runs in a worker thread; a
    codec compiled on the loop meanwhile would take the interpreter from it."""
    import threading

    from kcoord.broker.groups import service

    with BrokerThread(tmp_path) as node:  # a committed offset to replay at the next start
        with WireClient("127.0.0.1", node.port) as client:
            client.call(19, 4, {"topics": [{"name": "t", "num_partitions": 1,
                                            "replication_factor": 1, "assignments": [],
                                            "configs": []}],
                                "timeout_ms": 5000, "validate_only": False})
            answer = client.call(8, 2, {
                "group_id": "replayed", "generation_id_or_member_epoch": -1, "member_id": "",
                "retention_time_ms": -1, "topics": [{"name": "t", "partitions": [
                    {"partition_index": 0, "committed_offset": 5,
                     "committed_metadata": ""}]}]})
            assert answer["topics"][0]["partitions"][0]["error_code"] == 0
    gate = threading.Event()
    real = service.load_partition

    def slow(plog):
        assert gate.wait(30)
        return real(plog)

    monkeypatch.setattr(service, "load_partition", slow)
    before = _compiled()  # those the first broker's client used
    try:
        with BrokerThread(tmp_path, own_process=True) as node:
            time.sleep(0.3)  # ample for dozens of compilations
            assert node.call(_compiled) == before < len(codecs_to_warm())
            assert not node.call(lambda: node.broker.codecs_warm.is_set())
            gate.set()
            assert node.call(lambda: node.broker.groups.loaded.wait()) is True
            assert node.call(lambda: node.broker.codecs_warm.wait()) is True
            assert _compiled() == len(codecs_to_warm())
    finally:
        gate.set()


def _warm_event(child) -> dict:
    """The ``broker.codecs_warm`` event of a forked ``kcoord serve`` (debug level)."""
    deadline = time.monotonic() + 60
    for line in child.stdout:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "broker.codecs_warm":
            return event
        assert time.monotonic() < deadline
    raise AssertionError("the broker ended before warming its codecs")


@pytest.mark.skipif(
    not launcher.supported(),
    reason="no forking launcher here: Linux only, and off under KCOORD_EMBEDDED_FORK=0")
def test_brokers_forked_by_a_warmed_launcher_compile_nothing(tmp_path):
    env = {**os.environ}
    seen = []
    for attempt in range(40):  # the launcher warms up in about a second
        data = tmp_path / f"data-{attempt}"
        child = launcher.spawn(["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir",
                                str(data), "--log-format", "json", "--log-level", "debug"], env)
        try:
            event = _warm_event(child)
        finally:
            child.terminate()
            child.wait(30)
        seen.append(event["compiled"])
        if event["compiled"] == 0:
            break
        time.sleep(0.2)
    assert seen[-1] == 0, seen
    assert event["codecs"] == len(codecs_to_warm())
