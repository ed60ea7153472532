"""Fetch v13+ names topics by id: full fetches and KIP-227 sessions keyed by topic id,
forgotten topics by id, unknown ids, and a topic deleted and recreated under a new id
(the same cases as tests/reference/test_differential_data.py, without Kafka)."""

from __future__ import annotations

import uuid

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import Record, build_batch, decode_record_set
from tests.broker.wire_ops import create_topic

E = ErrorCode
ZERO = uuid.UUID(int=0)


def _create(wire, name, partitions=1):
    create_topic(wire, name, partitions)
    return _topic_id(wire, name)


def _topic_id(wire, name) -> uuid.UUID:
    (topic,) = wire.call(3, 12, {"topics": [{"name": name, "topic_id": ZERO}],
                                 "allow_auto_topic_creation": False})["topics"]
    assert topic["error_code"] == 0 and topic["topic_id"] != ZERO
    return topic["topic_id"]


def _produce(wire, topic, *values, partition=0):
    batch = build_batch([Record(None, 1_700_000_000_000, None, v) for v in values])
    answer = wire.call(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                              "topic_data": [{"name": topic, "partition_data": [
                                  {"index": partition, "records": batch}]}]})
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0


def _fetch(wire, topics=(), *, version=13, session_id=0, epoch=-1, forgotten=()):
    """``topics``: (topic id, [(partition, fetch offset)]); ``forgotten``: (topic id,
    [partition])."""
    return wire.call(1, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic_id": tid, "partitions": [
            {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20,
             "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}
            for p, o in parts]} for tid, parts in topics],
        "forgotten_topics_data": [{"topic_id": tid, "partitions": list(ps)}
                                  for tid, ps in forgotten]})


def _parts(answer) -> list[tuple]:
    """(topic id, partition, error, values) of every partition answered, in order."""
    return [(t["topic_id"], p["partition_index"], p["error_code"],
             [r.value for b in decode_record_set(p["records"]) for r in b.records])
            for t in answer["responses"] for p in t["partitions"]]


@pytest.mark.parametrize("version", [13, 17])
def test_full_fetch_by_topic_id(wire, version):
    name = f"ti-full-{version}"
    tid = _create(wire, name, partitions=2)
    _produce(wire, name, b"a", b"b")
    answer = _fetch(wire, [(tid, [(0, 0), (1, 0)])], version=version)
    assert answer["error_code"] == 0 and answer["session_id"] == 0
    assert [t["topic"] for t in answer["responses"]] == [""]  # named by id only
    assert _parts(answer) == [(tid, 0, 0, [b"a", b"b"]), (tid, 1, 0, [])]


def test_partitions_refused_before_reading_come_last(wire):
    """Kafka answers the partitions it read first, then unknown topic ids, then
    unknown partitions, each in request order."""
    tid = _create(wire, "ti-order")
    _produce(wire, "ti-order", b"a")
    unknown = uuid.UUID(int=0x5EED)
    answer = _fetch(wire, [(unknown, [(0, 0)]), (tid, [(9, 0), (0, 0)])], version=17)
    assert _parts(answer) == [(tid, 0, 0, [b"a"]), (unknown, 0, E.UNKNOWN_TOPIC_ID, []),
                              (tid, 9, E.UNKNOWN_TOPIC_OR_PARTITION, [])]
    # The same order on the v12 path, where topics are named.
    named = wire.call(1, 12, {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
        {"topic": t, "partitions": [{"partition": p, "fetch_offset": 0,
                                     "partition_max_bytes": 1 << 20}]}
        for t, p in (("ti-missing", 0), ("ti-order", 0))]})
    assert [(t["topic"], t["partitions"][0]["error_code"]) for t in named["responses"]] == \
        [("ti-order", 0), ("ti-missing", E.UNKNOWN_TOPIC_OR_PARTITION)]


