"""The newest versions of the data-plane APIs, as Kafka 4.4 serves them: Produce
12-13 (v13 names topics by id), Fetch 18, ListOffsets 10-11 (a timeout, the
earliest-pending-upload target) and Metadata 13 (a top-level error code), each
asked of kcoord and Kafka 4.4 with the same bytes and compared field by field."""

from __future__ import annotations

import itertools
import re
import time
import uuid

import pytest

from kcoord.protocol import compression
from kcoord.protocol.client import WireClient
from kcoord.protocol.records import Record, build_batch, decode_record_set
from tests.reference.differential import Differential, differences
from tests.reference.test_differential_data import (
    _batch,
    _fetch_body,
    _id_fetch_body,
    _learn_ids,
    _produce_body,
    _topic,
)

UNKNOWN_ID = uuid.UUID(int=0x5EED)
TS = 1_700_000_000_000
_names = itertools.count()


@pytest.fixture
def d(reference_pair) -> Differential:
    kcoord, ref = reference_pair("main")
    return Differential(kcoord.bootstrap, ref.bootstrap, f"Kafka {ref.version}")


def _by_id(topic_ids, records, partitions=(0,)):
    """A Produce v13 body: ``topic_ids`` names each topic by id."""
    return {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"topic_id": tid, "partition_data": [
                {"index": p, "records": records} for p in partitions]} for tid in topic_ids]}


def test_produce_12_as_11_and_fetch_18_returns_the_same_bytes(d):
    topic = _topic(d)
    for codec in (compression.NONE, compression.GZIP, compression.ZSTD):
        answer = d.same(0, 12, _produce_body(topic, _batch(b"a", b"bb", compression_type=codec)))
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
    d.same(1, 12, _fetch_body(topic, 0))
    _learn_ids(d, topic)
    for version in (17, 18):
        for offset in (0, 2, 5, 6):
            answer = d.same(1, version, lambda side: _id_fetch_body(
                [(side.topic_ids[topic], (0,))], offset=offset))
            assert answer["responses"][0]["partitions"][0]["error_code"] == 0

    def with_high_watermark(side):
        # v18's follower high watermark (tagged) changes nothing for a consumer
        body = _id_fetch_body([(side.topic_ids[topic], (0,))])
        body["topics"][0]["partitions"][0]["high_watermark"] = 3
        return body
    answer = d.same(1, 18, with_high_watermark)
    assert answer["responses"][0]["partitions"][0]["high_watermark"] == 6


def test_produce_13_names_topics_by_id(d):
    topic = _topic(d, partitions=2)
    _learn_ids(d, topic)
    first = d.same(0, 13, lambda side: _by_id([side.topic_ids[topic]], _batch(b"x", b"y")))
    assert first["responses"][0]["topic_id"] == "<topic-id-0>"
    assert first["responses"][0]["partition_responses"][0]["base_offset"] == 0
    # an unknown partition of a known topic, an unknown id, the zero id
    answer = d.same(0, 13, lambda side: _by_id([side.topic_ids[topic]], _batch(b"z"), (1, 9)))
    codes = [p["error_code"] for p in answer["responses"][0]["partition_responses"]]
    assert codes == [0, 3]
    for unknown in (UNKNOWN_ID, uuid.UUID(int=0)):
        # (one partition each: Kafka answers several in hash order)
        answer = d.same(0, 13, _by_id([unknown], _batch(b"z"), (1,)))
        assert [p["error_code"] for p in answer["responses"][0]["partition_responses"]] \
            == [100]  # UNKNOWN_TOPIC_ID
    # what v13 wrote, fetched by name and by id
    d.same(1, 12, _fetch_body(topic, 0))
    d.same(1, 18, lambda side: _id_fetch_body([(side.topic_ids[topic], (0, 1))]))


def test_produce_13_refusals_as_kafka_4_4(d):
    topic = _topic(d)
    _learn_ids(d, topic)
    corrupt = bytearray(_batch(b"x"))
    corrupt[-1] ^= 0xFF
    for records in (bytes(corrupt), _batch(b"x") + _batch(b"y")):
        d.same(0, 13, lambda side: _by_id([side.topic_ids[topic]], records))
    d.same(0, 13, lambda side: dict(_by_id([side.topic_ids[topic]], _batch(b"x")), acks=2))


