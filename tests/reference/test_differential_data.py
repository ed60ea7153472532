"""Produce, Fetch, ListOffsets, InitProducerId and OffsetForLeaderEpoch: kcoord and
Apache Kafka 3.9 get the same requests (the same batch bytes included) and must
answer the same, stored batches byte for byte, error cases included."""

from __future__ import annotations

import itertools
import uuid
import struct
import time
import re

import pytest

from kcoord.protocol import compression
from kcoord.protocol.records import Record, build_batch, build_legacy, crc32c, decode_record_set
from kcoord.protocol.client import WireClient
from tests.reference.differential import Differential, differences

_names = itertools.count()
TS = 1_700_000_000_000


@pytest.fixture
def diff(reference_pair):
    kcoord, ref = reference_pair("legacy")
    return Differential(kcoord.bootstrap, ref.bootstrap, f"Kafka {ref.version}")


def _topic(d: Differential, partitions=1) -> str:
    name = f"dd-{next(_names)}"
    d.create_topics(name, partitions=partitions)
    _wait_until_fetchable(d, name, partitions)
    return name


def _wait_until_fetchable(d: Differential, name: str, partitions: int) -> None:
    """Kafka lists a new partition's leader a little before that leader serves it
    (NOT_LEADER_OR_FOLLOWER meanwhile): wait until every partition answers."""
    for side in (d.kcoord, d.kafka):
        deadline = time.monotonic() + 30
        with WireClient.to(side.bootstrap) as client:
            while True:
                answer = client.call(1, 12, {
                    "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1024, "topics": [
                        {"topic": name, "partitions": [
                            {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1024}
                            for p in range(partitions)]}]})
                codes = [p["error_code"] for t in answer["responses"] for p in t["partitions"]]
                if codes == [0] * partitions:
                    break
                assert time.monotonic() < deadline, (side.name, codes)
                time.sleep(0.05)


def _batch(*values, **kw):
    return build_batch([Record(None, TS + i, b"k%d" % i, v) for i, v in enumerate(values)], **kw)


