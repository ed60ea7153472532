"""Committed offsets: written as records, visible once applied, and rebuilt
exactly by replaying the records."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.broker.groups.offsets import OffsetAndMetadata, OffsetStore
from kcoord.protocol import group_records as G

GROUPS = st.sampled_from(["g1", "g2", "\u00e9t\u00e9"])
PARTITIONS = st.tuples(st.sampled_from(["orders", "pay"]), st.integers(0, 3))
COMMITTED = st.one_of(
    st.builds(OffsetAndMetadata, st.integers(0, 2**40), st.integers(-1, 5),
              st.text(max_size=5), st.integers(0, 2**41)),
    st.builds(OffsetAndMetadata, st.integers(0, 2**40), st.just(-1), st.text(max_size=5),
              st.integers(0, 2**41), st.integers(0, 2**41)))
OPS = st.lists(st.one_of(
    st.tuples(st.just("commit"), GROUPS, st.dictionaries(PARTITIONS, COMMITTED, max_size=4)),
    st.tuples(st.just("delete"), GROUPS, st.lists(PARTITIONS, max_size=4)),
), max_size=40)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_replaying_the_records_gives_the_live_state(ops):
    live, log = OffsetStore(), []
    for op, group, arg in ops:
        if op == "commit":
            log += OffsetStore.commit_records(group, arg)
            live.apply(group, arg)
        else:
            log += live.delete_records(group, arg)
            live.apply(group, {tp: None for tp in arg})
    replayed = OffsetStore()
    for key, value in log:
        replayed.replay(key, value)
    assert replayed.groups == live.groups


def test_a_commit_with_an_expiry_has_no_leader_epoch():
    with pytest.raises(ValueError):
        OffsetAndMetadata(1, leader_epoch=3, expire_timestamp=10)


def test_a_commit_is_visible_only_once_applied():
    store = OffsetStore()
    records = OffsetStore.commit_records("g", {("t", 0): OffsetAndMetadata(5, 0, "m", 100)})
    assert [G.decode_key(k)[1].topic for k, _v in records] == ["t"]
    assert store.get("g", "t", 0) is None
    store.apply("g", {("t", 0): OffsetAndMetadata(5, 0, "m", 100)})
    assert store.get("g", "t", 0).offset == 5 and store.has_offsets("g")
    assert store.delete_records("g", [("t", 0), ("t", 9)]) == [(G.offset_commit_key("g", "t", 0),
                                                               None)]
    store.apply("g", {("t", 0): None})
    assert not store.has_offsets("g") and store.groups == {}


def test_version_0_and_1_keys_are_one_logical_key_and_group_records_pass_through():
    store = OffsetStore()
    v0_key = b"\x00\x00\x00\x01g\x00\x01t" + struct.pack(">i", 0)
    store.replay(v0_key, OffsetAndMetadata(3, commit_timestamp=1).value())
    assert store.get("g", "t", 0).offset == 3
    store.replay(G.offset_commit_key("g", "t", 0), None)
    assert store.get("g", "t", 0) is None
    kind, key, value = store.replay(G.group_metadata_key("g"), G.group_metadata_value(
        {"protocol_type": "consumer", "generation": 1, "protocol": None, "leader": None,
         "members": []}))
    assert (kind, key.group, value.generation) == (G.GROUP_METADATA, "g", 1)
    assert store.groups == {}
