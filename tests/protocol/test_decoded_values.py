"""What handlers and tools get from the decoder: one slotted object per struct,
read as a mapping and by attribute, holding exactly the message's fields."""

from __future__ import annotations

import pickle
import struct

import pytest

from kcoord.protocol.messages.create_topics import CREATE_TOPICS
from kcoord.protocol.messages.metadata import METADATA
from kcoord.protocol.values import message_class

# kafka-python builds the reference bytes: a Metadata v1 request naming two topics.
from kafka.protocol.metadata import MetadataRequest


def _metadata_v1(*names: str):
    raw = MetadataRequest[1](topics=list(names)).encode()
    return METADATA.codec(1, "request").decode(raw)


def test_a_decoded_request_reads_as_a_mapping_and_by_attribute():
    request = _metadata_v1("orders", "payments")
    topics = request["topics"]
    assert [t["name"] for t in topics] == ["orders", "payments"]
    assert [t.name for t in topics] == ["orders", "payments"]
    # Fields the version lacks are there with their defaults.
    assert request.allow_auto_topic_creation is True
    assert request.get("include_topic_authorized_operations") is False
    assert request.get("no_such_field", "absent") == "absent"
    assert "topics" in request and "no_such_field" not in request
    assert sorted(request) == sorted(request.keys()) == sorted(
        ["topics", "allow_auto_topic_creation", "include_cluster_authorized_operations",
         "include_topic_authorized_operations"])
    assert len(request) == 4
    with pytest.raises(KeyError):
        request["no_such_field"]


def test_it_equals_the_same_fields_as_a_dict_and_nothing_else():
    (topic,) = _metadata_v1("orders")["topics"]
    fields = {"name": "orders", "topic_id": topic.topic_id}
    assert topic == fields and fields == topic
    assert topic != {"name": "orders"}
    assert topic != {**fields, "extra": 1}
    assert topic != {"name": "other", "topic_id": topic.topic_id}
    assert topic != ["name", "topic_id"]
    assert dict(topic) == fields
    assert eval(repr(topic), {"UUID": type(topic.topic_id)}) == fields


def test_a_field_can_be_replaced_but_no_field_can_be_added():
    (topic,) = _metadata_v1("orders")["topics"]
    topic["name"] = "renamed"
    assert topic.name == "renamed"
    with pytest.raises(KeyError, match="eror_code"):
        topic["eror_code"] = 36
    with pytest.raises(AttributeError):
        topic.eror_code = 36
    assert "eror_code" not in topic


def test_copies_and_pickles_are_equal_and_independent():
    request = _metadata_v1("orders", "payments")
    copy = request.copy()
    assert copy == request
    copy["allow_auto_topic_creation"] = False
    assert request.allow_auto_topic_creation is True
    restored = pickle.loads(pickle.dumps(request))
    assert restored == request and type(restored) is type(request)


def test_a_decoded_value_encodes_back_to_the_same_bytes():
    raw = MetadataRequest[1](topics=["orders", "payments"]).encode()
    codec = METADATA.codec(1, "request")
    assert codec.encode(codec.decode(raw)) == raw


def test_a_message_without_some_field_gets_it_as_its_default():
    """Every slot is filled on decode, including tagged fields not sent."""
    codec = CREATE_TOPICS.codec(5, "request")
    raw = codec.encode({"topics": [{"name": "t", "num_partitions": 3, "replication_factor": 1}],
                        "timeout_ms": 1000})
    request = codec.decode(raw)
    (topic,) = request.topics
    assert topic.assignments == [] and topic.configs == []
    assert request.validate_only is False


def test_field_names_that_would_shadow_the_mapping_methods_are_refused():
    with pytest.raises(ValueError, match="keys"):
        message_class(["name", "keys"])
    with pytest.raises(ValueError, match="duplicate"):
        message_class(["name", "name"])
    with pytest.raises(ValueError, match="from"):
        message_class(["from"])


def test_one_class_per_layout():
    a = _metadata_v1("x")["topics"][0]
    b = METADATA.codec(1, "request").decode(struct.pack(">i", 1) + struct.pack(">h", 1) + b"y")
    assert type(a) is type(b.topics[0])
    assert not hasattr(a, "__dict__")  # no per-entry dict: memory stays per field
