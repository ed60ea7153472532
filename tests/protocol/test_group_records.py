"""``__consumer_offsets`` record keys and values: Kafka's versions and bytes."""

from __future__ import annotations

import struct

import pytest

from kcoord.protocol import group_records as G


def test_offset_commit_key_bytes():
    assert G.offset_commit_key("g", "t", 5) == (
        b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + struct.pack(">i", 5))
    assert G.group_metadata_key("grp") == b"\x00\x02\x00\x03grp"


def test_offset_commit_value_versions():
    v3 = G.offset_commit_value(42, "m", 1000, leader_epoch=7)
    assert v3 == (b"\x00\x03" + struct.pack(">qi", 42, 7) + b"\x00\x01m"
                  + struct.pack(">q", 1000))
    v1 = G.offset_commit_value(42, "", 1000, expire_timestamp=2000)
    assert v1 == b"\x00\x01" + struct.pack(">q", 42) + b"\x00\x00" + struct.pack(">qq", 1000, 2000)
    assert G.decode_value(G.OFFSET_COMMIT, v3) == {
        "offset": 42, "leader_epoch": 7, "metadata": "m", "commit_timestamp": 1000,
        "expire_timestamp": -1}
    assert G.decode_value(G.OFFSET_COMMIT, v1)["expire_timestamp"] == 2000
    assert G.decode_value(G.OFFSET_COMMIT, None) is None  # a tombstone


def test_keys_of_both_offset_versions_and_unknown_record_types():
    body = b"\x00\x01g\x00\x01t" + struct.pack(">i", 5)
    for version in (b"\x00\x00", b"\x00\x01"):
        kind, key = G.decode_key(version + body)
        assert kind == G.OFFSET_COMMIT and (key.group, key.topic, key.partition) == ("g", "t", 5)
    kind, key = G.decode_key(b"\x00\x02\x00\x01g")
    assert kind == G.GROUP_METADATA and key.group == "g"
    kind, key = G.decode_key(b"\x00\x03\x00\x01g")  # a consumer group (KIP-848)
    assert kind == G.CONSUMER_GROUP_METADATA and key.group == "g"
    with pytest.raises(G.UnknownRecordType) as info:
        G.decode_key(b"\x00\x0a\x00\x01g")  # a share group's: skipped
    assert info.value.version == 10


def test_group_metadata_round_trip_and_newer_versions():
    fields = {"protocol_type": "consumer", "generation": 3, "protocol": "range",
              "leader": "m-1", "current_state_timestamp": 5,
              "members": [{"member_id": "m-1", "group_instance_id": "s-1", "client_id": "c",
                           "client_host": "/127.0.0.1", "rebalance_timeout": 300000,
                           "session_timeout": 45000, "subscription": b"sub",
                           "assignment": b"asg"}]}
    raw = G.group_metadata_value(fields)
    assert raw[:2] == b"\x00\x03"
    assert G.decode_value(G.GROUP_METADATA, raw) == fields
    # A version from a newer broker reads with the newest layout known (v4, flexible).
    v4 = b"\x00\x04" + G.GROUP_METADATA_VALUE.codec(4, "request").encode(fields)
    assert G.decode_value(G.GROUP_METADATA, b"\x00\x07" + v4[2:]) == fields
    # v0 has no rebalance timeout and no instance id: their defaults are read.
    v0 = b"\x00\x00" + G.GROUP_METADATA_VALUE.codec(0, "request").encode(fields)
    member = G.decode_value(G.GROUP_METADATA, v0)["members"][0]
    assert member["rebalance_timeout"] == -1 and member["group_instance_id"] is None


def test_offset_commit_keys_from_the_cache_are_the_encoded_keys(monkeypatch):
    from kcoord.protocol import group_records as G

    monkeypatch.setattr(G, "_KEY_CACHE_SIZE", 5)
    G._KEY_CACHE.clear()
    expected = {(g, t, p): G._encode(G.OFFSET_COMMIT_KEY, G.OFFSET_COMMIT_KEY_VERSION,
                                     {"group": g, "topic": t, "partition": p})
                for g in ("g", "h", "ü") for t in ("t", "u") for p in (0, 1)}
    for _ in range(2):
        for (g, t, p), key in expected.items():
            assert G.offset_commit_key(g, t, p) == key
            assert len(G._KEY_CACHE) <= 5
    G._KEY_CACHE.clear()


def test_consumer_group_records_are_kafkas_bytes():
    """Keys and values of a consumer group as Kafka 4.4 writes them: version 0
    keys named by record type, flexible values, tagged fields only when set."""
    import uuid
    topic = uuid.UUID(int=(5 << 64) | 7)
    key = G.consumer_group_key(G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m")
    assert key == b"\x00\x08\x00\x01g\x00\x01m"
    value = G.consumer_group_value(G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, {
        "member_epoch": 3, "previous_member_epoch": 2, "state": 0,
        "assigned_partitions": [{"topic_id": topic, "partitions": [0, 1],
                                 "assignment_epochs": [3, 3]}],
        "partitions_pending_revocation": []})
    assert value == (b"\x00\x00" + struct.pack(">ii", 3, 2) + b"\x00" + b"\x02" +
                     topic.bytes + b"\x03" + struct.pack(">ii", 0, 1) +
                     b"\x01\x00\x09\x03" + struct.pack(">ii", 3, 3) + b"\x01\x00")
    kind, fields = G.decode_key(key)
    assert (kind, fields.group, fields.member_id) == (
        G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m")
    back = G.decode_value(kind, value)
    assert back["assigned_partitions"][0]["assignment_epochs"] == [3, 3]
    metadata = G.consumer_group_value(G.CONSUMER_GROUP_METADATA, {"epoch": 5})
    assert metadata == b"\x00\x00" + struct.pack(">i", 5) + b"\x00"  # no hash: no tag
