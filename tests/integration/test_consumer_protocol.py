"""confluent-kafka (librdkafka) consumers with ``group.protocol=consumer``
(KIP-848) against the broker: assignment by the broker, rebalancing when
members come and go, committed offsets, a restart, and the admin view."""

from __future__ import annotations

import collections
import time

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode

CONSUMER_PROTOCOL = {"group.coordinator.rebalance.protocols": "classic,consumer"}
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from tests.support import BrokerThread
    node = BrokerThread(tmp_path_factory.mktemp("cg-data"), overrides=CONSUMER_PROTOCOL).start()
    yield node
    node.stop()


def _topic(bootstrap: str, name: str, records: int = 60) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(10)
    _produce(bootstrap, name, 0, records)


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(10) == 0


def _consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **extra})


def _subscribe(consumer: Consumer, topic: str) -> None:
    """As an application that reads each record once does: what it has read of a
    partition is committed before the partition is given up."""
    def on_revoke(c, partitions):
        positions = [tp for tp in c.position(partitions) if tp.offset >= 0]
        if positions:
            try:
                c.commit(offsets=positions, asynchronous=False)
            except KafkaException as error:
                # A member no longer in the group's generation (closing as a
                # rebalance begins, librdkafka may leave first): its next owner
                # reads on from the last commit, which the test's counts check.
                assert error.args[0].code() in (KafkaError.ILLEGAL_GENERATION,
                                                KafkaError.REBALANCE_IN_PROGRESS,
                                                KafkaError.UNKNOWN_MEMBER_ID), error

    consumer.subscribe([topic], on_revoke=on_revoke)


def _poll_until(consumers, done, timeout=20.0):
    """Poll every consumer in turn until ``done(seen)``; ``seen`` maps each
    consumer's index to the (partition, offset, value) it read."""
    seen: dict[int, list] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            message = c.poll(0.05)
            if message is None:
                continue
            assert not message.error(), message.error()
            seen[i].append((message.partition(), message.offset(), message.value()))
        if done(seen):
            return seen
    raise AssertionError(f"not done in {timeout} s: { {i: len(v) for i, v in seen.items()} }, "
                         f"assignments {[c.assignment() for c in consumers]}")


def _owned(consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def test_one_consumer_is_given_every_partition_and_commits(cluster):
    _topic(cluster.bootstrap, "cp-one")
    c = _consumer(cluster.bootstrap, "cp-one-g")
    _subscribe(c, "cp-one")
    seen = _poll_until([c], lambda s: len(s[0]) == 60)
    assert _owned(c) == set(range(PARTITIONS))
    assert sorted(v for _p, _o, v in seen[0]) == sorted(f"v{i}".encode() for i in range(60))
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition("cp-one", p) for p in range(PARTITIONS)], 10)
    assert [tp.offset for tp in committed] == [10] * PARTITIONS
    c.close()


def test_three_consumers_share_six_partitions_each_owned_once(cluster):
    _topic(cluster.bootstrap, "cp-three")
    consumers = [_consumer(cluster.bootstrap, "cp-three-g") for _ in range(3)]
    for c in consumers:
        _subscribe(c, "cp-three")

    def balanced(seen):
        owned = [_owned(c) for c in consumers]
        return sum(len(v) for v in seen.values()) >= 60 and \
            all(len(o) == 2 for o in owned)

    seen = _poll_until(consumers, balanced)
    owned = [_owned(c) for c in consumers]
    assert set().union(*owned) == set(range(PARTITIONS))
    assert sum(len(o) for o in owned) == PARTITIONS  # none owned twice
    values = [v for records in seen.values() for _p, _o, v in records]
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(60))  # each read once

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (description,) = [f.result(10) for f in
                      admin.describe_consumer_groups(["cp-three-g"]).values()]
    assert description.state == ConsumerGroupState.STABLE
    assert len(description.members) == 3
    described = sorted(sorted(tp.partition for tp in m.assignment.topic_partitions)
                       for m in description.members)
    assert described == sorted(sorted(o) for o in owned)
    for c in consumers:
        c.close()


def test_partitions_move_when_a_member_leaves_and_no_committed_record_is_lost(cluster):
    _topic(cluster.bootstrap, "cp-leave", records=0)
    first = [_consumer(cluster.bootstrap, "cp-leave-g") for _ in range(2)]
    for c in first:
        _subscribe(c, "cp-leave")
    _produce(cluster.bootstrap, "cp-leave", 0, 30)
    seen = _poll_until(first, lambda s: sum(len(v) for v in s.values()) >= 30 and
                       all(len(_owned(c)) == 3 for c in first))
    for c in first:
        c.commit(asynchronous=False)
    leaving, staying = first
    leaving.close()  # leaves the group: its partitions go to the other member
    _produce(cluster.bootstrap, "cp-leave", 30, 30)
    later = _poll_until([staying], lambda s: len(s[0]) >= 30 and
                        _owned(staying) == set(range(PARTITIONS)))
    read = [v for records in (*seen.values(), *later.values()) for _p, _o, v in records]
    assert sorted(read) == sorted(f"v{i}".encode() for i in range(60))
    staying.commit(asynchronous=False)
    committed = staying.committed([TopicPartition("cp-leave", p) for p in range(PARTITIONS)], 10)
    assert [tp.offset for tp in committed] == [10] * PARTITIONS
    staying.close()


