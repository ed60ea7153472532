"""Group requests that Kafka answers and kcoord did not, or answered wrongly:

* Group ids that are not valid UTF-8 dropped the connection.  Kafka decodes
  every string with Java's ``new String(bytes, UTF_8)``, which replaces
  malformed bytes with U+FFFD, and answers.  kcoord now decodes every string
  the same way (Python's ``replace`` differs from Java only on encoded
  surrogates); a string that would outgrow 32767 bytes once replaced makes the
  request undecodable (the connection closes with a log line), since no
  answer quoting it could be encoded.
* A 32,767-byte ``group.instance.id`` (or client id) made a member id too long
  to encode: its JoinGroup and every DescribeGroups naming its group dropped
  the connection with a traceback, for as long as the member lived.  The join
  is now refused at the source with Kafka's answer (UNKNOWN_SERVER_ERROR) and
  no member is added.
* An OffsetCommit refused only with OFFSET_METADATA_TOO_LARGE still created an
  empty group, listed until the next restart; Kafka lists none.

The wire answers are compared with Apache Kafka's for the same bytes."""

from __future__ import annotations

import codecs
import io
import time
import uuid

import pytest

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.headers import frame_request
from kcoord.protocol.messages import ALL_APIS
from kcoord.protocol.wire import DecodeError, decode_utf8, read_string
from kcoord.protocol.client import WireClient
from tests.reference.test_differential_groups import _topic, diff  # noqa: F401 (fixture)

# (bytes, what Java 17's new String(bytes, UTF_8) makes of them), checked on a
# JVM: Java takes an encoded surrogate whole where Python's "replace" gives one
# U+FFFD per byte.
JAVA_DECODED = [
    (b"\xff", "\ufffd"),
    (b"\xc3", "\ufffd"),
    (b"\xe2\x82", "\ufffd"),
    (b"\xe2\x82A", "\ufffdA"),
    (b"\xed\xa0\x80", "\ufffd"),
    (b"\xed\xbf\xbf", "\ufffd"),
    (b"\xed\xa0", "\ufffd"),
    (b"\xed\xbf\xff", "\ufffd\ufffd"),
    (b"\xeca\x90\xed\xa0", "\ufffda\ufffd\ufffd"),
    (b"\xf0\x90\x80", "\ufffd"),
    (b"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"),
    (b"\xc0\xaf", "\ufffd\ufffd"),
    (b"\xe0\x80\xaf", "\ufffd\ufffd\ufffd"),
    (b"a\x80\x80b", "a\ufffd\ufffdb"),
    (b"\xf8\x88\x80\x80\x80", "\ufffd" * 5),
    (b"caf\xc3\xa9 \xf0\x9f\x98\x80", "caf\u00e9 \U0001F600"),
]

MARKER = b"\x01\x02\x03"  # swapped for malformed bytes of the same length
MALFORMED = b"\xff\xed\xa0"
REPLACED = "\ufffd\ufffd"


@pytest.mark.parametrize("raw,text", JAVA_DECODED)
def test_strings_are_decoded_as_java_decodes_them(raw, text):
    assert decode_utf8(raw) == text
    assert read_string(io.BytesIO(len(raw).to_bytes(2, "big") + raw)) == text


def test_a_string_that_outgrows_a_kafka_string_once_replaced_is_undecodable():
    assert len(decode_utf8(b"\xff" * 10_922).encode()) == 32_766
    with pytest.raises(DecodeError, match="32767"):
        decode_utf8(b"\xff" * 10_923)
    with pytest.raises(DecodeError):
        read_string(io.BytesIO(b"\x7f\xff" + b"a" * 32_000 + b"\xff" * 767))
    # The check is not fooled by a long string whose replacement fits.
    assert len(decode_utf8(b"a" * 32_000 + b"\xff" * 255).encode()) == 32_765
    with pytest.raises(UnicodeDecodeError):
        codecs.decode(b"\xff", "utf-8")  # the strict codec is untouched


def _raw(client: WireClient, api: int, version: int, body: dict, group: str) -> dict:
    """Send a frame naming ``group`` (which ends with MARKER) with MARKER replaced
    by malformed UTF-8; the answer."""
    client.correlation_id += 1
    frame = frame_request(ALL_APIS[api], version, client.correlation_id, client.client_id, body)
    named = group.encode()
    assert frame.count(named) == 1
    client.sock.sendall(frame.replace(named, named[:-len(MARKER)] + MALFORMED))
    return client.receive(api, version)