def _produce_body(topic, records, acks=-1, partition=0):
    return {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": records}]}]}


def _fetch_body(topic, offset, partition=0, **extra):
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": extra.pop("isolation_level", 0),
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": extra.pop("current_leader_epoch", -1)}]}]}
    body.update(extra)
    return body


@pytest.mark.parametrize("version", [3, 7, 8, 9, 11])
def test_produce_and_fetch_the_same_bytes(diff, version):
    topic = _topic(diff)
    for codec in (compression.NONE, compression.GZIP, compression.LZ4):
        diff.same(0, version, _produce_body(topic, _batch(b"a", b"bb", compression_type=codec)))
    for fetch_version in (4, 5, 6, 7, 8, 9, 10, 11, 12):
        for offset in (0, 3, 6):
            diff.same(1, fetch_version, _fetch_body(topic, offset))
    diff.same(1, 12, _fetch_body(topic, 0, isolation_level=1))


def _lying_count(batch: bytes, count: int) -> bytes:
    """The batch with another record count, CRC recomputed (so only the count lies)."""
    buf = bytearray(batch)
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


@pytest.mark.parametrize("version", [3, 9])
def test_produce_refusals(diff, version):
    topic = _topic(diff)
    corrupt = bytearray(_batch(b"x"))
    corrupt[-1] ^= 0xFF
    for records in (bytes(corrupt), _batch(b"x") + _batch(b"y"), _batch(b"x", b"y")[:-3],
                    _lying_count(_batch(b"x", b"y"), 3), _lying_count(_batch(b"x"), 0),
                    _batch(b"x", base_offset=5), _batch(b"x", b"y", last_offset_delta=5),
                    _batch(b"x") + b"\x00" * 5, b"\x00" * 20, _batch(b"x")[:16] + b"\x05" +
                    _batch(b"x")[17:],
                    _batch(b"x")[:8] + struct.pack(">i", 10) + _batch(b"x")[12:]):
        ours, theirs = diff.ask(0, version, _produce_body(topic, records))
        assert not differences(ours, theirs), (records[:70].hex(), differences(ours, theirs))
    diff.same(0, version, _produce_body("dd-missing", _batch(b"x")))
    diff.same(0, version, _produce_body(topic, _batch(b"x"), partition=5))
    diff.same(0, version, _produce_body(topic, _batch(b"x"), acks=2))
    diff.same(0, version, _produce_body("__consumer_offsets", _batch(b"x")))
    diff.same(0, 6, _produce_body(topic, _batch(b"z", compression_type=compression.ZSTD)))
    # An empty record set: INVALID_RECORD from v3, an empty success below.
    # (A null one gets no answer at all from Kafka: test_produce_with_null_records_is_answered.)
    diff.same(0, version, _produce_body(topic, b""))
    diff.same(0, 2, _produce_body(topic, b""))
    # Nothing of it was appended.
    diff.same(1, 11, _fetch_body(topic, 0))


def _undecompressable() -> list[tuple[str, bytes]]:
    """Batches whose CRC is right but whose codec cannot read their records:
    Kafka answers UNKNOWN_SERVER_ERROR (its codec's KafkaException) and the
    connection goes on; and a legacy wrapper of the same kind."""
    import gzip

    import cramjam

    from kcoord.protocol.records.build import assemble_batch, encode_records
    from kcoord.protocol.records.legacy import _legacy_entry

    plain = encode_records([Record(None, TS, b"k", b"v" * 100)], 0, TS)
    linked = cramjam.lz4.Compressor(level=9, content_checksum=False, block_linked=True)
    linked.compress(plain)
    payloads = [
        ("gzip cut short", compression.GZIP, gzip.compress(plain)[:-10]),
        ("not gzip", compression.GZIP, b"not gzip at all" * 4),
        ("snappy garbage", compression.SNAPPY, b"\xff" * 40),
        ("lz4 garbage", compression.LZ4, b"\x04\x22\x4d\x18" + b"\xff" * 30),
        # readable by lz4 itself, not by Kafka's KafkaLZ4BlockInputStream
        ("lz4 dependent blocks", compression.LZ4, bytes(linked.finish())),
        ("lz4 header checksum", compression.LZ4,
         compression.lz4_compress_broken_checksum(plain)),
        ("zstd garbage", compression.ZSTD, b"\x28\xb5\x2f\xfd" + b"\xff" * 30),
        ("zstd cut short", compression.ZSTD, compression.zstd_compress(plain)[:-5]),
    ]
    cases = [(name, assemble_batch(payload, attributes=codec, records_count=1,
                                   base_timestamp=TS, max_timestamp=TS))
             for name, codec, payload in payloads]
    cases.append(("magic 1 gzip wrapper of garbage",
                  _legacy_entry(0, 1, compression.GZIP, TS, None, b"not gzip at all" * 4)))
    return cases


def test_produce_of_records_a_codec_cannot_decompress(diff):
    topic = _topic(diff)
    for name, records in _undecompressable():
        # legacy message sets: Produce v0-2 only
        version = 2 if name.startswith("magic 1") else 7
        ours, theirs = diff.ask(0, version, _produce_body(topic, records))
        assert not differences(ours, theirs), (name, differences(ours, theirs))
        assert ours["responses"][0]["partition_responses"][0]["error_code"] == -1, name
    # The connection goes on, and nothing of them was appended.
    diff.same(0, 7, _produce_body(topic, _batch(b"after")))
    diff.same(1, 11, _fetch_body(topic, 0))


def test_fetch_errors(diff):
    topic = _topic(diff)
    diff.same(0, 9, _produce_body(topic, _batch(b"a")))
    for offset in (-1, 1, 2):
        diff.same(1, 12, _fetch_body(topic, offset))
    for epoch in (0, 1, -2):
        diff.same(1, 12, _fetch_body(topic, 0, current_leader_epoch=epoch))
    diff.same(1, 12, _fetch_body("dd-missing", 0))


def test_list_offsets(diff):
    topic = _topic(diff)
    for ts in (1000, 3000, 2000):
        diff.same(0, 9, _produce_body(topic, build_batch([Record(None, ts, b"k", b"v")])))
    for version in (1, 2, 4, 7, 8, 9):
        # -3, -4 and -5 are also asked of the versions before theirs.
        for timestamp in (-1, -2, -3, -4, -5, -6, 0, 1500, 2500, 3001):
            diff.same(2, version, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp,
                                                "current_leader_epoch": -1}]}]})
    for epoch in (-2, 0, 1):
        diff.same(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1,
                                            "current_leader_epoch": epoch}]}]})


def test_offset_for_leader_epoch(diff):
    topic = _topic(diff)
    diff.same(0, 9, _produce_body(topic, _batch(b"a", b"b")))
    for version in (0, 1, 2, 3, 4):
        for epoch, current in ((0, -1), (1, -1), (-3, -1), (0, 0), (0, 3)):
            diff.same(23, version, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]})


def test_init_producer_id_refusals(diff):
    diff.same(22, 4, {"transactional_id": None, "transaction_timeout_ms": 1000,
                      "producer_id": 5, "producer_epoch": -1})
    diff.same(22, 4, {"transactional_id": "", "transaction_timeout_ms": 1000})


