"""How ``kcoord groups`` and ``kcoord topics`` reach a broker and end, as Kafka's
tools do: a broker not up yet is waited for until ``--timeout``; one that never
comes is reported (groups: Kafka's catch-all, exit status 0; topics: exit
status 1); a host nobody resolves is said at once; and output piped into a
reader that leaves early ends quietly, the command going on to its end."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from kcoord.broker.embedded import EmbeddedBroker
from kcoord.broker.tools import connect as connecting
from tests.support import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_broker_not_up_yet_is_waited_for(monkeypatch):
    port = _free_port()
    attempts, brokers = [], []
    real = connecting.WireClient

    def attempt(*args, **kwargs):
        attempts.append(args)
        if len(attempts) == 2:  # the first was refused: the broker starts now
            brokers.append(EmbeddedBroker(port=port).start())
        return real(*args, **kwargs)

    monkeypatch.setattr(connecting, "WireClient", attempt)
    try:
        with connecting.connect(f"127.0.0.1:{port}", 20, "test") as client:
            assert client.call(18, 0, {})["error_code"] == 0
        assert len(attempts) == 2
    finally:
        for broker in brokers:
            broker.stop()


def test_a_broker_that_never_comes_is_reported_when_the_timeout_has_passed():
    began = time.monotonic()
    with pytest.raises(TimeoutError, match=r"Timed out waiting for a node assignment "
                                           r"\(.*Connection refused"):
        connecting.connect(f"127.0.0.1:{_free_port()}", 0.5, "test")
    assert 0.5 <= time.monotonic() - began < 5
    began = time.monotonic()
    with pytest.raises(ValueError, match="No resolvable bootstrap urls"):
        connecting.connect("no-such-host.invalid:9092", 20, "test")
    assert time.monotonic() - began < 10  # said at once, not at the timeout


def _tool(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kcoord.broker.cli", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=60)


def test_an_unreachable_broker_ends_each_tool_as_kafka_s_ends():
    where = f"127.0.0.1:{_free_port()}"
    groups = _tool("groups", "--bootstrap-server", where, "--list", "--timeout", "300")
    assert groups.returncode == 0 and groups.stdout.startswith(
        "\nError: Executing consumer group command failed due to Timed out waiting for a "
        "node assignment")
    topics = _tool("topics", "--bootstrap-server", where, "--list", "--timeout", "300")
    assert topics.returncode == 1 and topics.stdout.startswith(
        "Error while executing topic command : Timed out waiting for a node assignment")
    assert "Traceback" not in groups.stderr + topics.stderr


@pytest.mark.parametrize("args", [("topics", "--list"), ("topics", "--describe"),
                                  ("groups", "--list", "--output", "json"),
                                  ("groups", "--describe", "--all-groups")], ids=" ".join)
def test_output_into_a_reader_that_has_left_ends_quietly(make_broker, args):
    node = make_broker()
    assert _tool("topics", "--bootstrap-server", node.bootstrap, "--create", "--topic",
                 "orders").returncode == 0
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first line
    try:
        done = _tool(args[0], "--bootstrap-server", node.bootstrap, *args[1:], stdout=write)
    finally:
        os.close(write)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
