"""Exact bytes: ApiVersions answers as Kafka encodes them, Metadata
requests as real clients frame them, and the request/response headers."""

from __future__ import annotations

import io
import struct

from kcoord.protocol.headers import (
    request_header_codec,
    request_header_version,
    response_header_codec,
    response_header_version,
)
from kcoord.protocol.messages import ALL_APIS
from kcoord.protocol.wire import ZERO_UUID

API_VERSIONS = ALL_APIS[18]
METADATA = ALL_APIS[3]


def frame(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return struct.pack(">i", len(body)) + body


def response_frame(api, version, correlation_id, value) -> bytes:
    header_version = response_header_version(api.key, api.is_flexible(version))
    header = response_header_codec(header_version).encode({"correlation_id": correlation_id})
    return frame(header, api.codec(version, "response").encode(value))


def split_request(data: bytes):
    """(header, body) of one framed request, read with our codecs."""
    (size,) = struct.unpack(">i", data[:4])
    assert size == len(data) - 4
    stream = io.BytesIO(data[4:])
    # The api key and version come first in every header version.
    api_key, api_version = struct.unpack(">hh", data[4:8])
    api = ALL_APIS[api_key]
    header = request_header_codec(request_header_version(api.is_flexible(api_version))).read(stream)
    body = api.codec(api_version, "request").decode(stream.read())
    return header, body


# --- ApiVersions (Kafka's bytes, worked by hand) ------------------------------------


def test_api_versions_v3_answer():
    value = {
        "error_code": 0,
        "api_keys": [
            {"api_key": 0, "min_version": 0, "max_version": 11},
            {"api_key": 18, "min_version": 0, "max_version": 4},
        ],
        "throttle_time_ms": 0,
    }
    expected = bytes.fromhex(
        "0000001a" "00000007" "0000" "03" "0000" "0000" "000b" "00"
        "0012" "0000" "0004" "00" "00000000" "00"
    )
    assert response_frame(API_VERSIONS, 3, 7, value) == expected
    # v4 without features is byte-identical to v3.
    assert response_frame(API_VERSIONS, 4, 7, value) == expected
    decoded = API_VERSIONS.codec(3, "response").decode(expected[8:])
    assert decoded.api_keys[1].max_version == 4
    assert decoded.finalized_features_epoch == -1
    assert decoded.supported_features == []


def test_api_versions_v0_fallback():
    value = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]}
    expected = bytes.fromhex("00000010" "0000002a" "0023" "00000001" "0012" "0000" "0004")
    assert response_frame(API_VERSIONS, 0, 0x2A, value) == expected


def test_api_versions_answer_always_uses_response_header_v0():
    assert response_header_version(18, True) == 0
    assert response_header_version(3, True) == 1
    assert response_header_version(3, False) == 0


# --- Metadata requests as clients send them --------------------------------------

# kafka-python 3 with api_version=(0, 9) bootstraps with Metadata v0 (all topics
# is an empty array in v0); correlation id 1, client id "kafka-python".
METADATA_V0_ALL = bytes.fromhex(
    "0000001a" "0003" "0000" "00000001" "000c" + b"kafka-python".hex() + "00000000"
)
# Metadata v9 (first flexible version): header v2 keeps a classic client id and
# adds a tag section; the body asks for topic "t" with auto-creation off.
METADATA_V9_ONE = bytes.fromhex(
    "0000001f" "0003" "0009" "00000002" "000c" + b"kafka-python".hex() + "00"
    "02" "0274" "00" "00" "00" "00" "00"  # topics [t], auto-create off, two flags, tags
)


def test_metadata_v0_request():
    header, body = split_request(METADATA_V0_ALL)
    assert header == {
        "request_api_key": 3,
        "request_api_version": 0,
        "correlation_id": 1,
        "client_id": "kafka-python",
    }
    assert body.topics == []
    # v0 has no auto-creation flag: the default (true) applies.
    assert body.allow_auto_topic_creation is True
    assert frame(
        request_header_codec(1).encode(header), METADATA.codec(0, "request").encode(body)
    ) == METADATA_V0_ALL


