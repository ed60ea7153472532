"""The generated codec (``protocol.generated``) against construct's, the reference.

Both are built from the same schema table; the generated one must give the
same bytes, the same decoded values (of the same message classes), the same
end position, and must refuse every input construct refuses.  The one
deliberate difference: ``records`` fields are read as a ``memoryview`` of the
buffer (equal to construct's ``bytes``), not a copy.  Checked for every
version of every declared message, not only the APIs that use it today, so that
turning it on for another API needs no new test.
"""

from __future__ import annotations

import io
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol import group_records, headers, txn_records
from kcoord.protocol.generated import GeneratedCodec
from kcoord.protocol.messages import ALL_APIS
from kcoord.protocol.messages.offset_commit import OFFSET_COMMIT
from kcoord.protocol.messages.produce import PRODUCE
from kcoord.protocol.values import Message
from kcoord.protocol.wire import DecodeError, StringTooLongError, UnknownFieldError
from tests.protocol.strategies import all_codec_cases, case_id, message_values

EXTRA = [headers.REQUEST_HEADER, headers.RESPONSE_HEADER, group_records.OFFSET_COMMIT_KEY,
         group_records.OFFSET_COMMIT_VALUE, group_records.GROUP_METADATA_KEY,
         group_records.GROUP_METADATA_VALUE, txn_records.TRANSACTION_LOG_KEY,
         txn_records.TRANSACTION_LOG_VALUE]
CASES = all_codec_cases() + [
    (api, version, direction)
    for api in EXTRA
    for version in range(api.min_version, api.max_version + 1)
    for direction in ("request", "response")
]
# Every version of the messages that use the generated codec, in every matrix.
ALL_CASES = all_codec_cases(full=True) + CASES[len(all_codec_cases()):]

SETTINGS = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# The messages that use the generated codec get many more examples.
HOT = [OFFSET_COMMIT, PRODUCE, headers.REQUEST_HEADER, group_records.OFFSET_COMMIT_KEY,
       group_records.OFFSET_COMMIT_VALUE, txn_records.TRANSACTION_LOG_VALUE]
HOT_CASES = [(api, version, direction) for api, version, direction in ALL_CASES if api in HOT]
HOT_SETTINGS = settings(SETTINGS, max_examples=150)
# Generated too, for the cost per request of every client (ApiVersions and
# Metadata on each connection, the heartbeats): every version, with fewer
# examples than the hottest.
WARM = [ALL_APIS[18], ALL_APIS[3], ALL_APIS[12], ALL_APIS[68]]
WARM_CASES = [(api, version, direction) for api, version, direction in ALL_CASES if api in WARM]
WARM_SETTINGS = settings(SETTINGS, max_examples=30)


def _codecs(case):
    api, version, direction = case
    reference = api.construct_codec(version, direction)
    return reference, GeneratedCodec(reference.struct, views=direction == "request")


def _schema(api, direction):
    return api.request if direction == "request" else api.response


def assert_same(a, b, path="value"):
    """Equal values of the same types, all the way down; ``a`` is the generated
    codec's, whose ``records`` fields of a request (only those) are views, ``b``
    construct's (which is which: the two tests after the Produce one below)."""
    if path.endswith(".records") and b is not None and type(a) is memoryview:
        assert type(b) is bytes, f"{path}: {type(b).__name__}"
        assert a.tobytes() == b, path
        return
    assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, Message):
        for key in a._keys:
            assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        # Bit for bit: a damaged float64 may read as NaN, which equals nothing.
        assert struct.pack(">d", a) == struct.pack(">d", b), path
    else:
        assert a == b, path


def _decode_both(reference, generated, data: bytes, pos: int = 0):
    """(value, end) from each codec, or the exception type each raised."""
    stream = io.BytesIO(data)
    stream.seek(pos)
    try:
        expected = reference.read(stream), stream.tell()
    except Exception as exc:  # noqa: BLE001 - compared below
        expected = type(exc)
    try:
        got = generated.decode_at(data, pos)
    except Exception as exc:  # noqa: BLE001
        got = type(exc)
    return expected, got


@pytest.mark.parametrize("case", CASES, ids=case_id)
@SETTINGS
@given(data=st.data())
def test_same_bytes_and_values(case, data):
    _same_bytes_and_values(case, data)


@pytest.mark.parametrize("case", HOT_CASES, ids=case_id)
@HOT_SETTINGS
@given(data=st.data())
def test_hot_apis_same_bytes_and_values(case, data):
    _same_bytes_and_values(case, data)