def test_incremental_session_by_topic_id(wire):
    tid = _create(wire, "ti-session", partitions=2)
    other = _create(wire, "ti-session-b")
    _produce(wire, "ti-session", b"a")
    opened = _fetch(wire, [(tid, [(0, 0), (1, 0)])], epoch=0)
    session = opened["session_id"]
    assert session != 0 and len(_parts(opened)) == 2

    def incremental(epoch, topics=(), forgotten=(), version=13):
        return _fetch(wire, topics, version=version, session_id=session, epoch=epoch,
                      forgotten=forgotten)

    # Partition 0 keeps its records until the client moves its offset.
    assert _parts(incremental(1)) == [(tid, 0, 0, [b"a"])]
    assert incremental(2, [(tid, [(0, 1)])])["responses"] == []
    # A topic added to the session by its id, with news of its own.
    _produce(wire, "ti-session-b", b"o")
    assert _parts(incremental(3, [(other, [(0, 0)])])) == [(other, 0, 0, [b"o"])]
    assert incremental(4, [(other, [(0, 1)])])["responses"] == []
    # Forgotten by id: news on that partition is no longer answered.
    _produce(wire, "ti-session", b"c", partition=1)
    assert incremental(5, forgotten=[(tid, [1])])["responses"] == []
    _produce(wire, "ti-session", b"d", partition=0)
    assert _parts(incremental(6)) == [(tid, 0, 0, [b"d"])]
    # A session of ids cannot go on with names, nor a wrong epoch.
    assert incremental(7, version=12)["error_code"] == E.FETCH_SESSION_TOPIC_ID_ERROR
    assert incremental(99)["error_code"] == E.INVALID_FETCH_SESSION_EPOCH
    # Forgetting every partition ends the session.
    closing = incremental(7, forgotten=[(tid, [0]), (other, [0])])
    assert closing["session_id"] == 0 and closing["responses"] == []
    assert incremental(8)["error_code"] == E.FETCH_SESSION_ID_NOT_FOUND


def test_a_session_by_names_cannot_go_on_with_ids(wire):
    _create(wire, "ti-names")
    opened = wire.call(1, 12, {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                               "session_id": 0, "session_epoch": 0, "topics": [
                                   {"topic": "ti-names", "partitions": [
                                       {"partition": 0, "fetch_offset": 0,
                                        "partition_max_bytes": 1 << 20}]}]})
    assert opened["session_id"] != 0
    answer = _fetch(wire, session_id=opened["session_id"], epoch=1)
    assert (answer["error_code"], answer["session_id"]) == (E.FETCH_SESSION_TOPIC_ID_ERROR, 0)


def test_a_deleted_and_recreated_topic_is_not_read_by_its_old_id(wire):
    old = _create(wire, "ti-recreated")
    _produce(wire, "ti-recreated", b"old")
    opened = _fetch(wire, [(old, [(0, 1)])], epoch=0)
    session = opened["session_id"]
    deleted = wire.call(20, 6, {"topics": [{"name": "ti-recreated", "topic_id": ZERO}],
                                "timeout_ms": 5000})
    assert deleted["responses"][0]["error_code"] == 0
    # The session remembers the topic by name: it is now an unknown topic.
    gone = _fetch(wire, session_id=session, epoch=1)
    assert _parts(gone) == [(old, 0, E.UNKNOWN_TOPIC_OR_PARTITION, [])]
    new = _create(wire, "ti-recreated")
    assert new != old
    _produce(wire, "ti-recreated", b"new")
    # Same name, another id: the session's partition is inconsistent, never read.
    assert _parts(_fetch(wire, session_id=session, epoch=2)) == \
        [(old, 0, E.INCONSISTENT_TOPIC_ID, [])]
    # A new fetch by the old id: unknown; by the new id: the new topic's records.
    assert _parts(_fetch(wire, [(old, [(0, 0)])])) == [(old, 0, E.UNKNOWN_TOPIC_ID, [])]
    assert _parts(_fetch(wire, [(new, [(0, 0)])], version=17)) == [(new, 0, 0, [b"new"])]