def _session_fetch(diff, sessions, version, body, new_session):
    """The same Fetch in a session (``body(side)``) to both brokers, answers compared;
    session ids are random on both sides: compared as present or not, and kept in
    ``sessions`` by broker when a session is opened."""
    answers = {}
    for side in (diff.kcoord, diff.kafka):
        answer = diff._ask(side, 1, version, body(side))
        if new_session:
            sessions[side.name] = answer["session_id"]
        answer["session_id"] = "open" if answer["session_id"] else 0
        answers[side.name] = answer
    ours, theirs = answers[diff.kcoord.name], answers[diff.kafka.name]
    assert not differences(ours, theirs), differences(ours, theirs)
    return ours


def test_fetch_sessions(diff):
    """A KIP-227 session through its life: created by a full fetch, incremental
    fetches answered with only what changed, wrong epochs, forgotten partitions,
    closing. Session ids are random on both sides: compared as present or not."""
    topic = _topic(diff, partitions=2)
    diff.same(0, 9, _produce_body(topic, _batch(b"a", b"b")))
    sessions = {}

    def fetch(epoch, partitions=(), forgotten=(), version=12, new_session=False,
              max_bytes=1 << 20):
        def body(side):
            session_id = 0 if new_session else sessions[side.name]
            return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
                    "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20,
                         "current_leader_epoch": -1} for p, o in partitions]}]
                    if partitions else [],
                    "forgotten_topics_data": [{"topic": topic, "partitions": list(forgotten)}]
                    if forgotten else []}
        return _session_fetch(diff, sessions, version, body, new_session)

    opened = fetch(0, [(0, 0), (1, 0)], new_session=True)
    assert opened["session_id"] == "open"
    # Partition 0 keeps answering its records until the client says it moved on.
    assert len(fetch(1)["responses"]) == 1
    assert fetch(2, [(0, 2)])["responses"] == []  # nothing new
    diff.same(0, 9, _produce_body(topic, _batch(b"c"), partition=1))
    changed = fetch(3)
    assert [p["partition_index"] for t in changed["responses"] for p in t["partitions"]] == [1]
    assert fetch(4, [(1, 1)])["responses"] == []
    assert fetch(9)["error_code"] == 71  # INVALID_FETCH_SESSION_EPOCH
    diff.same(0, 9, _produce_body(topic, _batch(b"d"), partition=0))
    assert fetch(5, forgotten=[0])["responses"] == []  # news, but not in the session any more
    fetch(6, [(0, 2)])  # back in the session, with its news
    assert fetch(-1, [(1, 1)])["session_id"] == 0  # closed: a full fetch without a session
    assert fetch(7)["error_code"] == 70  # FETCH_SESSION_ID_NOT_FOUND
    # Partitions that returned records go to the back of the session: with room
    # for one batch, the partitions take turns.
    big = [_batch(b"z" * 600) for _ in range(2)]
    for p in (0, 1):
        for batch in big:
            diff.same(0, 9, _produce_body(topic, batch, partition=p))

    def small(epoch, partitions=(), new_session=False):
        answer = fetch(epoch, partitions, new_session=new_session, max_bytes=700)
        return [(p["partition_index"], len(p["records"]))
                for t in answer["responses"] for p in t["partitions"]]

    assert small(0, [(0, 4), (1, 2)], new_session=True) == [(0, 672), (1, 0)]
    # An incremental fetch that returns records moves those partitions to the back
    # of the session (a full fetch does not): partition 0 answers its batch again,
    # then partition 1 gets its turn.
    assert small(1) == [(0, 672)]
    assert small(2) == [(1, 672)]
    # A session made with topic names cannot go on with topic ids.
    fetch(0, [(0, 0)], new_session=True)
    assert fetch(1, version=13)["error_code"] == 106  # FETCH_SESSION_TOPIC_ID_ERROR


@pytest.mark.parametrize("magic,codec", [(0, compression.NONE), (1, compression.NONE),
                                         (1, compression.GZIP), (0, compression.SNAPPY)])
def test_legacy_produce_and_fetch(diff, magic, codec):
    """Produce v0-2 with magic 0/1 message sets and Fetch v0-3 reading them back
    in the old formats, as Kafka 3.9 converts both ways."""
    topic = _topic(diff)
    legacy = build_legacy([Record(None, TS + i, b"k%d" % i, b"v%d" % i) for i in range(3)],
                          magic=magic, compression_type=codec)
    for version in (0, 2):
        diff.same(0, version, _produce_body(topic, legacy))
    diff.same(0, 3, _produce_body(topic, _batch(b"new", b"er")))
    for version in (0, 1, 2, 3, 4):
        body = _fetch_body(topic, 0)
        ours, theirs = diff.ask(1, version, body)
        if codec == compression.SNAPPY:
            # Snappy compressors differ in their output (Java's is the C++
            # library, kcoord's cramjam): the messages must be the same.
            for answer in (ours, theirs):
                part = answer["responses"][0]["partitions"][0]
                part["records"] = _messages(part["records"])
        assert not differences(ours, theirs), differences(ours, theirs)


