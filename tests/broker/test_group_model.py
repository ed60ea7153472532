"""The classic group model: transitions, leader, protocol vote, subscribed
topics, and the GroupMetadata record it is saved as and loaded from."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from kcoord.broker.groups.group import Group, GroupState, IllegalTransition, Member
from kcoord.protocol import group_records as G

S = GroupState


def _subscription(*topics: str, version: int = 3) -> bytes:
    # The bytes a real consumer sends, built by kafka-python.
    return ConsumerProtocolSubscription(version=version, topics=list(topics), user_data=None,
                                        owned_partitions=[], generation_id=-1,
                                        rack_id=None).encode(version=version)


def _member(member_id, *protocols, instance=None, protocol_type="consumer"):
    return Member(member_id, f"client-{member_id}", "/127.0.0.1", 300_000, 45_000,
                  protocol_type, list(protocols), group_instance_id=instance)


def test_only_kafka_s_transitions_are_allowed_and_each_is_stamped():
    group = Group("g")
    with pytest.raises(IllegalTransition):
        group.transition_to(S.STABLE, 1)
    for target, now in ((S.PREPARING_REBALANCE, 10), (S.COMPLETING_REBALANCE, 20),
                        (S.STABLE, 30), (S.PREPARING_REBALANCE, 40), (S.EMPTY, 50)):
        group.transition_to(target, now)
        assert (group.state, group.current_state_timestamp) == (target, now)
    with pytest.raises(IllegalTransition):
        group.transition_to(S.COMPLETING_REBALANCE, 60)
    group.transition_to(S.DEAD, 70)
    group.transition_to(S.DEAD, 80)


def test_the_first_member_leads_and_a_leader_who_leaves_is_replaced():
    group = Group("g")
    group.add_member(_member("m1", ("range", b"")))
    group.add_member(_member("m2", ("range", b""), instance="i2"))
    assert group.leader_id == "m1" and group.protocol_type == "consumer"
    assert group.static_members == {"i2": "m2"}
    group.pending_sync = {"m1", "m2"}
    group.remove_member("m1")
    assert group.leader_id == "m2" and group.pending_sync == {"m2"}
    group.remove_member("m2")
    assert group.leader_id is None and group.static_members == {}
    assert group.remove_member("m2") is None


def test_protocol_support_and_the_vote():
    group = Group("g")
    assert not group.supports_protocols("", ["range"])  # an empty group needs a type
    assert group.supports_protocols("consumer", ["range"])
    group.add_member(_member("m1", ("roundrobin", b"a"), ("range", b"b")))
    group.state = S.STABLE
    assert group.supports_protocols("consumer", ["sticky", "range"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])
    group.add_member(_member("m2", ("range", b"c"), ("roundrobin", b"d")))
    group.add_member(_member("m3", ("range", b"e"), ("sticky", b"f")))
    assert group.candidate_protocols() == ["range"]
    assert group.select_protocol() == "range"
    group.remove_member("m3")
    # m1 votes roundrobin, m2 range: a tie goes to the leader's preference.
    assert group.select_protocol() == "roundrobin"
    group.update_protocols(group.members["m1"], [("range", b"x")])
    assert group.select_protocol() == "range"
    assert not group.supports_protocols("consumer", ["roundrobin"])


def test_the_most_voted_protocol_wins_over_the_leader_s_preference():
    group = Group("g")
    group.add_member(_member("m1", ("roundrobin", b""), ("range", b"")))
    group.add_member(_member("m2", ("range", b""), ("roundrobin", b"")))
    group.add_member(_member("m3", ("range", b""), ("roundrobin", b"")))
    assert group.candidate_protocols() == ["roundrobin", "range"]
    assert group.select_protocol() == "range"


def test_subscribed_topics_of_a_consumer_group():
    group = Group("g", protocol_type="consumer")
    assert group.subscribed_topics() == set()  # no members: nothing
    group.add_member(_member("m1", ("range", _subscription("orders"))))
    assert group.subscribed_topics() is None  # no protocol selected yet: unknown
    group.protocol_name = "range"
    group.add_member(_member("m2", ("range", _subscription("pay", "orders", version=0))))
    assert group.subscribed_topics() == {"orders", "pay"}
    group.members["m2"].protocols = [("range", b"\x00\x00\x00\x00\x00\x05")]  # unreadable
    assert group.subscribed_topics() is None
    connect = Group("c", protocol_type="connect", protocol_name="v1")
    assert connect.subscribed_topics() is None


def test_the_metadata_record_round_trips_through_kafka_s_layout():
    group = Group("g")
    group.add_member(_member("m1", ("range", _subscription("orders")), instance="i1"))
    group.add_member(_member("m2", ("range", _subscription("pay"))))
    group.protocol_name, group.generation = "range", 4
    group.members["m1"].assignment = b"\x00\x01assigned"
    for target, now in ((S.PREPARING_REBALANCE, 1), (S.COMPLETING_REBALANCE, 2), (S.STABLE, 3)):
        group.transition_to(target, now)
    raw = G.group_metadata_value(group.metadata_record())
    loaded = Group.from_record("g", G.decode_value(G.GROUP_METADATA, raw))
    assert loaded.state is S.STABLE and loaded.generation == 4
    assert (loaded.protocol_type, loaded.protocol_name, loaded.leader_id) == \
        ("consumer", "range", "m1")
    assert loaded.current_state_timestamp == 3
    assert loaded.static_members == {"i1": "m1"}
    assert loaded.members["m1"].assignment == b"\x00\x01assigned"
    assert loaded.subscribed_topics() == {"orders", "pay"}
    assert loaded.metadata_record() == group.metadata_record()
    # The leader is the record's, not the first member listed.
    record = group.metadata_record()
    record["leader"] = "m2"
    loaded = Group.from_record("g", G.decode_value(G.GROUP_METADATA,
                                                   G.group_metadata_value(record)))
    assert loaded.leader_id == "m2"


def test_a_version_0_record_uses_the_session_timeout_as_rebalance_timeout():
    member = {"member_id": "m1", "client_id": "c", "client_host": "/h", "session_timeout": 10_000,
              "subscription": b"", "assignment": b""}
    fields = {"protocol_type": "consumer", "generation": 1, "protocol": "range",
              "leader": "m1", "members": [member]}
    raw = b"\x00\x00" + G.GROUP_METADATA_VALUE.codec(0, "request").encode(fields)
    loaded = Group.from_record("g", G.decode_value(G.GROUP_METADATA, raw))
    assert loaded.members["m1"].rebalance_timeout_ms == 10_000
    assert loaded.current_state_timestamp == -1


def test_an_empty_group_record_loads_as_empty():
    raw = G.group_metadata_value({"protocol_type": "consumer", "generation": 7,
                                  "protocol": None, "leader": None,
                                  "current_state_timestamp": 99, "members": []})
    loaded = Group.from_record("g", G.decode_value(G.GROUP_METADATA, raw))
    assert (loaded.state, loaded.generation, loaded.protocol_type) == (S.EMPTY, 7, "consumer")
    assert loaded.leader_id is None and loaded.members == {}