def test_a_timestamp_more_than_an_hour_ahead_is_refused_by_default(d):
    """Kafka 4.0 bounds a CreateTime record at an hour past the broker's clock
    by default (``message.timestamp.after.max.ms``, KIP-1030; Long.MAX before):
    a batch two hours ahead is refused whole, one a minute ahead appended."""
    topic = _topic(d)
    now = time.time_ns() // 1_000_000
    for ahead in (120 * 60_000, 60_000):
        records = build_batch([Record(None, now + ahead, b"k", b"v"),
                               Record(None, now, b"k", b"w")])
        ours, theirs = d.ask(0, 12, _produce_body(topic, records))
        for answer in (ours, theirs):
            part = answer["responses"][0]["partition_responses"][0]
            # each broker states the bounds from its own clock
            part["error_message"] = re.sub(r"\[-?\d+, -?\d+\]", "[...]",
                                           part["error_message"] or "")
            for error in part["record_errors"]:
                error["batch_index_error_message"] = re.sub(
                    r"\[-?\d+, -?\d+\]", "[...]", error["batch_index_error_message"] or "")
        assert not differences(ours, theirs), differences(ours, theirs)
        code = ours["responses"][0]["partition_responses"][0]["error_code"]
        assert code == (32 if ahead > 3_600_000 else 0)  # INVALID_TIMESTAMP
    answer = d.same(1, 12, _fetch_body(topic, 0))
    batches = decode_record_set(answer["responses"][0]["partitions"][0]["records"])
    assert [r.value for b in batches for r in b.records] == [b"v", b"w"]


def _create(d, name, configs, validate_only=False) -> dict:
    return d.same(19, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [],
                                      "configs": [{"name": k, "value": v} for k, v in configs]}],
                          "timeout_ms": 10000, "validate_only": validate_only})


def test_topic_configs_are_kafka_4_4_s(d):
    """The topic configs Kafka 4.4 added (a record's decompressed size, tiered
    storage's upload lags, share groups' dead-letter topics) are listed, set and
    checked as on Kafka 4.4; the ones 4.0 removed are unknown names."""
    name = f"nv-cfg-{next(_names)}"
    added = [("max.decompressed.message.bytes", "100"), ("remote.copy.lag.bytes", "5"),
             ("remote.copy.lag.ms", "-1"), ("errors.deadletterqueue.group.enable", "true")]
    for config in [("message.format.version", "3.0"), ("message.downconversion.enable", "false"),
                   ("message.timestamp.difference.max.ms", "10"),
                   ("max.decompressed.message.bytes", "0"),
                   ("max.decompressed.message.bytes", "2147483640"), ("remote.copy.lag.ms", "-2"),
                   ("remote.copy.lag.bytes", "-2"), ("errors.deadletterqueue.group.enable", "no")]:
        answer = _create(d, f"{name}-refused", [config], validate_only=True)
        assert answer["topics"][0]["error_code"] == 40, config  # INVALID_CONFIG
    assert _create(d, name, added)["topics"][0]["error_code"] == 0
    for side in (d.kcoord, d.kafka):
        d.wait_for_topics(side, [name])
    for keys in (None, [k for k, _v in added]):
        d.same(32, 4, {"resources": [{"resource_type": 2, "resource_name": name,
                                      "configuration_keys": keys}],
                       "include_synonyms": True, "include_documentation": False})
    # a compressed record whose body is past max.decompressed.message.bytes is
    # refused; the same record uncompressed (never decompressed) and a smaller
    # compressed one are appended
    big = [Record(None, TS, b"k", b"x" * 150)]
    small = [Record(None, TS, b"k", b"x" * 20)]
    for records, codec in ((big, compression.GZIP), (big, compression.NONE),
                           (small, compression.GZIP), (big, compression.ZSTD)):
        answer = d.same(0, 12, _produce_body(name, build_batch(records, compression_type=codec)))
        code = answer["responses"][0]["partition_responses"][0]["error_code"]
        assert code == (87 if records is big and codec else 0), (len(records[0].value), codec)
    d.same(1, 12, _fetch_body(name, 0))