def _messages(records: bytes) -> list:
    return [(b.magic, b.compression, r.offset, r.timestamp, r.key, r.value)
            for b in decode_record_set(records, partial_ok=True) for r in b.records]


@pytest.mark.parametrize("configs", [
    (("compression.type", "gzip"),),
    (("message.timestamp.type", "LogAppendTime"),),
    (("max.message.bytes", "200"),),
    (("cleanup.policy", "compact"),),
    (("message.timestamp.before.max.ms", "3600000"),),
], ids=lambda c: c[0][0])
def test_topic_configs_applied_to_produce(diff, configs):
    name = f"dd-{next(_names)}"
    diff.same(19, 4, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                   "assignments": [],
                                   "configs": [{"name": k, "value": v} for k, v in configs]}],
                      "timeout_ms": 10000, "validate_only": False})
    for side in (diff.kcoord, diff.kafka):
        diff.wait_for_topics(side, [name])
    _wait_until_fetchable(diff, name, 1)
    keyless = build_batch([Record(None, TS, None, b"x" * 150)])
    keyed = _batch(b"a", b"b" * 150)
    for records in (keyed, keyless):
        ours, theirs = diff.ask(0, 9, _produce_body(name, records))
        for answer in (ours, theirs):
            part = answer["responses"][0]["partition_responses"][0]
            # The broker's clock: both set it, to their own now.
            part["log_append_time_ms"] = "now" if part["log_append_time_ms"] > 0 else \
                part["log_append_time_ms"]
            for error in part["record_errors"]:
                # Each broker states its bounds from its own clock.
                error["batch_index_error_message"] = re.sub(
                    r"within \[-?\d+, -?\d+\]", "within [<now - before>, <now + after>]",
                    error["batch_index_error_message"] or "")
            part["error_message"] = re.sub(r"within \[-?\d+, -?\d+\]", "within [...]",
                                           part["error_message"] or "")
        assert not differences(ours, theirs), differences(ours, theirs)
    ours, theirs = diff.ask(1, 12, _fetch_body(name, 0))
    for answer in (ours, theirs):
        part = answer["responses"][0]["partitions"][0]
        batches = decode_record_set(part["records"])
        # LogAppendTime batches carry each broker's own clock; the rest is compared
        # byte for byte (recompressed gzip included).
        part["raw"] = None if any(b.timestamp_type for b in batches) else part["records"]
        part["records"] = [(b.compression, b.timestamp_type, b.base_offset,
                            [(r.offset, r.key, r.value) for r in b.records]) for b in batches]
    assert not differences(ours, theirs), differences(ours, theirs)


# -- Fetch by topic id (v13+) ------------------------------------------------------------


def _learn_ids(d: Differential, *names: str) -> None:
    """Metadata v12 on both sides, which records each side's topic ids (``Side.topic_ids``)."""
    d.same(3, 12, {"topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names],
                   "allow_auto_topic_creation": False})


def _id_fetch_body(topic_ids, partitions=(0,), offset=0, session_id=0, epoch=-1,
                   forgotten=(), max_bytes=1 << 20):
    """A v13+ fetch naming topics by id: ``topic_ids`` and ``forgotten`` are lists of
    (topic id, partitions)."""
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic_id": tid, "partitions": [
                {"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}
                for p in parts]} for tid, parts in topic_ids],
            "forgotten_topics_data": [{"topic_id": tid, "partitions": list(parts)}
                                      for tid, parts in forgotten]}


def _delete_topic(d: Differential, name: str, timeout: float = 30) -> None:
    """DeleteTopics on both sides, then wait until neither lists the topic."""
    assert d.same(20, 6, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                          "timeout_ms": 10000})["responses"][0]["error_code"] == 0
    for side in (d.kcoord, d.kafka):
        deadline = time.monotonic() + timeout
        with WireClient.to(side.bootstrap) as client:
            while client.call(3, 4, {"topics": [{"name": name}], "allow_auto_topic_creation":
                                     False})["topics"][0]["error_code"] != 3:
                assert time.monotonic() < deadline, f"{side.name}: {name} not deleted"
                time.sleep(0.05)


