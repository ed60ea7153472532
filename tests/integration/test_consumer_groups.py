"""Consumer groups with the real clients over loopback: kafka-python,
confluent-kafka and aiokafka subscribe, share partitions, take over from a
member that leaves or dies, commit, resume from their commits (after a broker
restart too), mix in one group, and keep a static member's assignment across
its restart without a rebalance."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

from tests.integration.members import CLIENTS, PARTITIONS, ConfluentMember
from tests.integration.members import committed as _committed
from tests.integration.members import make_topic as _topic
from tests.integration.members import owned_once as _owned_once
from tests.integration.members import until as _until


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
        generation = node.call(lambda: node.broker.groups.group(group).generation)
        static.stop()  # a static member leaves no LeaveGroup behind
        restarted = ConfluentMember(node.bootstrap, group, topic, **settings).start()
        _until(lambda: restarted.assignment, 30, "the restarted member's assignment")
        assert restarted.assignment == before
        assert node.call(lambda: node.broker.groups.group(group).generation) == generation
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


def test_under_kafka_s_defaults_a_kafka_python_leader_and_a_confluent_member_settle(make_broker):
    """A group led by kafka-python, joined by confluent-kafka (range assignor),
    under Kafka's defaults (initial delay 3 s, the adaptive append linger):
    one rebalance, then the generation stays as it is while both poll."""
    node = make_broker(kafka_defaults=True)
    topic, group = "settle", "group-settle"
    _topic(node.bootstrap, topic)
    leader = CLIENTS["kafka-python"](node.bootstrap, group, topic).start()
    members = [leader]
    try:
        _until(lambda: leader.assignment == set(range(PARTITIONS)), 30, "the leader alone")
        members.append(CLIENTS["confluent-kafka"](node.bootstrap, group, topic).start())
        _until(lambda: _owned_once(members), 30, "each partition owned exactly once")
        generation = node.call(lambda: node.broker.groups.group(group).generation)
        held = [set(m.assignment) for m in members]
        time.sleep(4)  # more than a heartbeat interval of each: a rebalance would show
        assert node.call(lambda: node.broker.groups.group(group).generation) == generation
        assert [m.assignment for m in members] == held
    finally:
        for m in members:
            m.stop()
    assert all(m.error is None for m in members)