@pytest.mark.parametrize("case", WARM_CASES, ids=case_id)
@WARM_SETTINGS
@given(data=st.data())
def test_warm_apis_same_bytes_and_values(case, data):
    _same_bytes_and_values(case, data)


def _same_bytes_and_values(case, data):
    api, version, direction = case
    reference, generated = _codecs(case)
    value = data.draw(message_values(_schema(api, direction), version, api.is_flexible(version)))
    raw = reference.encode(value)
    assert generated.encode(value) == raw
    assert_same(generated.decode(raw), reference.decode(raw))
    # In the middle of a larger buffer, as in a frame after its header.
    prefix = data.draw(st.binary(max_size=5))
    framed = prefix + raw + b"\x00\x01"
    value_at, end = generated.decode_at(framed, len(prefix))
    assert end == len(prefix) + len(raw)
    assert_same(value_at, reference.decode(raw))
    # A bytearray or a memoryview (large frames are received into a bytearray)
    # reads to the same values.
    for buffer in (bytearray(framed), memoryview(framed)):
        value_in, end_in = generated.decode_at(buffer, len(prefix))
        assert end_in == end
        assert_same(value_in, reference.decode(raw))
    # And the decoded message (not only a dict) encodes back the same.
    assert generated.encode(value_at) == raw


@pytest.mark.parametrize("case", CASES, ids=case_id)
@SETTINGS
@given(data=st.data())
def test_damaged_input_is_refused_or_read_alike(case, data):
    """Truncated or altered bytes: the generated codec refuses what construct
    refuses (always with DecodeError), and reads the rest to the same values."""
    _damaged_input(case, data)


@pytest.mark.parametrize("case", HOT_CASES, ids=case_id)
@HOT_SETTINGS
@given(data=st.data())
def test_hot_apis_damaged_input(case, data):
    _damaged_input(case, data)


@pytest.mark.parametrize("case", WARM_CASES, ids=case_id)
@WARM_SETTINGS
@given(data=st.data())
def test_warm_apis_damaged_input(case, data):
    _damaged_input(case, data)


def _damaged_input(case, data):
    api, version, direction = case
    reference, generated = _codecs(case)
    value = data.draw(message_values(_schema(api, direction), version, api.is_flexible(version)))
    raw = bytearray(reference.encode(value))
    if raw and data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    for _ in range(data.draw(st.integers(0, 3))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(
                st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE]) | st.integers(0, 255))
    expected, got = _decode_both(reference, generated, bytes(raw))
    if isinstance(expected, type):
        assert issubclass(expected, DecodeError)
        assert got is DecodeError, f"construct raised {expected.__name__}, generated gave {got!r}"
    else:
        assert not isinstance(got, type), f"construct read it, generated raised {got.__name__}"
        assert got[1] == expected[1]
        assert_same(got[0], expected[0])
    # The same from a bytearray.
    try:
        got_mutable = generated.decode_at(raw, 0)
    except Exception as exc:  # noqa: BLE001
        got_mutable = type(exc)
    if isinstance(got, type):
        assert got_mutable is got
    else:
        assert got_mutable[1] == got[1]
        assert_same(got_mutable[0], expected[0])


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_truncated_input_is_a_decode_error(case):
    reference, generated = _codecs(case)
    raw = reference.encode({})
    for cut in range(len(raw)):
        with pytest.raises(DecodeError):
            generated.decode(raw[:cut])
    with pytest.raises(DecodeError):
        generated.decode(raw + b"\x00")  # trailing bytes


def _encode_error(codec, value):
    try:
        codec.encode(value)
    except Exception as exc:  # noqa: BLE001
        return type(exc)
    return None