def _recreate_topic(d: Differential, name: str, timeout: float = 30) -> None:
    """Kafka may still be removing the old topic's log: retry TOPIC_ALREADY_EXISTS (36)."""
    body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": 10000, "validate_only": False}
    for side in (d.kcoord, d.kafka):
        deadline = time.monotonic() + timeout
        while (code := d._ask(side, 19, 4, body)["topics"][0]["error_code"]) == 36:
            assert time.monotonic() < deadline, f"{side.name}: {name} not recreated"
            time.sleep(0.05)
        assert code == 0, (side.name, code)
        d.wait_for_topics(side, [name], timeout)
    _wait_until_fetchable(d, name, 1)


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17])
def test_fetch_by_topic_id(diff, version):
    """Full fetches naming topics by id: records, the topic id echoed, an unknown id
    answered UNKNOWN_TOPIC_ID next to a known one, and errors of a known topic."""
    topic = _topic(diff, partitions=2)
    diff.same(0, 9, _produce_body(topic, _batch(b"a", b"bb", compression_type=compression.GZIP)))
    diff.same(0, 9, _produce_body(topic, _batch(b"c"), partition=1))
    _learn_ids(diff, topic)
    unknown = uuid.UUID(int=0x5EED)
    for offset in (0, 2, 3):
        answer = diff.same(1, version, lambda side: _id_fetch_body(
            [(side.topic_ids[topic], (0, 1))], offset=offset))
        assert answer["responses"][0]["topic_id"] == "<topic-id-0>"
    answer = diff.same(1, version, lambda side: _id_fetch_body(
        [(unknown, (0,)), (side.topic_ids[topic], (0, 7))]))
    codes = [(p["partition_index"], p["error_code"])
             for t in answer["responses"] for p in t["partitions"]]
    assert (0, 100) in codes and (7, 3) in codes  # UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION
    diff.same(1, version, _id_fetch_body([(unknown, (0,))]))


@pytest.mark.parametrize("version", [13, 17])
def test_fetch_sessions_by_topic_id(diff, version):
    """A session keyed by topic ids: full, incremental, forgotten by id, a session
    of ids asked by names, and a topic deleted and recreated fetched by its old id."""
    topic = _topic(diff, partitions=2)
    other = _topic(diff)
    diff.same(0, 9, _produce_body(topic, _batch(b"a", b"b")))
    _learn_ids(diff, topic, other)
    sessions = {}

    def fetch(epoch, topics=(), forgotten=(), new_session=False, v=version, offset=None):
        def body(side):
            ids = side.topic_ids
            return _id_fetch_body([(ids.get(n, n), ps) for n, ps in topics],
                                  session_id=0 if new_session else sessions[side.name],
                                  epoch=epoch, offset=offset or 0,
                                  forgotten=[(ids.get(n, n), ps) for n, ps in forgotten])
        return _session_fetch(diff, sessions, v, body, new_session)

    def parts(answer):
        return [(t["topic_id"], p["partition_index"], p["error_code"], len(p["records"]))
                for t in answer["responses"] for p in t["partitions"]]

    opened = fetch(0, [(topic, (0, 1)), (other, (0,))], new_session=True)
    assert opened["session_id"] == "open" and len(parts(opened)) == 3
    assert [p[:2] for p in parts(fetch(1))] == [("<topic-id-0>", 0)]  # only what has records
    assert fetch(2, [(topic, (0,))], offset=2)["responses"] == []
    diff.same(0, 9, _produce_body(other, _batch(b"o")))
    assert [p[:2] for p in parts(fetch(3))] == [("<topic-id-1>", 0)]
    diff.same(0, 9, _produce_body(topic, _batch(b"c"), partition=1))
    # News on partition 1, but it is forgotten (by id) as the client moves on in `other`.
    assert fetch(4, [(other, (0,))], offset=1, forgotten=[(topic, (1,))])["responses"] == []
    # A session by ids asked with names (v12): FETCH_SESSION_TOPIC_ID_ERROR.
    assert fetch(5, v=12)["error_code"] == 106
    # The topic goes away: the session's partition keeps the topic's name, so it
    # answers UNKNOWN_TOPIC_OR_PARTITION.
    _delete_topic(diff, other)
    gone = fetch(5)
    assert ("<topic-id-1>", 0, 3, 0) in parts(gone), parts(gone)
    # It comes back under a new id. The session still names the old id under the
    # same name: INCONSISTENT_TOPIC_ID. A new full fetch by the old id gets
    # UNKNOWN_TOPIC_ID; the new id reads the new topic.
    _recreate_topic(diff, other)
    _learn_ids(diff, other)
    assert all(side.label(side.topic_ids[other]) == "<topic-id-2>"
               for side in (diff.kcoord, diff.kafka))
    diff.same(0, 9, _produce_body(other, _batch(b"new")))
    assert parts(fetch(6)) == [("<topic-id-1>", 0, 103, 0)]

    def old_id(side):
        return next(i for i, label in side._labels.items() if label == "<topic-id-1>")

    by_old_id = diff.same(1, version, lambda side: _id_fetch_body([(old_id(side), (0,))]))
    assert [p["error_code"] for p in by_old_id["responses"][0]["partitions"]] == [100]
    by_new_id = diff.same(1, version, lambda side: _id_fetch_body(
        [(side.topic_ids[other], (0,))]))
    assert by_new_id["responses"][0]["topic_id"] == "<topic-id-2>"
    assert by_new_id["responses"][0]["partitions"][0]["high_watermark"] == 1
    assert fetch(-1, [(topic, (0,))])["session_id"] == 0  # closed
    assert fetch(7)["error_code"] == 70  # FETCH_SESSION_ID_NOT_FOUND


