"""kafka-python against the session's kcoord broker: a group of two consumers
shares a topic's partitions, and what they commit is what the broker holds."""

import threading
import time

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import RebalanceInProgressError


class _Polling(threading.Thread):
    """One consumer polled by a thread of its own, as applications run them.
    kafka-python joins and syncs inside ``poll()``: two consumers polled in turn
    by one thread leave each outside ``poll()`` while the other polls, and a
    round completed then can be dropped and the group rebalances again and
    again (on Apache Kafka too, under its 3 s initial rebalance delay)."""

    def __init__(self, consumer: KafkaConsumer):
        super().__init__(daemon=True)
        self.consumer = consumer
        self.seen: list[bytes] = []
        self.commit_now = threading.Event()
        self.committed = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + 120  # bounded, whatever the test does
            while time.monotonic() < deadline and not self.commit_now.is_set():
                for records in self.consumer.poll(timeout_ms=50).values():
                    self.seen.extend(r.value for r in records)
            if self.commit_now.is_set():
                while True:
                    try:
                        self.consumer.commit()
                        break
                    except RebalanceInProgressError:
                        # as kafka-python advises: poll (which completes the
                        # rebalance) and commit again; what is read meanwhile
                        # is read again after the rebalance, not new
                        if time.monotonic() > deadline:
                            raise
                        self.consumer.poll(timeout_ms=50)
                self.committed.set()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
            self.committed.set()


def test_two_consumers_share_the_partitions_and_commit(kcoord):
    topic = kcoord.create_topic("payments", partitions=4)
    group = kcoord.group("billing")
    consumers = [KafkaConsumer(bootstrap_servers=kcoord.bootstrap, group_id=group,
                               auto_offset_reset="earliest", enable_auto_commit=False,
                               heartbeat_interval_ms=200)
                 for _ in range(2)]
    for consumer in consumers:
        # Subscribed first, then the topic's partitions asked for: the answer
        # is what the leader assigns from. Asked before subscribing, the
        # leader's first assignment is made from no metadata and it rejoins
        # once its metadata arrives; kafka-python 3.0.12 can then miss the
        # end of that second round (it completes outside poll) and stay
        # out of the group, every commit failing, on Kafka as on kcoord.
        consumer.subscribe([topic])
        assert consumer.partitions_for_topic(topic) == {0, 1, 2, 3}
    pollers = [_Polling(consumer) for consumer in consumers]
    for poller in pollers:
        poller.start()
    try:
        # bounded in time (Kafka's defaults delay a new group's first rebalance by 3 s)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                all(c.assignment() for c in consumers) and
                sorted(map(len, kcoord.assignment(group).values())) == [2, 2]):
            assert not any(p.error for p in pollers), [p.error for p in pollers]
            time.sleep(0.05)
        assignment = kcoord.assignment(group)
        assert sorted(p for owned in assignment.values() for p in owned) == \
            [(topic, p) for p in range(4)]
        assert sorted(len(owned) for owned in assignment.values()) == [2, 2]

        producer = KafkaProducer(bootstrap_servers=kcoord.bootstrap)
        for i in range(8):
            producer.send(topic, f"payment-{i}".encode(), partition=i % 4)
        producer.flush(10)
        producer.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(len(p.seen) for p in pollers) < 8:
            time.sleep(0.05)
        for poller in pollers:
            poller.commit_now.set()
        for poller in pollers:
            assert poller.committed.wait(30) and poller.error is None, poller.error
        assert sorted(v for p in pollers for v in p.seen) == \
            sorted(f"payment-{i}".encode() for i in range(8))
        assert kcoord.committed(group) == {(topic, p): 2 for p in range(4)}
        assert kcoord.lag(group) == {(topic, p): 0 for p in range(4)}
    finally:
        for poller in pollers:
            poller.commit_now.set()
            poller.join(30)
        for consumer in consumers:
            consumer.close()
    kcoord.wait_for_group(group, members=0, state="Empty")