def test_metadata_v9_request():
    header, body = split_request(METADATA_V9_ONE)
    assert header.request_api_version == 9
    assert header.correlation_id == 2
    assert header.client_id == "kafka-python"
    assert [t.name for t in body.topics] == ["t"]
    assert body.topics[0].topic_id == ZERO_UUID
    assert body.allow_auto_topic_creation is False
    assert body.include_topic_authorized_operations is False
    assert frame(
        request_header_codec(2).encode(header), METADATA.codec(9, "request").encode(body)
    ) == METADATA_V9_ONE


def test_metadata_requests_match_kafka_python():
    import kafka.protocol.metadata as kp

    req = kp.MetadataRequest[0](topics=[])
    req.with_header(correlation_id=1, client_id="kafka-python")
    assert bytes(req.encode(header=True, framed=True)) == METADATA_V0_ALL

    req = kp.MetadataRequest[9](
        topics=[kp.MetadataRequest.MetadataRequestTopic(name="t")],
        allow_auto_topic_creation=False,
    )
    req.with_header(correlation_id=2, client_id="kafka-python")
    assert bytes(req.encode(header=True, framed=True)) == METADATA_V9_ONE


def test_metadata_null_topics_means_all_from_v1():
    codec = METADATA.codec(1, "request")
    assert codec.encode({"topics": None}) == b"\xff\xff\xff\xff"
    assert codec.decode(b"\xff\xff\xff\xff").topics is None
    assert METADATA.codec(9, "request").encode({"topics": None}) == b"\x00\x01\x00\x00\x00"


# --- headers ---------------------------------------------------------------------------


def test_request_header_v1():
    codec = request_header_codec(1)
    value = {"request_api_key": 11, "request_api_version": 5, "correlation_id": 9, "client_id": "c1"}
    raw = bytes.fromhex("000b" "0005" "00000009" "0002" "6331")
    assert codec.encode(value) == raw
    assert codec.decode(raw) == value


def test_request_header_v1_null_client_id():
    codec = request_header_codec(1)
    raw = bytes.fromhex("0003" "0000" "00000001" "ffff")
    assert codec.decode(raw).client_id is None
    assert codec.encode({"request_api_key": 3, "correlation_id": 1, "client_id": None}) == raw
    # A missing client id is null, not empty.
    assert codec.encode({"request_api_key": 3, "correlation_id": 1}) == raw


def test_request_header_v2_keeps_a_classic_client_id():
    codec = request_header_codec(2)
    value = {"request_api_key": 3, "request_api_version": 12, "correlation_id": 1, "client_id": "c"}
    # int16 length 1, not the compact 0x02, then the empty tag section.
    raw = bytes.fromhex("0003" "000c" "00000001" "0001" "63" "00")
    assert codec.encode(value) == raw
    assert codec.decode(raw) == value
    null = bytes.fromhex("0003" "000c" "00000001" "ffff" "00")
    assert codec.decode(null).client_id is None
    assert codec.encode({**value, "client_id": None}) == null


def test_request_header_v2_skips_unknown_tags():
    raw = bytes.fromhex("0003" "000c" "00000001" "0001" "63" "01" "05" "02" "abcd")
    assert request_header_codec(2).decode(raw).client_id == "c"


def test_request_header_versions():
    assert request_header_version(False) == 1
    assert request_header_version(True) == 2


def test_response_headers():
    assert response_header_codec(0).encode({"correlation_id": 7}) == bytes.fromhex("00000007")
    assert response_header_codec(1).encode({"correlation_id": 7}) == bytes.fromhex("0000000700")
    assert response_header_codec(0).decode(bytes.fromhex("0000002a")).correlation_id == 42
    assert response_header_codec(1).decode(bytes.fromhex("0000002a00")).correlation_id == 42


def test_headers_match_kafka_python():
    import kafka.protocol.api_header as hdr

    for flexible, version in ((False, 1), (True, 2)):
        for client_id in ("kafka-python", None, ""):
            theirs = hdr.RequestHeader(
                request_api_key=3, request_api_version=9, correlation_id=5, client_id=client_id
            ).encode(flexible=flexible)
            decoded = request_header_codec(version).decode(bytes(theirs))
            assert decoded.client_id == client_id
            assert request_header_codec(version).encode(decoded) == bytes(theirs)
        ours = response_header_codec(1 if flexible else 0).encode({"correlation_id": 77})
        assert bytes(hdr.ResponseHeader(correlation_id=77).encode(flexible=flexible)) == ours