def _join(group: str, instance: str | None, version: int = 7) -> dict:
    return {"group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
            "member_id": "", "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}], "reason": None}


def _served(client: WireClient, api: int, version: int, body: dict, group: str) -> dict:
    """``_raw``, asked again while the group's partition is not served yet (as a
    client does after NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS)."""
    deadline = time.monotonic() + 30
    while True:
        answer = _raw(client, api, version, body, group)
        if answer.get("error_code") not in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS) \
                or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def _malformed_id_answers(bootstrap: str, prefix: str) -> list:
    group = prefix + MARKER.decode()
    with WireClient.to(bootstrap) as client:
        _served(client, 9, 7, {"group_id": group, "topics": None, "require_stable": False}, group)
        answers = [
            _raw(client, 10, 3, {"key": group, "key_type": 0}, group),
            _raw(client, 10, 4, {"key_type": 0, "coordinator_keys": [group]}, group),
            _raw(client, 15, 5, {"groups": [group], "include_authorized_operations": False},
                 group),
            _raw(client, 9, 7, {"group_id": group, "topics": None, "require_stable": False},
                 group),
            _served(client, 11, 7, _join(group, "inst"), group),
            _raw(client, 15, 5, {"groups": [group], "include_authorized_operations": False},
                 group),
        ]
    for answer in answers:  # host, port and the member ids' random part differ
        answer.pop("port", None)
        for c in answer.get("coordinators", ()):
            c.pop("port")
    joined = answers[4]
    assert joined["error_code"] == E.NONE, (bootstrap, joined)
    assert joined["member_id"].startswith("inst-")
    for field in ("member_id", "leader"):
        joined[field] = "<member>"
    joined["members"][0]["member_id"] = "<member>"
    described = answers[5]["groups"][0]
    described["members"][0]["member_id"] = "<member>"
    return answers


def test_group_ids_that_are_not_utf8_are_answered_as_kafka_answers(diff):  # noqa: F811
    prefix = f"utf8-{uuid.uuid4().hex[:8]}-"
    ours = _malformed_id_answers(diff.kcoord.bootstrap, prefix)
    find, find_v4, dead, fetched, joined, described = ours
    assert find["error_code"] == E.NONE
    assert find_v4["coordinators"][0]["key"] == prefix + REPLACED
    assert dead["groups"][0]["group_id"] == prefix + REPLACED
    assert dead["groups"][0]["group_state"] == "Dead"
    assert joined["error_code"] == E.NONE
    assert (described["groups"][0]["group_id"], described["groups"][0]["group_state"]) == \
        (prefix + REPLACED, "CompletingRebalance")
    assert ours == _malformed_id_answers(diff.kafka.bootstrap, prefix)


def test_a_member_id_too_long_to_encode_is_refused_at_the_join(broker):
    with WireClient("127.0.0.1", broker.port) as client:
        joined = client.call(11, 7, _join("long-instance", "i" * 32_767))
        assert (joined["error_code"], joined["member_id"]) == (E.UNKNOWN_SERVER_ERROR, "")
        listed = client.call(16, 4, {"states_filter": []})["groups"]
        assert ("long-instance", "Empty") in [(g["group_id"], g["group_state"]) for g in listed]
        described = client.call(15, 5, {"groups": ["long-instance", "other"],
                                        "include_authorized_operations": False})
        assert [(g["error_code"], g["group_state"], g["members"])
                for g in described["groups"]] == [(E.NONE, "Empty", []), (E.NONE, "Dead", [])]
        # The longest instance id whose member id fits is served.
        fits = client.call(11, 7, _join("long-instance", "i" * (32_767 - 37)))
        assert fits["error_code"] == E.NONE
        assert len(fits["member_id"]) == 32_767
        described = client.call(15, 5, {"groups": ["long-instance"],
                                        "include_authorized_operations": False})
        assert [m["member_id"] for m in described["groups"][0]["members"]] == \
            [fits["member_id"]]
    # A client id as long, for a dynamic member of an old version and of v4+.
    with WireClient("127.0.0.1", broker.port, client_id="c" * 32_767) as client:
        for version in (3, 4):
            joined = client.call(11, version, _join(f"long-client-{version}", None))
            assert joined["error_code"] == E.UNKNOWN_SERVER_ERROR


def _refused_commit_leaves_no_group(bootstrap: str, topic: str, group: str) -> tuple:
    with WireClient.to(bootstrap) as client:
        committed = client.call(8, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": "m" * 5000}]}]})
        listed = [g["group_id"] for g in client.call(16, 4, {"states_filter": []})["groups"]]
        described = client.call(15, 5, {"groups": [group],
                                        "include_authorized_operations": False})
    return (committed["topics"][0]["partitions"][0]["error_code"], group in listed,
            described["groups"][0]["group_state"])


def test_a_commit_refused_for_its_metadata_leaves_no_group(diff):  # noqa: F811
    topic = _topic(diff, partitions=1)
    ours = _refused_commit_leaves_no_group(diff.kcoord.bootstrap, topic, "phantom-commit")
    assert ours == (E.OFFSET_METADATA_TOO_LARGE, False, "Dead")
    assert ours == _refused_commit_leaves_no_group(diff.kafka.bootstrap, topic, "phantom-commit")


def test_a_commit_refused_for_some_partitions_stores_the_others_and_creates_the_group():
    from tests.broker.group_harness import Harness

    h = Harness()
    ticket = h.commit("mixed", {("t", 0): (5, "m" * 5000), ("t", 1): (7, ""), ("t", 2): (9, "")})
    assert h.answer(ticket) is None  # waits for its write
    h.settle()
    assert h.answer(ticket) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE,
                                ("t", 2): E.NONE}
    assert "mixed" in h.core.groups
    code, fetched = h.core.fetch_offsets("mixed", [("t", [0, 1, 2])])
    assert [(p, o.offset if o else None) for p, o in fetched[0][1]] == [(0, None), (1, 7), (2, 9)]
    refused = h.commit("refused", {("t", 0): (5, "m" * 5000)})
    assert h.answer(refused) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert "refused" not in h.core.groups and not h.pending
