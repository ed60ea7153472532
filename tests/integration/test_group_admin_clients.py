"""The consumer-group calls of the admin clients, as a user makes them against a
group of live consumers and an empty one: confluent-kafka's AdminClient (list
with a state filter, describe, list/alter/delete offsets... and delete groups),
kafka-python's offset deletion (OffsetDelete; confluent-kafka's Python client
has no call for it) and aiokafka's AIOKafkaAdminClient (list, describe, list
offsets; it has no group deletion).

Each test runs against kcoord and against Apache Kafka (the reference, skipped
without Java): whatever is asserted is what Kafka does too."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient

from tests.integration.members import ConfluentMember, committed, make_topic, owned_once, until

PARTITIONS = 4


@pytest.fixture(params=["kcoord", "kafka"])
def bootstrap(request, make_broker):
    if request.param == "kafka":
        return request.getfixturevalue("scratch_kafka").bootstrap
    return make_broker().bootstrap


class LiveGroup:
    """A topic of four partitions holding five messages each, read and committed by
    two confluent-kafka consumers (client ids ``<group>-a`` and ``<group>-b``)."""

    def __init__(self, bootstrap: str, prefix: str):
        suffix = uuid.uuid4().hex[:8]  # the reference Kafka is shared by the whole run
        self.bootstrap = bootstrap
        self.topic, self.group = f"{prefix}-topic-{suffix}", f"{prefix}-live-{suffix}"
        self.idle = f"{prefix}-idle-{suffix}"
        make_topic(bootstrap, self.topic, PARTITIONS)
        self.members = [ConfluentMember(bootstrap, self.group, self.topic,
                                        extra={"client.id": f"{self.group}-{name}"}).start()
                        for name in "ab"]

    def __enter__(self) -> "LiveGroup":
        until(lambda: owned_once(self.members, PARTITIONS)
              and committed(self.bootstrap, self.group, self.topic)
              == {p: 5 for p in range(PARTITIONS)}, 60,
              lambda: f"both members reading and committing: {self.holdings()}, "
                      f"errors {[m.error for m in self.members if m.error]}")
        return self

    def holdings(self) -> dict[str, set[int]]:
        """{client id: the partitions that consumer holds, as it sees them}"""
        return {m.settings["extra"]["client.id"]: set(m.assignment) for m in self.members}

    def stop(self) -> None:
        for m in self.members:
            m.stop()
        assert all(m.error is None for m in self.members)

    def __exit__(self, *exc) -> None:
        if any(m._thread.is_alive() for m in self.members):
            self.stop()


def _ok(futures: dict, timeout: float = 15) -> dict:
    return {key: future.result(timeout) for key, future in futures.items()}


def _failure(future, timeout: float = 15) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        future.result(timeout)
    return caught.value.args[0]


def _listed(admin: AdminClient, states=None) -> dict[str, object]:
    kwargs = {"states": set(states)} if states else {}
    result = admin.list_consumer_groups(request_timeout=15, **kwargs).result(15)
    assert not result.errors
    return {g.group_id: g for g in result.valid}


def _offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    (result,) = _ok(admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=15)).values()
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def test_confluent_admin_lists_describes_alters_and_deletes_groups(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with LiveGroup(bootstrap, "cfl") as live:
        topic = live.topic
        # Offsets written by the admin client to a group nobody is in: an Empty group.
        (altered,) = _ok(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            live.idle, [CTP(topic, 0, 2), CTP(topic, 1, 4)])])).values()
        assert [(tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions] == [
            (0, 2, None), (1, 4, None)]

        stable = _listed(admin, [ConsumerGroupState.STABLE])
        empty = _listed(admin, [ConsumerGroupState.EMPTY])
        assert live.group in stable and live.idle not in stable
        assert live.idle in empty and live.group not in empty
        everything = _listed(admin)
        assert everything[live.group].state == ConsumerGroupState.STABLE
        assert not everything[live.group].is_simple_consumer_group
        assert everything[live.idle].state == ConsumerGroupState.EMPTY
        assert everything[live.idle].is_simple_consumer_group  # no protocol type

        described = _ok(admin.describe_consumer_groups([live.group, live.idle],
                                                       request_timeout=15))
        group = described[live.group]
        assert group.state == ConsumerGroupState.STABLE
        assert group.partition_assignor == "range"
        assert not group.is_simple_consumer_group
        assert group.coordinator.id == 1
        assert {m.client_id: {tp.partition for tp in m.assignment.topic_partitions
                              if tp.topic == topic}
                for m in group.members} == live.holdings()
        assert all(m.host.lstrip("/") == "127.0.0.1" for m in group.members)
        assert len({m.member_id for m in group.members}) == 2
        assert described[live.idle].state == ConsumerGroupState.EMPTY
        assert described[live.idle].members == []

        assert _offsets(admin, live.group) == {(topic, p): 5 for p in range(PARTITIONS)}
        assert _offsets(admin, live.idle) == {(topic, 0): 2, (topic, 1): 4}

        # A group with members refuses offsets from outside it, and its deletion.
        (refused,) = _ok(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            live.group, [CTP(topic, 0, 1)])])).values()
        assert [(tp.partition, tp.error.code()) for tp in refused.topic_partitions] == [
            (0, KafkaError.UNKNOWN_MEMBER_ID)]
        assert _failure(admin.delete_consumer_groups([live.group])[live.group]).code() == \
            KafkaError.NON_EMPTY_GROUP
        assert _offsets(admin, live.group) == {(topic, p): 5 for p in range(PARTITIONS)}

        assert _ok(admin.delete_consumer_groups([live.idle])) == {live.idle: None}
        assert live.idle not in _listed(admin)
        assert _offsets(admin, live.idle) == {}

        live.stop()  # the members leave: the group is Empty and can go
        assert _listed(admin)[live.group].state == ConsumerGroupState.EMPTY
        assert _ok(admin.delete_consumer_groups([live.group])) == {live.group: None}
        assert live.group not in _listed(admin)
        assert _offsets(admin, live.group) == {}


def test_kafka_python_deletes_offsets_only_of_topics_nobody_reads(bootstrap):
    """OffsetDelete: refused per partition for a topic the live members subscribe
    to; accepted once they have left, and only the named partitions go."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupSubscribedToTopicError, NoError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        with LiveGroup(bootstrap, "kp") as live:
            topic = live.topic
            assert admin.delete_group_offsets(live.group, [TopicPartition(topic, 0)]) == {
                TopicPartition(topic, 0): GroupSubscribedToTopicError}
            assert committed(bootstrap, live.group, topic) == {p: 5 for p in range(PARTITIONS)}
            live.stop()
            assert admin.delete_group_offsets(
                live.group, [TopicPartition(topic, 0), TopicPartition(topic, 3)]) == {
                TopicPartition(topic, 0): NoError, TopicPartition(topic, 3): NoError}
            assert committed(bootstrap, live.group, topic) == {1: 5, 2: 5}
    finally:
        admin.close()


def test_aiokafka_admin_lists_and_describes_groups_and_their_offsets(bootstrap):
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

    async def inspect(live):
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            listed = await admin.list_consumer_groups()
            (response,) = await admin.describe_consumer_groups([live.group])
            offsets = await admin.list_consumer_group_offsets(live.group)
        finally:
            await admin.close()
        return listed, response, offsets

    with LiveGroup(bootstrap, "aio") as live:
        listed, response, offsets = asyncio.run(inspect(live))
        assert (live.group, "consumer") in [tuple(g[:2]) for g in listed]
        (group,) = response.to_object()["groups"]
        assert (group["error_code"], group["group"], group["state"], group["protocol_type"],
                group["protocol"]) == (0, live.group, "Stable", "consumer", "range")
        held = {}
        for member in group["members"]:
            assignment = ConsumerProtocolMemberAssignment.decode(member["member_assignment"])
            held[member["client_id"]] = {p for t, parts in assignment.assignment
                                         if t == live.topic for p in parts}
            assert member["client_host"].lstrip("/") == "127.0.0.1"
        assert held == live.holdings()
        assert {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()} == {
            (live.topic, p): 5 for p in range(PARTITIONS)}
