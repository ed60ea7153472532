"""Group members of the three Python clients, each polling in a thread of its own
and reporting what it holds, what it read and what its rebalance callbacks were
told; shared by the consumer-group tests."""

from __future__ import annotations

import asyncio
import threading
import time

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

PARTITIONS = 6


def make_topic(bootstrap: str, name: str, partitions: int = PARTITIONS,
               per_partition: int = 5) -> None:
    """Create ``name`` and write ``per_partition`` messages ``b"<p>-<i>"`` to each partition."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for p in range(partitions):
        for i in range(per_partition):
            producer.send(name, value=b"%d-%d" % (p, i), partition=p)
    producer.flush(30)
    producer.close()


def until(condition, timeout: float, what):
    """Poll ``condition`` every 50 ms for at most ``timeout`` seconds; its first true value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")


class Member:
    """A group member polling in its own thread; ``assignment``, ``seen`` and
    ``events`` are live.

    ``events`` lists what the client's rebalance callbacks were told, in order:
    ``("assigned" | "revoked", frozenset of partitions)``.
    """

    def __init__(self, bootstrap, group, topic, **settings):
        self.bootstrap, self.group, self.topic, self.settings = bootstrap, group, topic, settings
        self.assignment: set[int] = set()
        self.seen: list[tuple[int, int, bytes]] = []
        self.events: list[tuple[str, frozenset[int]]] = []
        self.refused: list = []  # commit errors, for the record
        self.member_id: str | None = None  # where the client tells it
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

    def _event(self, kind: str, partitions) -> None:
        self.events.append((kind, frozenset(tp.partition for tp in partitions)))

    def _run(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # reported to the test thread
            self.error = exc


def kp_assignors(name):
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    return [{"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
             "cooperative-sticky": CooperativeStickyAssignor}[name]]


class KafkaPythonMember(Member):
    def run(self):
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member._event("revoked", revoked)

            def on_partitions_assigned(self, assigned):
                member._event("assigned", assigned)

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group,
            auto_offset_reset="earliest", enable_auto_commit=False,
            partition_assignment_strategy=kp_assignors(self.settings.get("assignors", "range")),
            session_timeout_ms=self.settings.get("session", 10_000),
            heartbeat_interval_ms=self.settings.get("heartbeat", 3_000),
            **self.settings.get("extra", {}))
        # Subscribed, then the topic's metadata asked for: kafka-python builds
        # the snapshot its leader assigns from when metadata arrives after the
        # subscription. Asked before subscribing, the leader assigns from no
        # metadata, re-joins as soon as the metadata arrives, and can stall in
        # that second rebalance (against Kafka too).
        consumer.subscribe([self.topic], listener=Listener())
        consumer.partitions_for_topic(self.topic)
        try:
            while not self._stop.is_set():
                # kafka-python 3.0.12 drops a join-and-sync round that completes
                # while the application is between two polls (a poll that times
                # out while its JoinGroup waits for the other members leaves the
                # round to finish unseen; the member then neither heartbeats nor
                # joins again, against Kafka too): a poll longer than that wait
                # (``poll_ms``) closes the window.
                batches = consumer.poll(self.settings.get("poll_ms", 500))
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


class ConfluentMember(Member):
    """Commits each message it reads, unless ``commit=False``."""

    def run(self):
        import confluent_kafka
        config = {"bootstrap.servers": self.bootstrap, "group.id": self.group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "partition.assignment.strategy": self.settings.get("assignors", "range"),
                  "session.timeout.ms": self.settings.get("session", 10_000),
                  "heartbeat.interval.ms": 500}
        config.update(self.settings.get("extra", {}))
        if config.get("group.protocol") == "consumer":
            # the broker assigns and times sessions: librdkafka refuses these then
            for classic_only in ("partition.assignment.strategy", "session.timeout.ms",
                                 "heartbeat.interval.ms"):
                config.pop(classic_only)
        consumer = confluent_kafka.Consumer(config)
        try:
            # With these callbacks set the binding still assigns (incrementally
            # under a cooperative assignor) once they return.
            consumer.subscribe([self.topic],
                               on_assign=lambda _c, tps: self._event("assigned", tps),
                               on_revoke=lambda _c, tps: self._event("revoked", tps))
            while not self._stop.is_set():
                message = consumer.poll(0.1)
                if message is not None and not message.error():
                    self.seen.append((message.partition(), message.offset(), message.value()))
                    if self.settings.get("commit", True):
                        self._commit(consumer, message)
                self.assignment = {tp.partition for tp in consumer.assignment()}
                self.member_id = consumer.memberid()
        finally:
            consumer.close()

    def _commit(self, consumer, message) -> None:
        import confluent_kafka
        try:
            consumer.commit(message, asynchronous=False)
        except confluent_kafka.KafkaException as exc:
            # A commit racing a rebalance is refused (REBALANCE_IN_PROGRESS,
            # ILLEGAL_GENERATION), as by Kafka: the next owner reads again.
            self.refused.append(exc.args[0].code())


class AiokafkaMember(Member):
    def run(self):
        asyncio.run(self._main())

    async def _main(self):
        import aiokafka
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                member._event("revoked", revoked)

            async def on_partitions_assigned(self, assigned):
                member._event("assigned", assigned)

        assignor = {"range": RangePartitionAssignor,
                    "roundrobin": RoundRobinPartitionAssignor}[self.settings.get("assignors",
                                                                                 "range")]
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group,
            auto_offset_reset="earliest", enable_auto_commit=False,
            partition_assignment_strategy=(assignor,),
            session_timeout_ms=self.settings.get("session", 10_000), heartbeat_interval_ms=500)
        consumer.subscribe([self.topic], listener=Listener())
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


def owned_once(members, partitions=PARTITIONS) -> bool:
    """Every member holds something and each partition is held by exactly one."""
    owned = [m.assignment for m in members]
    return all(owned) and sorted(p for o in owned for p in o) == list(range(partitions))


def committed(bootstrap, group, topic) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}
