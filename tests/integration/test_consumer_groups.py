"""Consumer groups with the real clients over loopback: kafka-python,
confluent-kafka and aiokafka subscribe, share partitions, take over from a
member that leaves or dies, commit, resume from their commits (after a broker
restart too), mix in one group, and keep a static member's assignment across
its restart without a rebalance."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

PARTITIONS = 6


def _topic(bootstrap: str, name: str, partitions: int = PARTITIONS, per_partition: int = 5):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for p in range(partitions):
        for i in range(per_partition):
            producer.send(name, value=b"%d-%d" % (p, i), partition=p)
    producer.flush(30)
    producer.close()


def _until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")


# -- one adapter per client: a consumer in a thread that polls and reports --------------


class Member:
    """A group member polling in its own thread; ``assignment`` and ``seen`` are live."""

    def __init__(self, bootstrap, group, topic, **settings):
        self.bootstrap, self.group, self.topic, self.settings = bootstrap, group, topic, settings
        self.assignment: set[int] = set()
        self.seen: list[tuple[int, int, bytes]] = []
        self.refused: list = []  # commit errors, for the record
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def start(self) -> "Member":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{type(self).__name__} did not stop"

    def _run(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # reported to the test thread
            self.error = exc


class KafkaPythonMember(Member):
    def run(self):
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group,
            auto_offset_reset="earliest", enable_auto_commit=False,
            partition_assignment_strategy=self.settings.get("assignors", _kp_assignors("range")),
            session_timeout_ms=self.settings.get("session", 10_000),
            heartbeat_interval_ms=self.settings.get("heartbeat", 3_000),
            **self.settings.get("extra", {}))
        # The topic's metadata first: kafka-python's leader otherwise assigns
        # nothing, re-joins as soon as the metadata arrives, and can stall in that
        # second rebalance (against Kafka too).
        consumer.partitions_for_topic(self.topic)
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                batches = consumer.poll(100)
                for tp, messages in batches.items():
                    self.seen += [(tp.partition, m.offset, m.value) for m in messages]
                self.assignment = {tp.partition for tp in consumer.assignment()}
                if self.seen:
                    # Asynchronous (kafka-python's synchronous commit retries a
                    # rebalancing group from the polling thread, which then cannot
                    # re-join, with Kafka too), and again at every poll: a commit
                    # refused during a rebalance is made good by the next one.
                    consumer.commit_async()
        finally:
            consumer.close()


def _kp_assignors(name):
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    return [{"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[name]]


class ConfluentMember(Member):
    def run(self):
        import confluent_kafka
        config = {"bootstrap.servers": self.bootstrap, "group.id": self.group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "partition.assignment.strategy": self.settings.get("assignors", "range"),
                  "session.timeout.ms": self.settings.get("session", 10_000),
                  "heartbeat.interval.ms": 500}
        config.update(self.settings.get("extra", {}))
        consumer = confluent_kafka.Consumer(config)
        try:
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                message = consumer.poll(0.1)
                if message is not None and not message.error():
                    self.seen.append((message.partition(), message.offset(), message.value()))
                    try:
                        consumer.commit(message, asynchronous=False)
                    except confluent_kafka.KafkaException as exc:
                        # A commit racing a rebalance is refused (REBALANCE_IN_PROGRESS,
                        # ILLEGAL_GENERATION), as by Kafka: the next owner reads again.
                        self.refused.append(exc.args[0].code())
                self.assignment = {tp.partition for tp in consumer.assignment()}
        finally:
            consumer.close()


class AiokafkaMember(Member):
    def run(self):
        asyncio.run(self._main())

    async def _main(self):
        import aiokafka
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        assignor = {"range": RangePartitionAssignor,
                    "roundrobin": RoundRobinPartitionAssignor}[self.settings.get("assignors",
                                                                                 "range")]
        consumer = aiokafka.AIOKafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
            auto_offset_reset="earliest", enable_auto_commit=False,
            partition_assignment_strategy=(assignor,),
            session_timeout_ms=self.settings.get("session", 10_000), heartbeat_interval_ms=500)
        await consumer.start()
        try:
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                for tp, messages in batches.items():
                    self.seen += [(tp.partition, m.offset, m.value) for m in messages]
                if batches:
                    await consumer.commit()
                self.assignment = {tp.partition for tp in consumer.assignment()}
        finally:
            await consumer.stop()


CLIENTS = {"kafka-python": KafkaPythonMember, "confluent-kafka": ConfluentMember,
           "aiokafka": AiokafkaMember}


def _owned_once(members, partitions=PARTITIONS):
    owned = [m.assignment for m in members]
    return all(owned) and sorted(p for o in owned for p in o) == list(range(partitions))


def _committed(bootstrap, group, topic, partitions=PARTITIONS):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}


# -- tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_one_consumer_reads_everything_commits_and_resumes(make_broker, client):
    node = make_broker()
    topic, group = f"one-{client}", f"group-one-{client}"
    _topic(node.bootstrap, topic)
    member = CLIENTS[client](node.bootstrap, group, topic).start()
    try:
        _until(lambda: len(member.seen) >= PARTITIONS * 5, 30,
               lambda: f"every message (seen {len(member.seen)}, assigned "
                       f"{member.assignment}, error {member.error!r})")
        _until(lambda: _committed(node.bootstrap, group, topic) ==
               {p: 5 for p in range(PARTITIONS)}, 30, "the commits")
    finally:
        member.stop()
    assert member.error is None
    assert sorted(member.seen) == sorted((p, i, b"%d-%d" % (p, i))
                                         for p in range(PARTITIONS) for i in range(5))
    # More messages; a new consumer of the group starts from the commits.
    producer = KafkaProducer(bootstrap_servers=node.bootstrap)
    producer.send(topic, value=b"later", partition=2)
    producer.flush(10)
    producer.close()
    again = CLIENTS[client](node.bootstrap, group, topic).start()
    try:
        _until(lambda: again.seen, 30, "the new message")
        time.sleep(0.5)  # nothing older may follow
    finally:
        again.stop()
    assert again.seen == [(2, 5, b"later")]


@pytest.mark.parametrize("client", CLIENTS)
def test_three_consumers_share_six_partitions_and_take_over_from_one_that_leaves(
        make_broker, client):
    """Each partition is owned exactly once, and a member that leaves hands its
    partitions to the others; every message is read."""
    # kafka-python 3.0.12 can stall a follower that is told to re-join while its
    # own join is in flight (against Kafka 4.4 as well): for it the members
    # start in one generation (an initial delay), and one member stays.
    quirk = client == "kafka-python"
    node = make_broker(overrides={"group.initial.rebalance.delay.ms": 2000} if quirk else None)
    topic, group = f"three-{client}", f"group-three-{client}"
    _topic(node.bootstrap, topic)
    members = [CLIENTS[client](node.bootstrap, group, topic).start() for _ in range(3)]
    everyone = list(members)
    try:
        _until(lambda: _owned_once(members), 60, "each partition owned exactly once")
        assert all(len(m.assignment) == 2 for m in members)
        if quirk:
            members.pop().stop()
            _until(lambda: _owned_once(members), 60, "two members sharing the partitions")
        members[0].stop()
        _until(lambda: _owned_once(members[1:]), 60, "the others to take over")
        _until(lambda: len({(p, o) for m in everyone for p, o, _v in m.seen}) == 30, 30,
               "every message read")
    finally:
        for m in members[1:]:
            m.stop()
    assert all(m.error is None for m in everyone)
    assert sorted({(p, o) for m in everyone for p, o, _v in m.seen}) == \
        sorted((p, i) for p in range(PARTITIONS) for i in range(5))


def test_mixed_clients_share_one_group_and_read_each_other_s_commits(make_broker):
    # One generation for the three (see kafka-python's quirk above).
    node = make_broker(overrides={"group.initial.rebalance.delay.ms": 2000})
    topic, group = "mixed", "group-mixed"
    _topic(node.bootstrap, topic)
    members = [cls(node.bootstrap, group, topic).start() for cls in CLIENTS.values()]
    try:
        _until(lambda: _owned_once(members), 60, "each partition owned exactly once")
        _until(lambda: _committed(node.bootstrap, group, topic) ==
               {p: 5 for p in range(PARTITIONS)}, 30, "every partition committed")
    finally:
        for m in members:
            m.stop()
    assert all(m.error is None for m in members)
    # Committed by one client, read by the others: confluent-kafka and aiokafka.
    import confluent_kafka
    consumer = confluent_kafka.Consumer({"bootstrap.servers": node.bootstrap, "group.id": group})
    committed = consumer.committed([confluent_kafka.TopicPartition(topic, p)
                                    for p in range(PARTITIONS)], timeout=10)
    consumer.close()
    assert [tp.offset for tp in committed] == [5] * PARTITIONS


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_assignors(make_broker, assignor):
    node = make_broker()
    topic, group = f"assign-{assignor}", f"group-{assignor}"
    _topic(node.bootstrap, topic)
    members = [ConfluentMember(node.bootstrap, group, topic, assignors=assignor).start()
               for _ in range(2)]
    try:
        _until(lambda: _owned_once(members), 60, "each partition owned exactly once")
        late = ConfluentMember(node.bootstrap, group, topic, assignors=assignor).start()
        members.append(late)
        _until(lambda: _owned_once(members) and all(len(m.assignment) == 2 for m in members),
               60, "three members with two partitions each")
    finally:
        for m in members:
            m.stop()
    assert all(m.error is None for m in members)


def test_a_static_member_restarts_without_a_rebalance(make_broker):
    node = make_broker()
    topic, group = "static", "group-static"
    _topic(node.bootstrap, topic)
    settings = {"extra": {"group.instance.id": "instance-a"}, "session": 30_000}
    other = ConfluentMember(node.bootstrap, group, topic, session=30_000).start()
    static = ConfluentMember(node.bootstrap, group, topic, **settings).start()
    try:
        _until(lambda: _owned_once([other, static]), 60, "the first assignment")
        before = set(static.assignment)
        generation = node.call(lambda: node.broker.groups.core.groups[group].generation)
        static.stop()  # a static member leaves no LeaveGroup behind
        restarted = ConfluentMember(node.bootstrap, group, topic, **settings).start()
        _until(lambda: restarted.assignment, 30, "the restarted member's assignment")
        assert restarted.assignment == before
        assert node.call(lambda: node.broker.groups.core.groups[group].generation) == generation
        restarted.stop()
    finally:
        other.stop()


KILLABLE = textwrap.dedent("""
    import sys
    import confluent_kafka
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": sys.argv[1], "group.id": sys.argv[3],
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "range"})
    consumer.subscribe([sys.argv[2]])
    while True:
        consumer.poll(0.1)
