"""The test helpers (``kcoord.broker.testing.Kcoord``, what the pytest plugin
hands to a test) against kcoord and against Apache Kafka 4.4 alike: a group of
real confluent-kafka consumers of either protocol, classic or the consumer
protocol of KIP-848, is waited for, and its assignment, committed offsets and
lag read; topics and groups are listed and deleted."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer

from kcoord.broker.embedded import EmbeddedBroker
from kcoord.broker.testing import KafkaError, Kcoord
from kcoord.protocol.errors import ErrorCode


@pytest.fixture(scope="module")
def ours():
    with EmbeddedBroker() as broker:
        yield broker.bootstrap


@pytest.fixture(params=["kcoord", "Kafka"])
def handle(request, ours):
    bootstrap = ours if request.param == "kcoord" else \
        request.getfixturevalue("scratch_kafka").bootstrap
    with Kcoord(bootstrap, prefix="helpers", timeout=30) as kcoord:
        yield kcoord


def _consumers(kcoord: Kcoord, group: str, topic: str, protocol: str, n: int):
    conf = {"bootstrap.servers": kcoord.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    consumers = [Consumer(conf) for _ in range(n)]
    for c in consumers:
        c.subscribe([topic])
    return consumers


class _Polling:
    """The consumers polled on a thread of their own (as an application's loop
    polls them) while the test asks the helpers; what they read, by consumer."""

    def __init__(self, consumers):
        self.consumers = consumers
        self.read = {id(c): [] for c in consumers}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            for c in self.consumers:
                message = c.poll(0.02)
                if message is not None and message.error() is None:
                    self.read[id(c)].append(message.value())

    def until(self, done, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "not in time"
            time.sleep(0.02)

    def stop(self):
        self._stop.set()
        self._thread.join(10)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_is_waited_for_and_read_whichever_its_protocol(handle, protocol):
    topic = handle.create_topic("helpers", partitions=3)
    handle.produce(topic, [b"a", b"b"], partition=2)
    group = handle.group(protocol)
    consumers = _consumers(handle, group, topic, protocol, 2)
    polling = _Polling(consumers)
    try:
        described = handle.wait_for_group(group, members=2, state="Stable", timeout=60)
        assert described["group_type"] == protocol
        polling.until(lambda: sum(len(c.assignment()) for c in consumers) == 3 and
                      all(c.assignment() for c in consumers))
        assigned = handle.wait_for_group(group, members=2, state="Stable", timeout=60)
        assigned = handle.assignment(group)
        assert sorted(p for ps in assigned.values() for p in ps) == \
            [(topic, 0), (topic, 1), (topic, 2)]
        # the members' own view and the helper's agree
        own = sorted(sorted((tp.topic, tp.partition) for tp in c.assignment())
                     for c in consumers)
        assert sorted(assigned.values()) == own
        holder = next(c for c in consumers
                      if (topic, 2) in {(tp.topic, tp.partition) for tp in c.assignment()})
        polling.until(lambda: b"b" in polling.read[id(holder)])
        polling.stop()
        holder.commit(asynchronous=False)
        assert handle.committed(group) == {(topic, 2): 2}
        handle.produce(topic, [b"c"], partition=2)
        assert handle.lag(group) == {(topic, 2): 1}
    finally:
        polling.stop()
        for c in consumers:
            c.close()
    assert group in handle.list_groups()
    handle.wait_for_group(group, members=0, state="Empty", timeout=60)
    handle.delete_group(group)
    assert group not in handle.list_groups()


def test_topics_are_listed_and_deleted(handle):
    topic = handle.create_topic("listed")
    producer = Producer({"bootstrap.servers": handle.bootstrap})
    producer.produce(topic, b"x")
    assert producer.flush(10) == 0
    assert topic in handle.list_topics()
    assert "__consumer_offsets" not in handle.list_topics()
    handle.delete_topic(topic)
    deadline = time.monotonic() + 30
    while topic in handle.list_topics():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with pytest.raises(KafkaError) as refused:
        handle.delete_topic(topic)
    assert refused.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_coordinator_not_ready_yet_is_asked_again(ours, monkeypatch):
    """A broker just started answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
    for a while: the helpers wait for it within their timeout, and give up after."""
    with Kcoord(ours, timeout=5) as kcoord:
        real = kcoord.call
        refusals = iter([ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS])

        def call(api_key, version, body):
            answer = real(api_key, version, body)
            if api_key in (15, 9):
                code = next(refusals, None)
                if code is not None:
                    key = "groups"
                    answer[key][0]["error_code"] = code
            return answer
        monkeypatch.setattr(kcoord, "call", call)
        assert kcoord.describe_group("nobody")["group_state"] == "Dead"
        assert kcoord.committed("nobody") == {}
    with Kcoord(ours, timeout=0.2) as kcoord:
        real = kcoord.call

        def refusing(api_key, version, body):
            answer = real(api_key, version, body)
            answer["groups"][0]["error_code"] = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            return answer
        monkeypatch.setattr(kcoord, "call", refusing)
        began = time.monotonic()
        with pytest.raises(KafkaError) as loading:
            kcoord.describe_group("nobody")
        assert loading.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert time.monotonic() - began < 5