def test_a_restarted_broker_serves_the_group_and_its_offsets(make_broker, tmp_path):
    node = make_broker(tmp_path / "restart", overrides=CONSUMER_PROTOCOL)
    _topic(node.bootstrap, "cp-restart", records=30)
    c = _consumer(node.bootstrap, "cp-restart-g")
    c.subscribe(["cp-restart"])
    _poll_until([c], lambda s: len(s[0]) == 30)
    c.commit(asynchronous=False)
    c.close()
    node.stop()
    again = make_broker(tmp_path / "restart", overrides=CONSUMER_PROTOCOL)
    _produce(again.bootstrap, "cp-restart", 30, 12)
    c = _consumer(again.bootstrap, "cp-restart-g")
    c.subscribe(["cp-restart"])
    seen = _poll_until([c], lambda s: len(s[0]) == 12)
    assert sorted(v for _p, _o, v in seen[0]) == sorted(f"v{i}".encode() for i in range(30, 42))
    c.close()


def test_the_protocol_is_on_by_default_and_can_be_turned_off(broker, make_broker, tmp_path):
    """As on Kafka 4.x, the consumer group APIs are served by default; with
    ``group.coordinator.rebalance.protocols=classic`` they are not advertised
    and a heartbeat is refused, as Kafka refuses it."""
    with WireClient(broker.host, broker.port) as client:
        versions = client.call(18, 3, {"client_software_name": "t",
                                          "client_software_version": "1"})
        assert {68, 69} <= {k["api_key"] for k in versions["api_keys"]}
    off = make_broker(tmp_path / "off",
                      overrides={"group.coordinator.rebalance.protocols": "classic"})
    with WireClient(off.host, off.port) as client:
        versions = client.call(18, 3, {"client_software_name": "t",
                                          "client_software_version": "1"})
        keys = {k["api_key"] for k in versions["api_keys"]}
        assert 68 not in keys and 69 not in keys and 11 in keys
        answer = client.call(68, 1, {"group_id": "g", "member_id": "m", "member_epoch": 0,
                                        "rebalance_timeout_ms": 1000,
                                        "subscribed_topic_names": ["t"],
                                        "topic_partitions": []})
        assert answer["error_code"] == ErrorCode.UNSUPPORTED_VERSION


