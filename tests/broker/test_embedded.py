"""The embedded broker (``broker.embedded``) and its helpers (``broker.testing``)
as a program uses them: ready when started, in this process or as a child
process; its temporary data gone when it stops, given data kept; an async
start that leaves the caller's loop running; errors said, never swallowed."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time

import pytest

from kcoord.broker.embedded import EmbeddedBroker
from kcoord.broker.testing import KafkaError, Kcoord
from kcoord.protocol.errors import ErrorCode as E


@pytest.mark.parametrize("process", [False, True], ids=["in-process", "child-process"])
def test_a_broker_serves_once_started_and_its_temporary_data_goes_with_it(process):
    with EmbeddedBroker(process=process) as broker:
        assert broker.running and broker.port > 0
        data_dir = broker.data_dir
        assert data_dir.is_dir()
        with Kcoord(broker.bootstrap) as kafka:
            topic = kafka.create_topic("t", partitions=2)
            assert kafka.produce(topic, [b"a", b"b"], partition=1) == [0, 1]
            assert kafka.end_offsets(topic) == {(topic, 0): 0, (topic, 1): 2}
    assert not broker.running
    assert not data_dir.exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", broker.port), timeout=1).close()


@pytest.mark.parametrize("process", [False, True], ids=["in-process", "child-process"])
def test_a_given_data_dir_is_kept_and_its_topics_are_there_again(tmp_path, process):
    with EmbeddedBroker(tmp_path, process=process) as broker, Kcoord(broker.bootstrap) as kafka:
        topic = kafka.create_topic("kept")
        kafka.produce(topic, [b"x", b"y"])
    with EmbeddedBroker(tmp_path, process=process) as broker, Kcoord(broker.bootstrap) as kafka:
        assert kafka.end_offsets(topic) == {(topic, 0): 2}


def test_overrides_and_kafka_defaults_reach_the_broker():
    with EmbeddedBroker(overrides={"num.partitions": 5}, kafka_defaults=True) as broker:
        assert broker.broker.config["num.partitions"] == 5
        assert broker.broker.config["group.initial.rebalance.delay.ms"] == 3000
    with EmbeddedBroker() as broker:
        assert broker.broker.config["group.initial.rebalance.delay.ms"] == 0


async def test_an_async_start_leaves_the_caller_s_loop_running():
    ticks = 0

    async def tick():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    ticker = asyncio.ensure_future(tick())
    try:
        async with EmbeddedBroker(process=True) as broker:  # a first child starts the launcher
            started_with = ticks
            assert broker.running
        assert started_with > 5
    finally:
        ticker.cancel()


@pytest.mark.parametrize("process", [False, True], ids=["in-process", "child-process"])
def test_a_port_in_use_is_an_error_and_nothing_is_left_behind(process):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = EmbeddedBroker(port=port, process=process)
        began = time.monotonic()
        with pytest.raises((OSError, RuntimeError), match="in use|address"):
            broker.start()
        assert time.monotonic() - began < 10  # said when it happens, not at a timeout
        assert not broker.running and broker._temp is None


def test_a_port_outside_the_range_and_a_second_start_are_refused():
    with pytest.raises(ValueError, match="outside 0-65535"):
        EmbeddedBroker(port=70000)
    with EmbeddedBroker() as broker:
        with pytest.raises(RuntimeError, match="already started"):
            broker.start()


def test_the_helpers_say_the_broker_s_error_and_wait_with_a_bound(broker):
    kafka = Kcoord(broker.bootstrap, prefix="tests/x.py::test[1]", timeout=5)
    with pytest.raises(KafkaError) as refused:
        kafka.produce("no-such-topic", [b"x"])
    assert refused.value.code is E.UNKNOWN_TOPIC_OR_PARTITION
    group = kafka.group()
    began = time.monotonic()
    with pytest.raises(TimeoutError, match=f"group {group} is Dead with 0 members, not Stable "
                                           "with 2 members"):
        kafka.wait_for_group(group, members=2, timeout=0.2)
    assert 0.2 <= time.monotonic() - began < 2
    kafka.close()


def test_names_are_unique_to_a_handle_and_legal_for_kafka(broker):
    one = Kcoord(broker.bootstrap, prefix="tests/x.py::test_a[b c]")
    two = Kcoord(broker.bootstrap, prefix="tests/x.py::test_a[b c]")
    names = [one.unique("orders"), one.unique("orders"), two.unique("orders")]
    assert len(set(names)) == 3
    assert all(n.startswith("tests-x.py-test_a-b-c-orders-") for n in names)
    long = Kcoord(broker.bootstrap, prefix="x" * 500)
    topic = long.create_topic("orders")
    assert len(topic) <= 249 and long.end_offsets(topic) == {(topic, 0): 0}
    long.close()


def test_a_child_broker_imports_kcoord_from_where_this_process_found_it(monkeypatch):
    """A kcoord found as a folder on the path (an installed wheel, a mutation
    testing copy) is put first on the child's PYTHONPATH; otherwise (an editable
    install, reached through site-packages) the path is left alone."""
    import types
    from pathlib import Path

    from kcoord.broker import embedded

    package = Path(embedded.__file__).absolute().parent.parent
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    as_folder = types.SimpleNamespace(__path__=[str(package)])
    monkeypatch.setitem(sys.modules, "kcoord", as_folder)
    assert embedded._child_environment()["PYTHONPATH"] == f"{package.parent}{os.pathsep}/elsewhere"
    editable = types.SimpleNamespace(__path__=["__editable__.kcoord-0.1.0.finder.__path_hook__"])
    monkeypatch.setitem(sys.modules, "kcoord", editable)
    assert embedded._child_environment()["PYTHONPATH"] == "/elsewhere"