# -- InitProducerId, OffsetForLeaderEpoch v0-1, ListOffsets -4/-5 and v0 -----------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_init_producer_id_allocates(diff, version):
    """The idempotent producer's id: each broker allocates its own ids (normalized to
    whether one was given); error, epoch and throttle time must be Kafka's."""
    body = {"transactional_id": None, "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1}
    ours = diff._ask(diff.kcoord, 22, version, body)
    deadline = time.monotonic() + 30
    # Kafka answers COORDINATOR_LOAD_IN_PROGRESS (14, retriable) until its controller
    # has given it a block of producer ids; clients retry.
    while (theirs := diff._ask(diff.kafka, 22, version, body))["error_code"] == 14:
        assert time.monotonic() < deadline, theirs
        time.sleep(0.05)
    for answer in (ours, theirs):
        assert answer["producer_id"] >= 0, answer
        answer["producer_id"] = "<allocated>"
    assert not differences(ours, theirs), differences(ours, theirs)
    assert ours["producer_epoch"] == 0 and ours["error_code"] == 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_list_offsets_v0_lists_segment_offsets(diff):
    """ListOffsets v0 (Kafka 3.9 only) answers the offsets where segments start, newest
    first, up to ``max_num_offsets``: the log end offset and the segments for -1, the
    log start for -2, and for a time T the segments last written at or before T
    (UnifiedLog.legacyFetchOffsetsBefore)."""
    name = f"dd-{next(_names)}"
    # (tiny segments: segment.bytes on Kafka 3.9, internal.segment.bytes on kcoord,
    # which refuses segment.bytes below 1 MiB as Kafka 4.x does)
    diff.same(19, 4, lambda side: {"topics": [{
        "name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
        "configs": [{"name": "internal.segment.bytes" if side is diff.kcoord
                     else "segment.bytes", "value": "200"}]}],
        "timeout_ms": 10000, "validate_only": False})
    for side in (diff.kcoord, diff.kafka):
        diff.wait_for_topics(side, [name])
    _wait_until_fetchable(diff, name, 1)

    def v0(timestamp, max_num_offsets, replica_id=-1):
        return diff.same(2, 0, {"replica_id": replica_id, "topics": [{"name": name, "partitions": [
            {"partition_index": 0, "timestamp": timestamp,
             "max_num_offsets": max_num_offsets}]}]})["topics"][0]["partitions"][0]

    assert v0(-1, 5)["old_style_offsets"] == [0]  # one empty segment
    assert v0(-2, 5)["old_style_offsets"] == [0]
    for i in range(3):  # about 110 bytes each: two batches per 200-byte segment
        diff.same(0, 9, _produce_body(name, _batch(b"v" * 40, b"w" * 10)))
    between = _now_ms()
    # File times come from the kernel's coarse clock (a tick behind at most):
    # the next writes must carry a file time clearly after `between`.
    time.sleep(0.05)
    for i in range(3):
        diff.same(0, 9, _produce_body(name, _batch(b"v" * 40, b"w" * 10)))
    latest = v0(-1, 10)["old_style_offsets"]
    assert len(latest) > 2 and latest[0] == 12 and latest == sorted(latest, reverse=True)
    for max_num in (0, 1, 2, 100):
        v0(-1, max_num)
        v0(-2, max_num)
        v0(between, max_num)
        v0(0, max_num)  # before every segment: nothing
        v0(_now_ms() + 3_600_000, max_num)
    v0(-1, 3, replica_id=-2)
    for timestamp in (-1, -2, 0, between):
        v0(timestamp, -1)  # a negative count: Kafka fails the partition
    v0(-3, 5)
    # The same partition twice, and a partition that does not exist.
    diff.same(2, 0, {"replica_id": -1, "topics": [{"name": name, "partitions": [
        {"partition_index": p, "timestamp": -1, "max_num_offsets": 2} for p in (0, 0, 3)]}]})


def _backwards(codec) -> bytes:
    """Two records whose offset deltas go backwards (1 then 0), last offset delta 1."""
    return build_batch([Record(1, TS, b"k1", b"one"), Record(0, TS + 1, b"k0", b"zero")],
                       compression_type=codec, last_offset_delta=1)


def _zigzag(n: int) -> bytes:
    raw = (n << 1) ^ (n >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    return bytes(out) + bytes([raw])


def _with_headers(headers: bytes, codec=compression.NONE) -> bytes:
    """One record (key ``k``, value ``v``) whose header section is ``headers``
    exactly as given, its record length counting them, in a batch with a right CRC."""
    from kcoord.protocol.records import assemble_batch
    body = b"\x00" + _zigzag(0) + _zigzag(0) + _zigzag(1) + b"k" + _zigzag(1) + b"v" + headers
    payload = compression.compress(codec, _zigzag(len(body)) + body)
    return assemble_batch(payload, attributes=codec, base_timestamp=TS, max_timestamp=TS,
                          records_count=1)


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP])
def test_produce_of_records_with_malformed_headers(diff, codec):
    """A record's header section is checked as Kafka's DefaultRecord reads it: a
    negative header count, a null header key, fewer headers than counted, bytes
    left after the headers are refused (INVALID_RECORD) with nothing appended; a
    null header value and a header key that is not UTF-8 are records like others."""
    topic = _topic(diff)
    for headers in (_zigzag(-1), _zigzag(1) + _zigzag(-1) + _zigzag(-1),
                    _zigzag(2) + _zigzag(1) + b"h" + _zigzag(-1), _zigzag(0) + b"\x00",
                    _zigzag(1) + _zigzag(1) + b"h" + _zigzag(-1) + b"\x00",
                    _zigzag(1) + _zigzag(1) + b"h" + _zigzag(5) + b"v",
                    _zigzag(1) + _zigzag(1) + b"h" + _zigzag(-1),
                    _zigzag(1) + _zigzag(2) + b"\xff\xfe" + _zigzag(1) + b"v"):
        ours, theirs = diff.ask(0, 9, _produce_body(topic, _with_headers(headers, codec)))
        assert not differences(ours, theirs), (headers.hex(), differences(ours, theirs))
    diff.same(1, 12, _fetch_body(topic, 0))