@pytest.mark.parametrize("version", [9, 10, 11])
def test_list_offsets_10_and_11(d, version):
    topic = _topic(d)
    d.same(0, 12, _produce_body(topic, _batch(b"a", b"b", b"c")))
    for timestamp in (-1, -2, -3, -4, -5, -6, -7, 0, 1_700_000_000_001, 1_800_000_000_000):
        for isolation in (0, 1):
            answer = d.same(2, version, {
                "replica_id": -1, "isolation_level": isolation, "timeout_ms": 1,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1,
                     "timestamp": timestamp}]}]})
            code = answer["topics"][0]["partitions"][0]["error_code"]
            # -6 (earliest pending upload) from v11; no other negative target
            assert code == (35 if timestamp == -7 or (timestamp == -6 and version < 11) else 0)


def test_metadata_13_as_kafka_4_4(d):
    topic = _topic(d, partitions=3)
    answer = d.same(3, 13, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)},
                                       {"name": "md13-missing", "topic_id": uuid.UUID(int=0)}],
                            "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": True})
    assert answer["error_code"] == 0
    assert [t["error_code"] for t in sorted(answer["topics"], key=lambda t: t["name"])] == [0, 3]
    # the operations allowed are reported for names Kafka could not answer too,
    # not for ids
    assert all(t["topic_authorized_operations"] == 3576 for t in answer["topics"])
    _learn_ids(d, topic)
    # once one topic is named by id, names are ignored (not even auto-created), and
    # an id is what names its topic
    answer = d.same(3, 13, lambda side: {
        "topics": [{"name": "not-this-name", "topic_id": side.topic_ids[topic]},
                   {"name": None, "topic_id": UNKNOWN_ID}, {"name": "bad name!"},
                   {"name": "md13-auto"}, {"name": None, "topic_id": side.topic_ids[topic]}],
        "allow_auto_topic_creation": True, "include_topic_authorized_operations": True})
    assert sorted((t["error_code"], t["topic_authorized_operations"]) for t in answer["topics"]) \
        == [(0, 3576), (100, -2147483648)]
    answer = d.same(3, 13, {"topics": [{"name": "md13-auto"}, {"name": "bad name!"}],
                            "allow_auto_topic_creation": True,
                            "include_topic_authorized_operations": True})
    assert sorted((t["error_code"], t["topic_authorized_operations"]) for t in answer["topics"]) \
        == [(3, 3576), (17, 3576)]
    for side in (d.kcoord, d.kafka):  # every topic: the same shape, error code 0
        with WireClient.to(side.bootstrap) as client:
            everything = client.call(3, 13, {"topics": None, "allow_auto_topic_creation": False})
        assert everything["error_code"] == 0
        assert topic in {t["name"] for t in everything["topics"]}


def test_list_config_resources_as_kafka_4_4(d):
    """Every topic, this node as broker and broker logger; the types asked only; a
    type Kafka does not list refuses the request; v0 lists client metrics (none)."""
    topic = _topic(d)

    def listing(version, types):
        ours, theirs = d.ask(74, version, {"resource_types": types})
        assert ours["error_code"] == theirs["error_code"], types
        # Kafka lists topics in hash order; the types come in the same order
        mine = [(r["resource_type"], r["resource_name"]) for r in ours["config_resources"]]
        kafkas = [(r["resource_type"], r["resource_name"]) for r in theirs["config_resources"]]
        assert [t for t, _ in itertools.groupby(t for t, _ in mine)] == \
            [t for t, _ in itertools.groupby(t for t, _ in kafkas)], types
        # each broker lists the topics it has: the shared ones and this test's
        shared = {n for t, n in kafkas if t != 2} | {topic, "__consumer_offsets"}
        assert {(t, n) for t, n in mine if n in shared} == \
            {(t, n) for t, n in kafkas if n in shared}, types
        return ours

    assert listing(0, [])["config_resources"] == []
    everything = listing(1, [])
    assert (2, topic) in {(r["resource_type"], r["resource_name"])
                          for r in everything["config_resources"]}
    for types in ([2], [4], [8], [16], [32], [4, 8], [2, 2]):
        listing(1, types)
    for types in ([3], [0], [1], [-1], [2, 64]):
        assert listing(1, types)["error_code"] == 35  # UNSUPPORTED_VERSION