class _Reader:
    """A consumer that commits each record it reads before reading on; a record
    counts as read once its commit is accepted, so that the committed offsets
    say exactly what the group has read.  A commit refused while the group
    rebalances (the generation moved on, as on Kafka) reads the record again."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str):
        extra = {"heartbeat.interval.ms": 500} if protocol == "classic" else {}
        self.consumer = _consumer(bootstrap, group, **{"group.protocol": protocol, **extra})
        self.protocol = protocol
        self.read: list[tuple[int, int, bytes]] = []
        _subscribe(self.consumer, topic)

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is None:
            return
        assert not message.error(), message.error()
        try:
            self.consumer.commit(message=message, asynchronous=False)
        except KafkaException as error:
            assert error.args[0].code() in (KafkaError.ILLEGAL_GENERATION,
                                            KafkaError.REBALANCE_IN_PROGRESS,
                                            KafkaError.UNKNOWN_MEMBER_ID), error
            try:
                self.consumer.seek(TopicPartition(message.topic(), message.partition(),
                                                  message.offset()))
            except KafkaException:
                pass  # no longer its partition: its next owner reads the record
            return
        self.read.append((message.partition(), message.offset(), message.value()))


def _group_type(bootstrap: str, group: str) -> str:
    with WireClient.to(bootstrap) as client:
        listed = client.call(16, 5, {"states_filter": [], "types_filter": []})["groups"]
    return next(g["group_type"] for g in listed if g["group_id"] == group)


def test_a_rolling_upgrade_to_the_consumer_protocol_and_back_reads_every_record_once(cluster):
    """Three classic consumers are replaced one by one by consumer-protocol ones
    while records flow (the running group becomes a consumer group when the
    first one joins), then back (a classic group again when the last
    consumer-protocol one leaves): every record is read exactly once, as the
    committed offsets say, and no partition is ever read by two members."""
    topic, group = "cp-rolling", "cp-rolling-g"
    _topic(cluster.bootstrap, topic, records=0)
    readers = [_Reader(cluster.bootstrap, group, topic, "classic") for _ in range(3)]
    retired: list[_Reader] = []
    produced, producing = 0, True

    def run(until, timeout=30.0):
        nonlocal produced
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if producing and produced < 1200:
                _produce(cluster.bootstrap, topic, produced, PARTITIONS)
                produced += PARTITIONS
            for r in readers:
                r.poll()
            if until():
                return
        raise AssertionError(f"not done in {timeout} s: {[_owned(r.consumer) for r in readers]}")

    def settled():
        owned = [_owned(r.consumer) for r in readers]
        return all(owned) and sum(map(len, owned)) == PARTITIONS and \
            set().union(*owned) == set(range(PARTITIONS))

    run(settled)
    assert _group_type(cluster.bootstrap, group) == "classic"
    for protocol, group_type in (("consumer", "consumer"), ("classic", "classic")):
        for i in range(3):
            leaving = readers[i]
            leaving.consumer.close()
            retired.append(leaving)
            readers[i] = _Reader(cluster.bootstrap, group, topic, protocol)
            run(lambda: settled() and bool(readers[i].read))
        assert _group_type(cluster.bootstrap, group) == group_type
        assert {r.protocol for r in readers} == {protocol}
    producing = False
    total = produced
    run(lambda: sum(len(r.read) for r in readers + retired) >= total and settled(),
        timeout=30)
    read = [(p, o) for r in readers + retired for p, o, _v in r.read]
    twice = {k for k, n in collections.Counter(read).items() if n > 1}
    # (who read it: the readers in order of arrival, each with its protocol and the
    # place of the record among what it read)
    assert not twice, ("a record was read twice", sorted(twice), [
        (i, r.protocol, [n for n, (p, o, _v) in enumerate(r.read) if (p, o) in twice],
         len(r.read)) for i, r in enumerate(retired + readers)])
    values = sorted(v for r in readers + retired for _p, _o, v in r.read)
    assert values == sorted(f"v{i}".encode() for i in range(total)), "a record was lost"
    for r in readers:
        r.consumer.close()


def test_a_regex_subscription_gets_matching_topics_and_later_ones(cluster):
    """librdkafka sends a ``^`` subscription to the broker as a regular expression
    (RE2 syntax): the matching topics are assigned, and a matching topic created
    later joins the assignment at a later resolution (at most every 10 s, as on
    Kafka)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic("cp-rx-a", 2, 1), NewTopic("cp-rx-b", 1, 1),
                                       NewTopic("cp-other", 1, 1)]).values():
        future.result(10)
    c = _consumer(cluster.bootstrap, "cp-rx-g")
    c.subscribe(["^cp-rx-.*"])
    _poll_until([c], lambda s: len(c.assignment()) == 3)
    assert sorted((tp.topic, tp.partition) for tp in c.assignment()) == [
        ("cp-rx-a", 0), ("cp-rx-a", 1), ("cp-rx-b", 0)]
    for future in admin.create_topics([NewTopic("cp-rx-c", 1, 1)]).values():
        future.result(10)
    _poll_until([c], lambda s: len(c.assignment()) == 4, timeout=30)
    assert ("cp-rx-c", 0) in {(tp.topic, tp.partition) for tp in c.assignment()}
    c.close()


_KILLED_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "group.protocol": "consumer", "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_a_killed_member_s_partitions_move_after_its_session_timeout(make_broker, tmp_path):
    """A consumer process killed with SIGKILL leaves nothing: its partitions go to
    the member left once ``group.consumer.session.timeout.ms`` has passed."""
    import subprocess
    import sys

    node = make_broker(tmp_path / "kill", overrides={
        **CONSUMER_PROTOCOL, "group.consumer.min.session.timeout.ms": "6000",
        "group.consumer.session.timeout.ms": "6000"})
    _topic(node.bootstrap, "cp-kill", records=0)
    child = subprocess.Popen([sys.executable, "-c", _KILLED_MEMBER, node.bootstrap, "cp-kill-g",
                              "cp-kill"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "assigned"
        survivor = _consumer(node.bootstrap, "cp-kill-g")
        _subscribe(survivor, "cp-kill")
        _poll_until([survivor], lambda s: 0 < len(_owned(survivor)) < PARTITIONS)
    finally:
        child.kill()
        child.wait(10)
    killed_at = time.monotonic()
    _poll_until([survivor], lambda s: _owned(survivor) == set(range(PARTITIONS)), timeout=30)
    assert time.monotonic() - killed_at >= 5  # not before the session timeout
    survivor.close()
