"""confluent-kafka (librdkafka) against the session's kcoord broker."""

from confluent_kafka import Consumer, Producer


def test_a_consumer_group_reads_and_its_lag_follows_the_log(kcoord):
    topic = kcoord.create_topic("clicks", partitions=2)
    producer = Producer({"bootstrap.servers": kcoord.bootstrap})
    for i in range(4):
        producer.produce(topic, f"click-{i}".encode(), partition=i % 2)
    assert producer.flush(10) == 0
    group = kcoord.group()
    consumer = Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = []
    for _ in range(100):  # bounded
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            values.append(message.value())
        if len(values) == 4:
            break
    consumer.commit(asynchronous=False)
    assert sorted(values) == [f"click-{i}".encode() for i in range(4)]
    kcoord.wait_for_group(group, members=1)
    assert kcoord.lag(group) == {(topic, 0): 0, (topic, 1): 0}
    kcoord.produce(topic, [b"late"], partition=1)
    assert kcoord.lag(group) == {(topic, 0): 0, (topic, 1): 1}
    consumer.close()


def test_a_group_of_the_consumer_protocol_is_waited_for_and_read(kcoord):
    """Consumers with ``group.protocol=consumer`` (KIP-848): the helpers read the
    group as ConsumerGroupDescribe gives it."""
    topic = kcoord.create_topic("orders", partitions=3)
    group = kcoord.group("kip848")
    consumers = [Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": group,
                           "group.protocol": "consumer", "auto.offset.reset": "earliest"})
                 for _ in range(2)]
    for consumer in consumers:
        consumer.subscribe([topic])
    for _ in range(600):  # bounded: the members get their partitions as they poll
        for consumer in consumers:
            consumer.poll(0.05)
        if all(consumer.assignment() for consumer in consumers) and \
                sum(len(consumer.assignment()) for consumer in consumers) == 3:
            break
    kcoord.wait_for_group(group, members=2, state="Stable")
    assignment = kcoord.assignment(group)
    assert sorted(p for owned in assignment.values() for p in owned) == \
        [(topic, p) for p in range(3)]
    for consumer in consumers:
        consumer.close()