@pytest.mark.parametrize("version", [3, 9])
def test_produce_offsets_going_backwards(diff, version):
    """Offsets going backwards inside a batch: a negative last offset delta is
    INVALID_RECORD; an uncompressed batch whose record offset deltas go backwards is
    stored as it came (only its base offset is assigned), on both; the log is then
    the same."""
    topic = _topic(diff)
    for records in (_batch(b"x", last_offset_delta=-1), _batch(b"x", b"y", last_offset_delta=-1),
                    _backwards(compression.NONE)):
        ours, theirs = diff.ask(0, version, _produce_body(topic, records))
        assert not differences(ours, theirs), (records[:70].hex(), differences(ours, theirs))
    diff.same(0, version, _produce_body(topic, _batch(b"after")))
    fetched = diff.same(1, 12, _fetch_body(topic, 0))["responses"][0]["partitions"][0]
    assert [[(r.offset, r.value) for r in b.records] for b in decode_record_set(
        fetched["records"])] == [[(1, b"one"), (0, b"zero")], [(2, b"after")]]
    diff.same(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1,
                                        "current_leader_epoch": -1}]}]})


@pytest.mark.parametrize("codec", [compression.GZIP, compression.LZ4])
def test_compressed_batch_with_offsets_out_of_order_is_rebuilt(diff, codec):
    """docs/deviations.md: a compressed batch whose record offset deltas go backwards
    is rebuilt with offsets 0, 1, ... by kcoord (what Kafka's LogValidator sets out
    to do), where Kafka 3.9 and 4.x fail the partition with UNKNOWN_SERVER_ERROR
    (an UnsupportedOperationException in that rebuild) and append nothing."""
    topic = _topic(diff)
    ours, theirs = diff.ask(0, 9, _produce_body(topic, _backwards(codec)))
    ours, theirs = (a["responses"][0]["partition_responses"][0] for a in (ours, theirs))
    assert (theirs["error_code"], theirs["base_offset"]) == (-1, -1)
    assert (ours["error_code"], ours["base_offset"]) == (0, 0)
    diff.ask(0, 9, _produce_body(topic, _batch(b"after")))  # at offset 2 and 0
    ours, theirs = diff.ask(1, 12, _fetch_body(topic, 0))
    (batch, after), = [decode_record_set(ours["responses"][0]["partitions"][0]["records"])]
    assert batch.compression == codec and after.base_offset == 2
    assert [(r.offset, r.value) for r in batch.records] == [(0, b"one"), (1, b"zero")]
    (only,) = decode_record_set(theirs["responses"][0]["partitions"][0]["records"])
    assert [(r.offset, r.value) for r in only.records] == [(0, b"after")]