@pytest.mark.parametrize("version", range(OFFSET_COMMIT.min_version, OFFSET_COMMIT.max_version + 1))
def test_values_that_cannot_be_encoded_fail_alike(version):
    reference, generated = _codecs((OFFSET_COMMIT, version, "request"))
    partition = {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
    good = {"group_id": "g", "topics": [{"name": "t", "partitions": [partition]}]}
    bad = [
        {**good, "no_such_field": 1},
        {**good, "topics": [{"name": "t", "partitions": [{**partition, "typo": 1}]}]},
        {**good, "group_id": None},
        {**good, "group_id": "x" * 40_000},
        {**good, "topics": None},
        {**good, "topics": [{"name": "t", "partitions": [{**partition, "partition_index": 1 << 40}]}]},
        {**good, "topics": [{"name": "t", "partitions": [{**partition,
                                                          "committed_offset": "1"}]}]},
        {**good, "topics": [None]},
    ]
    assert _encode_error(generated, good) is None
    for value in bad:
        expected = _encode_error(reference, value)
        assert expected is not None
        assert _encode_error(generated, value) is expected, value
    assert _encode_error(generated, {**good, "group_id": "x" * 40_000}) is StringTooLongError
    assert _encode_error(generated, {**good, "no_such_field": 1}) is UnknownFieldError


def test_the_hot_apis_use_the_generated_codec():
    for api in HOT + WARM:
        for version in range(api.min_version, api.max_version + 1):
            for direction in ("request", "response"):
                assert isinstance(api.codec(version, direction), GeneratedCodec), \
                    (api.name, version, direction)
    # The others keep construct's codec.
    assert not ALL_APIS[16].codec(1, "request").generated
    assert not ALL_APIS[11].codec(5, "response").generated
    # Fetch answers carry megabytes of records: construct's codec writes them
    # with one copy fewer
    assert not ALL_APIS[1].codec(16, "response").generated


def test_a_request_frame_reads_the_same_through_the_server_path():
    from kcoord.protocol.headers import decode_request as _decode

    body = {"group_id": "group-1", "generation_id_or_member_epoch": 3, "member_id": "m-1",
            "group_instance_id": "i-1", "topics": [{"name": "orders", "partitions": [
                {"partition_index": 2, "committed_offset": 42, "committed_leader_epoch": 7,
                 "committed_metadata": "meta"}]}]}
    for version in range(OFFSET_COMMIT.min_version, OFFSET_COMMIT.max_version + 1):
        frame = headers.frame_request(OFFSET_COMMIT, version, 99, "client-1", body)[4:]
        header, request = _decode(OFFSET_COMMIT, version, frame)
        stream = io.BytesIO(frame)
        flexible = OFFSET_COMMIT.is_flexible(version)
        expected_header = headers.REQUEST_HEADER.construct_codec(
            2 if flexible else 1, "request").read(stream)
        expected = OFFSET_COMMIT.construct_codec(version, "request").read(stream)
        assert_same(header, expected_header)
        assert_same(request, expected)
        assert request.group_id == "group-1" and header.client_id == "client-1"


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
def test_produce_records_are_a_view_of_the_frame_not_a_copy(version):
    from kcoord.protocol.headers import decode_request as _decode

    batch = bytes(range(256)) * 40
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30_000, "topic_data": [
        {"name": "orders", "partition_data": [{"index": 0, "records": batch},
                                              {"index": 1, "records": None}]}]}
    frame = bytearray(headers.frame_request(PRODUCE, version, 7, "c", body)[4:])
    header, request = _decode(PRODUCE, version, frame)
    assert header.correlation_id == 7
    records = request.topic_data[0].partition_data[0].records
    assert type(records) is memoryview and records.obj is frame
    assert not records.readonly and records == batch
    assert request.topic_data[0].partition_data[1].records is None
    # Written through the view, the frame changes: it is the same memory.
    records[0] = 0xFF
    assert frame[frame.index(batch[1:100]) - 1] == 0xFF
    # From an immutable frame, a read-only view.
    header, request = _decode(PRODUCE, version, bytes(frame))
    assert request.topic_data[0].partition_data[0].records.readonly
    # The encoder takes a view as it takes bytes.
    codec = PRODUCE.codec(version, "request")
    assert codec.encode(request) == PRODUCE.construct_codec(version, "request").encode(
        {**body, "topic_data": [{"name": "orders", "partition_data": [
            {"index": 0, "records": b"\xff" + batch[1:]}, {"index": 1, "records": None}]}]})


@pytest.mark.parametrize("version", [4, 11, 12, 17, 18])
def test_fetch_answers_read_their_records_as_bytes(version):
    """A response's records (a Fetch answer, decoded by a client) read as bytes, as
    construct's codec gives them; a view encodes as bytes do."""
    fetch = ALL_APIS[1]
    batch = bytes(range(256)) * 8
    partition = {"partition_index": 0, "error_code": 0, "high_watermark": 5,
                 "last_stable_offset": 5, "log_start_offset": 0, "aborted_transactions": [],
                 "preferred_read_replica": -1, "records": memoryview(batch)}
    topic = {"topic": "orders", "topic_id": uuid.UUID(int=7), "partitions": [partition]}
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [topic]}
    codec = GeneratedCodec(fetch.construct_codec(version, "response").struct, views=False)
    raw = codec.encode(body)
    assert raw == fetch.construct_codec(version, "response").encode(
        {**body, "responses": [{**topic, "partitions": [{**partition, "records": batch}]}]})
    for buffer in (raw, bytearray(raw), memoryview(raw)):
        records = codec.decode_at(buffer, 0)[0].responses[0].partitions[0].records
        assert type(records) is bytes and records == batch


