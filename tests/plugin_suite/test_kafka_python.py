"""kafka-python against the session's kcoord broker: a group of two consumers
shares a topic's partitions, and what they commit is what the broker holds."""

import time

from kafka import KafkaConsumer, KafkaProducer


def test_two_consumers_share_the_partitions_and_commit(kcoord):
    topic = kcoord.create_topic("payments", partitions=4)
    group = kcoord.group("billing")
    consumers = [KafkaConsumer(topic, bootstrap_servers=kcoord.bootstrap, group_id=group,
                               auto_offset_reset="earliest", enable_auto_commit=False,
                               heartbeat_interval_ms=200)
                 for _ in range(2)]
    seen = []

    def poll_both():
        for consumer in consumers:
            for records in consumer.poll(timeout_ms=50).values():
                seen.extend(r.value for r in records)

    # bounded in time (Kafka's defaults delay a new group's first rebalance by 3 s):
    # kafka-python joins and rebalances inside poll()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        poll_both()
        described = kcoord.describe_group(group)
        if described["group_state"] == "Stable" and len(described["members"]) == 2 \
                and all(consumer.assignment() for consumer in consumers):
            break
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
    while time.monotonic() < deadline:
        poll_both()
        if len(seen) == 8:
            break
    for consumer in consumers:
        consumer.commit()
    assert sorted(seen) == sorted(f"payment-{i}".encode() for i in range(8))
    assert kcoord.committed(group) == {(topic, p): 2 for p in range(4)}
    assert kcoord.lag(group) == {(topic, p): 0 for p in range(4)}
    for consumer in consumers:
        consumer.close()
    kcoord.wait_for_group(group, members=0, state="Empty")