@pytest.mark.parametrize("version", [0, 3, 9])
def test_produce_with_null_records_is_answered(diff, reference_pair, version):
    """docs/deviations.md: a partition with null records. Kafka 3.9 (and 4.x) fails
    on it with a NullPointerException (again while logging the failure), so the
    request is never answered and its connection answers nothing more; kcoord
    answers INVALID_RECORD and keeps serving the connection. Neither appends."""
    topic = _topic(diff)
    _kcoord, kafka = reference_pair("legacy")

    def failures() -> int:
        return open(kafka.log_path, errors="replace").read().count(
            "PartitionProduceData.records()")

    seen = failures()
    with WireClient.to(diff.kafka.bootstrap) as client:
        client.send(0, version, _produce_body(topic, None))
        deadline = time.monotonic() + 30
        while failures() == seen:
            assert time.monotonic() < deadline, "Kafka did not fail on null records"
            time.sleep(0.05)
        client.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            client.recv_frame()
    with WireClient.to(diff.kcoord.bootstrap) as client:
        answer = client.call(0, version, _produce_body(topic, None))
        part = answer["responses"][0]["partition_responses"][0]
        assert (part["error_code"], part["base_offset"]) == (87, -1)  # INVALID_RECORD
        assert client.call(18, 0, {})["error_code"] == 0  # the connection still serves
    fetched = diff.same(1, 12, _fetch_body(topic, 0))["responses"][0]["partitions"][0]
    assert (fetched["high_watermark"], fetched["records"]) == (0, b"")


@pytest.mark.parametrize("topic_codec", ["producer", "zstd"])
def test_fetch_of_zstd_batches_at_every_version(diff, topic_codec):
    """A zstd batch needs Fetch v10 only where the topic's compression.type is zstd
    (KafkaApis refuses any read of such a topic below v10); on a topic taking the
    producer's codec, v4-9 get zstd batches as they are and v0-3 convert batch by
    batch, a first zstd batch refused (it cannot be down-converted)."""
    name = f"dd-{next(_names)}"
    diff.same(19, 4, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                   "assignments": [], "configs": [
                                       {"name": "compression.type", "value": topic_codec}]}],
                      "timeout_ms": 10000, "validate_only": False})
    for side in (diff.kcoord, diff.kafka):
        diff.wait_for_topics(side, [name])
    _wait_until_fetchable(diff, name, 1)
    for records in (_batch(b"a", b"b"), _batch(b"c", compression_type=compression.ZSTD),
                    _batch(b"d", b"e", compression_type=compression.GZIP)):
        ours, theirs = diff.ask(0, 9, _produce_body(name, records))
        assert ours["responses"][0]["partition_responses"][0]["error_code"] == 0
    for version in (0, 3, 4, 9, 10, 12):
        for offset in (0, 2, 3, 99):
            body = _fetch_body(name, offset)
            ours, theirs = diff.ask(1, version, body)
            if topic_codec == "zstd":
                # The broker recompresses into zstd, each with its own encoder.
                for answer in (ours, theirs):
                    part = answer["responses"][0]["partitions"][0]
                    if part["records"]:
                        part["records"] = [(b.compression, [(r.offset, r.value) for r in b.records])
                                           for b in decode_record_set(part["records"])]
            assert not differences(ours, theirs), (version, offset, differences(ours, theirs))


def test_fetch_v0_3_down_converts_chunk_by_chunk_as_kafka_3_9(diff):
    """Kafka's LazyDownConversionRecords converts the first batch alone, then the
    rest in chunks of up to 128 KiB of v2 data; a chunk holding a zstd batch fails
    as a whole, and an overflow entry fills the answer's size from there: here the
    gzip, lz4 and snappy batches go down with the zstd one after them."""
    topic = _topic(diff)
    for records in (_batch(b"a", b"b"), _batch(b"c", compression_type=compression.GZIP),
                    _batch(b"d", compression_type=compression.LZ4),
                    _batch(b"e", compression_type=compression.SNAPPY),
                    _batch(b"f", compression_type=compression.ZSTD),
                    _batch(b"g")):
        ours, theirs = diff.ask(0, 9, _produce_body(topic, records))
        assert ours["responses"][0]["partition_responses"][0]["error_code"] == 0
    for version in (0, 1, 2, 3):
        for offset in (0, 1, 2, 5, 6):
            ours, theirs = diff.ask(1, version, _fetch_body(topic, offset))
            sizes = []
            for answer in (ours, theirs):
                part = answer["responses"][0]["partitions"][0]
                if part["records"]:
                    # (each broker's compressors write their own bytes)
                    sizes.append(len(part["records"]))
                    part["records"] = _messages(part["records"])
            assert not differences(ours, theirs), (version, offset, differences(ours, theirs))
            assert len(set(sizes)) <= 1, (version, offset, sizes)