def test_read_from_a_stream_leaves_it_after_the_message():
    codec = OFFSET_COMMIT.codec(9, "response")
    raw = codec.encode({"topics": [{"name": "t", "partitions": [{"partition_index": 1}]}]})
    stream = io.BytesIO(b"\x07" + raw + b"rest")
    stream.seek(1)
    value = codec.read(stream)
    assert stream.tell() == 1 + len(raw)
    assert value.topics[0].partitions[0].partition_index == 1


# -- edges that random values rarely reach -------------------------------------------------


def _agree(reference, generated, data: bytes):
    expected, got = _decode_both(reference, generated, data)
    if isinstance(expected, type):
        assert got is DecodeError, got
    else:
        assert not isinstance(got, type), got
        assert got[1] == expected[1]
        assert_same(got[0], expected[0])
    return got


def test_string_length_limit_and_long_varints():
    reference, generated = _codecs((OFFSET_COMMIT, 9, "response"))
    for size in (126, 127, 128, 16_383, 16_384, 32_767):
        value = {"topics": [{"name": "t" * size, "partitions": []}]}
        raw = reference.encode(value)
        assert generated.encode(value) == raw
        assert_same(generated.decode(raw), reference.decode(raw))
    # A compact string of 32,768 bytes: Kafka's readers refuse it, so do both.
    ok = bytearray(reference.encode({"topics": [{"name": "t" * 32_767, "partitions": []}]}))
    too_long = ok[:5] + bytes([0x81, 0x80, 0x02]) + b"t" * 32_768 + ok[5 + 3 + 32_767:]
    assert reference.decode(bytes(ok))
    assert _agree(reference, generated, bytes(too_long)) is DecodeError
    # A varint longer than ten bytes is refused, not read, even when it ends.
    assert _agree(reference, generated, bytes(4) + b"\x81" + b"\x80" * 9 + b"\x00\x00") is DecodeError
    assert _agree(reference, generated, bytes(4) + b"\x81" + b"\x80" * 8 + b"\x00\x00")[0].topics == []


def test_tagged_fields_known_unknown_and_truncated():
    from kcoord.protocol.messages.api_versions import API_VERSIONS

    reference, generated = _codecs((API_VERSIONS, 3, "response"))
    raw = reference.encode({"api_keys": [], "finalized_features_epoch": 5,
                            "zk_migration_ready": True})
    assert generated.encode({"api_keys": [], "finalized_features_epoch": 5,
                             "zk_migration_ready": True}) == raw
    body, tags = raw[:-14], raw[-14:]  # the section: count 2, tag 1 (8 bytes), tag 3 (1 byte)
    assert tags[0] == 2
    # Known tags read; a known tag whose size is wrong is refused.
    _agree(reference, generated, raw)
    assert _agree(reference, generated, body + b"\x02\x01\x09" + tags[3:]) is DecodeError
    assert _agree(reference, generated, body + b"\x02\x01\x07" + tags[3:]) is DecodeError
    # An unknown tag is skipped, whatever it holds...
    got = _agree(reference, generated, body + b"\x01\x07\x03abc")
    assert got[1] == len(body) + 6
    # ...unless it claims more bytes than there are, at the very end of the frame.
    assert _agree(reference, generated, body + b"\x01\x07\x05abc") is DecodeError
    assert _agree(reference, generated, body + b"\x01\x07") is DecodeError


def test_array_counts_beyond_the_bytes_left_are_refused():
    reference, generated = _codecs((OFFSET_COMMIT, 8, "response"))
    head = reference.encode({})[:4]
    for count in (b"\x02", b"\x7f", b"\xff\xff\xff\xff\x07"):
        assert _agree(reference, generated, head + count + b"\x00") is DecodeError
    reference, generated = _codecs((OFFSET_COMMIT, 3, "response"))
    for count in (b"\x00\x00\x00\x02", b"\xff\xff\xff\xff", b"\xff\xff\xff\xfe"):
        assert _agree(reference, generated, head + count + b"\x00") is DecodeError