""")


def test_a_killed_consumer_s_partitions_move_after_its_session_timeout(make_broker, tmp_path):
    node = make_broker()
    topic, group = "killed", "group-killed"
    _topic(node.bootstrap, topic)
    script = tmp_path / "member.py"
    script.write_text(KILLABLE)
    survivor = ConfluentMember(node.bootstrap, group, topic, session=6_000).start()
    child = subprocess.Popen([sys.executable, str(script), node.bootstrap, topic, group],
                             start_new_session=True)
    try:
        _until(lambda: survivor.assignment and len(survivor.assignment) < PARTITIONS, 60,
               "the partitions shared with the child")
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
        killed_at = time.monotonic()
        _until(lambda: survivor.assignment == set(range(PARTITIONS)), 60,
               "the survivor to own every partition")
        # The child sent no LeaveGroup: its session timeout (6 s) had to pass.
        assert time.monotonic() - killed_at > 4
    finally:
        survivor.stop()
        if child.poll() is None:
            child.kill()
    assert survivor.error is None


def test_groups_and_offsets_survive_a_broker_restart(make_broker, tmp_path):
    data = tmp_path / "restart"
    node = make_broker(data)
    topic = "survives"
    _topic(node.bootstrap, topic)
    member = ConfluentMember(node.bootstrap, "group-survives", topic).start()
    _until(lambda: len(member.seen) >= PARTITIONS * 5 and
           _committed(node.bootstrap, "group-survives", topic) == {p: 5 for p in range(6)},
           30, lambda: f"everything read and committed (read {len(member.seen)}, committed "
                       f"{_committed(node.bootstrap, 'group-survives', topic)}, "
                       f"error {member.error!r})")
    member.stop()
    simple = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id="simple-survives",
                           enable_auto_commit=False)
    simple.assign([TopicPartition(topic, 1)])
    from kafka.structs import OffsetAndMetadata
    simple.commit({TopicPartition(topic, 1): OffsetAndMetadata(3, "note", -1)})
    simple.close()
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    before = {g["group_id"]: g["group_state"] for g in admin.list_groups()}
    admin.close()
    node.stop()
    again = make_broker(data)
    _until(lambda: again.call(lambda: again.broker.groups.loaded.is_set()), 30, "the load")
    admin = KafkaAdminClient(bootstrap_servers=again.bootstrap)
    after = {g["group_id"]: g["group_state"] for g in admin.list_groups()}
    offsets = admin.list_group_offsets("simple-survives")["simple-survives"]
    admin.close()
    assert after == before == {"group-survives": "Empty", "simple-survives": "Empty"}
    assert _committed(again.bootstrap, "group-survives", topic) == {p: 5 for p in range(6)}
    assert {(tp.partition, m.offset, m.metadata) for tp, m in offsets.items()} == {(1, 3, "note")}
