"""A request whose answer quotes a string near 32767 bytes (CreateTopics,
DeleteTopics, DescribeConfigs, Metadata with a 32767- or 40000-byte name, a
20000-byte config value) made the answer unencodable: the connection dropped
with a traceback.  Strings are now decoded with Kafka's limit (a compact string
over 32767 bytes makes the request undecodable, as in Kafka's generated
readers), and an error message that quotes a long string is cut to fit, so the
answer always goes out.  A handler answer with a misspelled field raised no
error and went out as error 0: encoding is now strict."""

from __future__ import annotations

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages.create_topics import CREATE_TOPICS
from kcoord.protocol.wire import MAX_STRING_BYTES, UnknownFieldError
from kcoord.protocol.client import WireClient


@pytest.fixture
def client(broker):
    c = WireClient("127.0.0.1", broker.port)
    yield c
    c.close()


def _fits(message):
    return message is None or len(message.encode()) <= MAX_STRING_BYTES


@pytest.mark.parametrize("length", [32760, 32767])
def test_describe_configs_of_a_huge_name_is_answered(client, length):
    answer = client.call(32, 1, {"resources": [{"resource_type": 2, "resource_name": "x" * length,
                                                "configuration_keys": None}],
                                 "include_synonyms": False})
    result = answer["results"][0]
    assert result["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert _fits(result["error_message"])
    assert result["error_message"].startswith("Topic name is invalid: the length of 'xxx")


@pytest.mark.parametrize("version", [4, 5])
def test_create_and_delete_of_a_32767_byte_name_are_answered(client, version):
    name = "y" * 32767
    created = client.call(19, version, {"topics": [{"name": name, "num_partitions": 1,
                                                    "replication_factor": 1, "assignments": [],
                                                    "configs": []}],
                                        "timeout_ms": 5000, "validate_only": False})["topics"][0]
    assert created["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION and _fits(created["error_message"])
    deleted = client.call(20, 4, {"topic_names": [name], "timeout_ms": 5000})["responses"][0]
    assert deleted["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    meta = client.call(3, 9, {"topics": [{"name": name}], "allow_auto_topic_creation": True,
                              "include_cluster_authorized_operations": False,
                              "include_topic_authorized_operations": False})
    assert meta["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_a_huge_config_value_is_answered(client):
    created = client.call(19, 5, {"topics": [{"name": "huge-value", "num_partitions": 1,
                                              "replication_factor": 1, "assignments": [],
                                              "configs": [{"name": "cleanup.policy",
                                                           "value": "z" * 20000}]}],
                                  "timeout_ms": 5000, "validate_only": False})["topics"][0]
    assert created["error_code"] == ErrorCode.INVALID_CONFIG and _fits(created["error_message"])


def test_a_compact_string_over_32767_bytes_is_undecodable(broker):
    import struct

    from tests.support import RawClient

    def uvarint(n):
        out = bytearray()
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out)

    name = b"n" * 40000
    header = struct.pack(">hhih", 19, 5, 1, -1) + b"\x00"  # CreateTopics v5, null client id
    body = (uvarint(2) + uvarint(len(name) + 1) + name + struct.pack(">ih", 1, 1)
            + uvarint(1) + uvarint(1) + b"\x00" + struct.pack(">i?", 5000, False) + b"\x00")
    with RawClient(broker.port) as client:
        client.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
        assert client.is_closed_by_peer()
    fresh = WireClient("127.0.0.1", broker.port)
    assert fresh.call(18, 0, {})["error_code"] == ErrorCode.NONE
    fresh.close()


def test_a_misspelled_answer_field_is_an_error():
    codec = CREATE_TOPICS.codec(5, "response")
    with pytest.raises(UnknownFieldError, match="eror_code"):
        codec.encode({"throttle_time_ms": 0,
                      "topics": [{"name": "t", "eror_code": 36, "error_message": None}]})
    # A field of another version is not misspelled: it is left out at this one.
    codec.encode({"throttle_time_ms": 0, "topics": [{"name": "t", "error_code": 36,
                                                     "topic_id": None}]})
