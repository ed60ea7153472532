"""Transactions (transaction.version 1) against kcoord and Apache Kafka 4.4 over the
raw wire, answers compared field by field: coordinator lookups, InitProducerId
(new ids, epoch bumps, KIP-360), AddPartitionsToTxn and EndTxn in each state,
transactional Produce, read_committed Fetch and ListOffsets (last stable offset,
aborted transactions, control batches), TxnOffsetCommit and OffsetFetch
require_stable, and a new producer instance fencing an old one.

Producer ids are each broker's own: each side's steps carry the id and epoch its
own InitProducerId answered, and every producer id in an answer (InitProducerId,
aborted transactions, the batches of a Fetch) is compared as the transactional
id it belongs to. Record sets are compared decoded, batch by batch, without
their timestamps (the brokers append at their own times).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import decode_batch, decode_control_record, iter_entries
from tests.broker import txn_ops as T
from tests.reference.differential import Differential, Normalizer, Side, differences
from tests.reference.test_differential_data import (
    _batch, _produce_body, _wait_until_fetchable)

E = ErrorCode
OFFSETS = "__consumer_offsets"


def _name(prefix: str) -> str:
    return f"dtx-{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class Broker:
    """One side of the comparison: its connection and the producers it gave out."""

    side: Side
    wire: WireClient
    producers: dict[str, tuple[int, int]] = field(default_factory=dict)  # tid -> (pid, epoch)
    labels: dict[int, str] = field(default_factory=dict)  # pid -> "<pid of tid>"

    def pid(self, tid: str) -> int:
        return self.producers[tid][0]

    def epoch(self, tid: str) -> int:
        return self.producers[tid][1]

    def learn(self, tid: str, answer: dict) -> dict:
        """Keep the producer id and epoch an InitProducerId gave for ``tid``."""
        if answer["error_code"] == E.NONE:
            self.producers[tid] = (answer["producer_id"], answer["producer_epoch"])
            self.labels.setdefault(answer["producer_id"], f"<pid of {tid}>")
        return answer


class Pair:
    """Runs one step on both brokers, each with its own producer ids, and compares
    the normalized answers."""

    def __init__(self, d: Differential):
        self.d = d
        self.kcoord = Broker(d.kcoord, WireClient.to(d.kcoord.bootstrap, client_id="dtx"))
        self.kafka = Broker(d.kafka, WireClient.to(d.kafka.bootstrap, client_id="dtx"))

    def close(self) -> None:
        self.kcoord.wire.close()
        self.kafka.wire.close()

    def each(self, step: Callable[[Broker], Any], api_key: int = 0) -> tuple[Any, Any]:
        """Both normalized answers of ``step``, kcoord's first."""
        return tuple(_normalize(b, api_key, step(b)) for b in (self.kcoord, self.kafka))

    def same(self, step: Callable[[Broker], Any], what: str = "", api_key: int = 0) -> Any:
        ours, theirs = self.each(step, api_key)
        found = differences(ours, theirs)
        assert not found, (f"{what}: kcoord and {self.d.kafka.name} differ:\n  "
                           + "\n  ".join(found))
        return ours


def _normalize(b: Broker, api_key: int, answer: Any) -> Any:
    if isinstance(answer, dict):
        answer = Normalizer(b.side)(api_key, answer)
    return _walk(b, answer)


def _walk(b: Broker, value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _walk(b, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_walk(b, v, key) for v in value]
        if key == "results_by_topic_v3_and_below":  # order carries no meaning
            items.sort(key=lambda t: t["name"])
        if key == "results_by_partition":
            items.sort(key=lambda p: p["partition_index"])
        return items if isinstance(value, list) else tuple(items)
    if key == "throttle_time_ms":
        return "<throttle>"
    if key == "session_id":
        return "open" if value else 0
    if key in ("producer_id", "ongoing_txn_producer_id") and value in b.labels:
        return b.labels[value]
    if key == "records" and isinstance(value, (bytes, bytearray)):
        return _batches(b, bytes(value))
    return value


def _batches(b: Broker, data: bytes) -> list[dict]:
    """A record set batch by batch, without timestamps; producer ids as their
    transactional id; control batches with their marker."""
    out = []
    for pos, _size, magic in iter_entries(data, partial_ok=True):
        batch = decode_batch(data, pos)
        entry = {"base_offset": batch.base_offset, "magic": magic,
                 "last_offset_delta": batch.last_offset_delta,
                 "records": len(batch.records), "attributes": batch.attributes,
                 "is_control": batch.is_control, "is_transactional": batch.is_transactional,
                 "producer_id": b.labels.get(batch.producer_id, batch.producer_id),
                 "producer_epoch": batch.producer_epoch, "base_sequence": batch.base_sequence,
                 "partition_leader_epoch": batch.partition_leader_epoch,
                 "offsets": [r.offset for r in batch.records]}
        if batch.is_control:
            entry["markers"] = [decode_control_record(r) for r in batch.records]
        else:
            entry["values"] = [r.value for r in batch.records]
        out.append(entry)
    return out


@pytest.fixture
def pair(reference_pair):
    kcoord, ref = reference_pair("main")
    p = Pair(Differential(kcoord.bootstrap, ref.bootstrap, f"Kafka {ref.version}"))
    yield p
    p.close()


# --- the steps --------------------------------------------------------------------

def _coordinator(b: Broker, tid: str) -> dict:
    first, last = T.find_coordinator(b.wire, tid)
    assert last["error_code"] == E.NONE, (b.side.name, last)
    return last


def _init(b: Broker, tid: str, within_s: float = 30, **kw) -> dict:
    """InitProducerId, asked again (bounded) while the coordinator's partition gets
    its leader (Kafka answers NOT_COORDINATOR for a moment after the lookup)."""
    deadline = time.monotonic() + within_s
    while True:
        answer = T.init_producer(b.wire, tid, **kw)
        if answer["error_code"] != E.NOT_COORDINATOR or time.monotonic() > deadline:
            return b.learn(tid, answer)
        time.sleep(0.05)


def _begin(pair: Pair, tid: str, timeout_ms: int = 60_000) -> dict:
    """A new transactional producer on both brokers: lookup, then InitProducerId."""
    return pair.same(lambda b: (_coordinator(b, tid), _init(b, tid, timeout_ms=timeout_ms))[1],
                     "InitProducerId")


def _topic(pair: Pair, partitions: int = 1) -> str:
    name = _name("t")
    pair.d.create_topics(name, partitions=partitions)
    _wait_until_fetchable(pair.d, name, partitions)
    return name


def _add(b: Broker, tid: str, parts, version: int = 3, pid: int | None = None,
         epoch: int | None = None) -> dict:
    topics: dict[str, list[int]] = {}
    for topic, partition in parts:
        topics.setdefault(topic, []).append(partition)
    return b.wire.call(24, version, {
        "v3_and_below_transactional_id": tid,
        "v3_and_below_producer_id": b.pid(tid) if pid is None else pid,
        "v3_and_below_producer_epoch": b.epoch(tid) if epoch is None else epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})


def _produce(b: Broker, tid: str | None, topic: str, seq: int, values, *, partition: int = 0,
             version: int = 9, transactional: bool = True, epoch: int | None = None,
             producer: str | None = None) -> dict:
    producer = producer or tid
    records = T.txn_batch(b.pid(producer), b.epoch(producer) if epoch is None else epoch, seq,
                          values, transactional=transactional)
    return b.wire.call(0, version, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                                    "topic_data": [{"name": topic, "partition_data": [
                                        {"index": partition, "records": records}]}]})


def _end(b: Broker, tid: str, commit: bool, version: int = 3, pid: int | None = None,
         epoch: int | None = None) -> dict:
    return b.wire.call(26, version, {"transactional_id": tid,
                                     "producer_id": b.pid(tid) if pid is None else pid,
                                     "producer_epoch": b.epoch(tid) if epoch is None else epoch,
                                     "committed": commit})


def _settled(b: Broker, tid: str, commit: bool) -> int:
    return T.end_txn_settled(b.wire, tid, b.pid(tid), b.epoch(tid), commit)


def _code(answer: dict) -> int:
    """The one partition's error code of a Produce or TxnOffsetCommit answer."""
    if "responses" in answer:
        return answer["responses"][0]["partition_responses"][0]["error_code"]
    return answer["topics"][0]["partitions"][0]["error_code"]


def _added(answer: dict) -> dict:
    """AddPartitionsToTxn v0-3: ``{(topic, partition): error}``."""
    return {(t["name"], p["partition_index"]): p["partition_error_code"]
            for t in answer["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}


def _fetch_body(topic: str, *, committed: bool, offset: int = 0, partition: int = 0) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 1 if committed else 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": offset, "current_leader_epoch": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": []}


def _fetch(pair: Pair, topic: str, version: int, **kw) -> dict:
    return pair.same(lambda b: b.wire.call(1, version, _fetch_body(topic, **kw)),
                     f"Fetch v{version} {kw}", api_key=1)


def _list_offsets(topic: str, timestamp: int, committed: bool) -> dict:
    return {"replica_id": -1, "isolation_level": 1 if committed else 0, "timeout_ms": 1000,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}]}]}


# --- 1. FindCoordinator -----------------------------------------------------------

def _has_state_topic(b: Broker) -> bool:
    topics = b.wire.call(3, 9, {"topics": None, "allow_auto_topic_creation": False})["topics"]
    return any(t["name"] == "__transaction_state" for t in topics)


def test_find_coordinator_for_transactional_ids(pair):
    tid = _name("fc")
    fresh = not _has_state_topic(pair.kcoord) and not _has_state_topic(pair.kafka)
    firsts = pair.each(lambda b: T.find_coordinator(b.wire, tid)[0], api_key=10)
    if fresh:  # both make the state topic now: both answer 15 first
        assert not differences(*firsts), differences(*firsts)
    pair.same(lambda b: _coordinator(b, tid), "lookup, once the state topic is made", 10)
    for version in (1, 2, 3):
        pair.d.same(10, version, {"key": tid, "key_type": 1})
        pair.d.same(10, version, {"key": _name("fc-other"), "key_type": 1})
    for version in (4, 5, 6):
        pair.d.same(10, version, {"key_type": 1,
                                  "coordinator_keys": [tid, _name("fc-b"), _name("fc-c")]})


# --- 2. InitProducerId ------------------------------------------------------------

def test_init_producer_id(pair):
    tid = _name("ip")
    first = _begin(pair, tid)
    assert (first["error_code"], first["producer_epoch"]) == (E.NONE, 0)
    # a new instance of the same producer: the next epoch
    again = pair.same(lambda b: _init(b, tid), "re-init")
    assert again["producer_epoch"] == 1
    for timeout_ms in (900_001, 2**31 - 1):
        assert pair.d.same(22, 4, {"transactional_id": tid, "transaction_timeout_ms": timeout_ms,
                                   "producer_id": -1, "producer_epoch": -1})[
            "error_code"] == E.INVALID_TRANSACTION_TIMEOUT
    for version in range(6):
        assert pair.d.same(22, version, {"transactional_id": "", "transaction_timeout_ms": 1000,
                                         "producer_id": -1, "producer_epoch": -1})[
            "error_code"] == E.INVALID_REQUEST
    pair.d.same(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 1000,
                        "producer_id": 5, "producer_epoch": -1})
    # KIP-360: a producer id that is not the transactional id's
    for version in (3, 4, 5):
        wrong = pair.same(lambda b: _init(b, tid, version=version, producer_id=b.pid(tid) + 1000,
                                          producer_epoch=b.epoch(tid)),
                          f"wrong producer id v{version}")
        assert wrong["error_code"] == (E.PRODUCER_FENCED if version >= 4
                                       else E.INVALID_PRODUCER_EPOCH)
    # the producer bumps its own epoch, and retries that bump
    bumped = pair.same(lambda b: _init(b, tid, producer_id=b.pid(tid),
                                       producer_epoch=b.epoch(tid)), "bump")
    assert bumped["producer_epoch"] == 2
    retried = pair.same(lambda b: _init(b, tid, producer_id=b.pid(tid),
                                        producer_epoch=b.epoch(tid) - 1), "retried bump")
    assert (retried["error_code"], retried["producer_epoch"]) == (E.NONE, 2)
    # an epoch older than the one before: fenced
    for version in (3, 4):
        pair.same(lambda b: _init(b, tid, version=version, producer_id=b.pid(tid),
                                  producer_epoch=b.epoch(tid) - 2), f"stale epoch v{version}")


# --- 3. committed and aborted transactions, read by Fetch -------------------------

def test_committed_and_aborted_transactions_as_fetched(pair):
    topic, tid = _topic(pair), _name("ca")
    _begin(pair, tid)
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add")
    pair.same(lambda b: _produce(b, tid, topic, 0, [b"c1", b"c2"]), "produce")
    assert pair.same(lambda b: _settled(b, tid, True), "commit") == E.NONE
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add again")
    pair.same(lambda b: _produce(b, tid, topic, 2, [b"a1"]), "produce aborted")
    assert pair.same(lambda b: _settled(b, tid, False), "abort") == E.NONE
    pair.d.same(0, 9, _produce_body(topic, _batch(b"plain")))  # not transactional
    for version in (4, 11, 12):
        for committed in (True, False):
            for offset in (0, 2, 3, 5):
                part = _fetch(pair, topic, version, committed=committed, offset=offset)
    part = _fetch(pair, topic, 12, committed=True)["responses"][0]["partitions"][0]
    assert (part["high_watermark"], part["last_stable_offset"]) == (6, 6)
    assert part["aborted_transactions"] == [{"producer_id": f"<pid of {tid}>",
                                             "first_offset": 3}]
    assert [(x["base_offset"], x["is_control"]) for x in part["records"]] == [
        (0, False), (2, True), (3, False), (4, True), (5, False)]


# --- 4. an open transaction -------------------------------------------------------

def test_an_open_transaction_holds_the_last_stable_offset(pair):
    topic, tid = _topic(pair), _name("open")
    pair.d.same(0, 9, _produce_body(topic, _batch(b"before")))
    _begin(pair, tid)
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add")
    pair.same(lambda b: _produce(b, tid, topic, 0, [b"o1", b"o2"]), "produce")
    for version in range(2, 12):
        for committed in (False, True):
            for timestamp in (-1, -2):
                pair.d.same(2, version, _list_offsets(topic, timestamp, committed))
        # The newest records are the open transaction's (stamped now, the one
        # before in 2023): read_committed finds no largest timestamp below the
        # last stable offset (-1/-1; kcoord answered the open record's offset),
        # before v7 the same request is UNSUPPORTED_VERSION on both.
        pair.d.same(2, version, _list_offsets(topic, -3, True))
    for version in (4, 11, 12):
        part = _fetch(pair, topic, version, committed=True)["responses"][0]["partitions"][0]
        assert part["last_stable_offset"] == 1 and part["high_watermark"] == 3
        assert [x["base_offset"] for x in part["records"]] == [0]  # stops at the LSO
        _fetch(pair, topic, version, committed=True, offset=1)
        _fetch(pair, topic, version, committed=False)
    assert pair.same(lambda b: _settled(b, tid, False), "abort") == E.NONE
    for committed in (False, True):
        pair.d.same(2, 7, _list_offsets(topic, -1, committed))


# --- 5. transactional Produce refusals --------------------------------------------

@pytest.mark.parametrize("version", [3, 9, 10, 11])
def test_produce_to_a_partition_not_in_the_transaction(pair, version):
    topic, tid = _topic(pair, partitions=2), _name(f"unadded{version}")
    _begin(pair, tid)
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add")
    refused = pair.same(lambda b: _produce(b, tid, topic, 0, [b"x"], partition=1,
                                           version=version),
                        f"Produce v{version} to a partition not added")
    assert _code(refused) == (E.TRANSACTION_ABORTABLE if version >= 11 else E.INVALID_TXN_STATE)
    _fetch(pair, topic, 11, committed=False, partition=1)


@pytest.mark.parametrize("version", [3, 9, 11])
def test_a_transactional_batch_without_a_transactional_id(pair, version):
    topic, tid = _topic(pair), _name(f"nullid{version}")
    _begin(pair, tid)
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add")
    refused = pair.same(lambda b: _produce(b, None, topic, 0, [b"x"], version=version,
                                           producer=tid),
                        f"Produce v{version} with a null transactional id")
    assert _code(refused) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_plain_batch_while_the_producers_transaction_is_open(pair):
    topic, tid = _topic(pair), _name("plain")
    _begin(pair, tid)
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add")
    pair.same(lambda b: _produce(b, tid, topic, 0, [b"t"]), "transactional")
    for version in (3, 8, 9, 11, 12):
        refused = pair.same(lambda b: _produce(b, tid, topic, 1, [b"p"], version=version,
                                               transactional=False), f"plain batch v{version}")
        assert _code(refused) == E.INVALID_TXN_STATE
    _fetch(pair, topic, 11, committed=False)


# --- 6. AddPartitionsToTxn refusals -----------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_add_partitions_refusals(pair, version):
    topic, tid = _topic(pair), _name(f"add{version}")
    _begin(pair, tid)
    gone = _name("gone")
    for parts in ([(topic, 0), (topic, 7)], [(topic, 0), (OFFSETS, 0)],
                  [(topic, 0), (topic, 7), (OFFSETS, 0)], [(topic, 0), (gone, 0)]):
        pair.same(lambda b: _add(b, tid, parts, version), f"v{version} {parts}")
    assert _added(pair.same(lambda b: _add(b, tid, [(topic, 0), (topic, 7), (OFFSETS, 0)],
                                           version), "all three")) == {
        (topic, 0): E.OPERATION_NOT_ATTEMPTED, (topic, 7): E.UNKNOWN_TOPIC_OR_PARTITION,
        (OFFSETS, 0): E.TOPIC_AUTHORIZATION_FAILED}
    fenced = pair.same(lambda b: _add(b, tid, [(topic, 0)], version, epoch=b.epoch(tid) + 1),
                       f"v{version} wrong epoch")
    assert _added(fenced) == {(topic, 0): E.PRODUCER_FENCED if version >= 2
                              else E.INVALID_PRODUCER_EPOCH}
    wrong = pair.same(lambda b: _add(b, tid, [(topic, 0)], version, pid=b.pid(tid) + 1000),
                      f"v{version} wrong producer id")
    assert _added(wrong) == {(topic, 0): E.INVALID_PRODUCER_ID_MAPPING}
    other = _name("nobody")
    unknown = pair.same(lambda b: b.wire.call(24, version, {
        "v3_and_below_transactional_id": other, "v3_and_below_producer_id": b.pid(tid),
        "v3_and_below_producer_epoch": b.epoch(tid),
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}]}),
        f"v{version} unknown transactional id")
    assert _added(unknown) == {(topic, 0): E.INVALID_PRODUCER_ID_MAPPING}
    # nothing was added: no transaction to end
    pair.same(lambda b: _end(b, tid, True), "EndTxn after the refusals")
    pair.same(lambda b: _add(b, tid, [(topic, 0)], version), f"v{version} accepted")
    pair.same(lambda b: _add(b, tid, [(topic, 0)], version), f"v{version} added again")
    assert pair.same(lambda b: _settled(b, tid, False), "abort") == E.NONE


# --- 7. EndTxn in each state ------------------------------------------------------

def test_end_txn_in_each_state(pair):
    topic, tid, nobody = _topic(pair), _name("end"), _name("nobody")
    _begin(pair, tid)
    for version in range(5):  # Empty
        for commit in (True, False):
            empty = pair.same(lambda b: _end(b, tid, commit, version),
                              f"Empty v{version} {commit}")
            assert empty["error_code"] == E.INVALID_TXN_STATE
        fenced = pair.same(lambda b: _end(b, tid, True, version, epoch=b.epoch(tid) + 1),
                           f"Empty v{version} wrong epoch")
        assert fenced["error_code"] == (E.PRODUCER_FENCED if version >= 2
                                        else E.INVALID_PRODUCER_EPOCH)
        pair.same(lambda b: _end(b, tid, True, version, pid=b.pid(tid) + 1000),
                  f"Empty v{version} wrong producer id")
        pair.same(lambda b: b.wire.call(26, version, {
            "transactional_id": nobody, "producer_id": b.pid(tid),
            "producer_epoch": b.epoch(tid), "committed": True}),
            f"v{version} unknown transactional id")
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add")
    pair.same(lambda b: _produce(b, tid, topic, 0, [b"x"]), "produce")
    for version in range(5):  # Ongoing
        pair.same(lambda b: _end(b, tid, True, version, epoch=b.epoch(tid) + 1),
                  f"Ongoing v{version} wrong epoch")
    assert pair.same(lambda b: _settled(b, tid, True), "commit") == E.NONE
    for version in range(5):  # CompleteCommit
        again = pair.same(lambda b: _end(b, tid, True, version), f"commit again v{version}")
        other = pair.same(lambda b: _end(b, tid, False, version),
                          f"abort after commit v{version}")
        assert (again["error_code"], other["error_code"]) == (E.NONE, E.INVALID_TXN_STATE)
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add")
    assert pair.same(lambda b: _settled(b, tid, False), "abort") == E.NONE
    for version in range(5):  # CompleteAbort
        pair.same(lambda b: _end(b, tid, False, version), f"abort again v{version}")
        pair.same(lambda b: _end(b, tid, True, version), f"commit after abort v{version}")


def _end_v5(b: Broker, tid: str, commit: bool, epoch: int | None = None,
            within_s: float = 10) -> dict:
    """EndTxn v5, asked again (bounded) while the previous end completes; the
    producer takes the epoch the answer gives, as a transaction.version 2 client."""
    deadline = time.monotonic() + within_s
    while True:
        answer = _end(b, tid, commit, 5, epoch=epoch)
        if answer["error_code"] != E.CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if answer["error_code"] == E.NONE and answer["producer_id"] >= 0:
        b.producers[tid] = (answer["producer_id"], answer["producer_epoch"])
    return answer


def test_end_txn_v5_in_each_state(pair):
    """EndTxn v5 is answered as Kafka 4.4 answers it (its transaction.version 2
    ending: the epoch is bumped at every end and given back in the answer)."""
    topic, tid = _topic(pair), _name("end5")
    _begin(pair, tid)
    pair.same(lambda b: _end_v5(b, tid, True), "Empty commit v5")
    pair.same(lambda b: _end_v5(b, tid, False), "Empty abort v5")
    pair.same(lambda b: _end_v5(b, tid, True, epoch=b.epoch(tid) + 1), "Empty v5 wrong epoch")
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add")
    pair.same(lambda b: _produce(b, tid, topic, 0, [b"x"]), "produce")
    previous = {b.side.name: b.epoch(tid) for b in (pair.kcoord, pair.kafka)}
    pair.same(lambda b: _end_v5(b, tid, True), "Ongoing commit v5")
    pair.same(lambda b: _end_v5(b, tid, True, epoch=previous[b.side.name]),
              "commit v5 retried with the epoch it was sent with")
    pair.same(lambda b: _end_v5(b, tid, True), "commit v5 with the epoch answered")
    pair.same(lambda b: _end_v5(b, tid, False), "abort v5 after the commit")


def test_a_transaction_version_2_producer_end_to_end(pair):
    """As a Java producer at transaction.version 2 works: no AddPartitionsToTxn,
    Produce v12+ adds the partition itself, TxnOffsetCommit v5 the group's,
    EndTxn v5 bumps the epoch, and the next transaction goes on with it."""
    topic, tid, group = _topic(pair, partitions=2), _name("tv2"), _name("g2")
    _begin(pair, tid)
    for version in (12, 13):
        if version == 13:
            _learn_topic_ids(pair, topic)
        for partition in (0, 1):
            def produce(b, partition=partition, version=version):
                body = {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                        "topic_data": [{"name": topic if version < 13 else "",
                                        "topic_id": b.side.topic_ids.get(topic),
                                        "partition_data": [{"index": partition, "records":
                                                            T.txn_batch(b.pid(tid), b.epoch(tid),
                                                                        0, [b"v2"])}]}]}
                return b.wire.call(0, version, body)
            assert _code(pair.same(produce, f"Produce v{version} to partition {partition}")) \
                == E.NONE
        if version == 12:
            _group_ready(pair, group)
            answer = pair.same(lambda b: _txn_commit(b, tid, group, topic, 5, 5),
                               "TxnOffsetCommit v5 without AddOffsetsToTxn")
            assert answer["topics"][0]["partitions"][0]["error_code"] == E.NONE
        # (the start time is each broker's own, and Kafka lists the partitions in
        # its hash set's order)
        ours, theirs = (
            [(s["transaction_state"], s["transaction_timeout_ms"],
              sorted((t["topic"], sorted(t["partitions"])) for t in s["topics"]))
             for s in answer["transaction_states"]]
            for answer in pair.each(lambda b: b.wire.call(
                65, 0, {"transactional_ids": [tid]}), api_key=65))
        assert ours == theirs
        assert ours[0][0] == "Ongoing" and (topic, [0, 1]) in ours[0][2]
        pair.same(lambda b: _end_v5(b, tid, version == 12), f"EndTxn v5 after Produce v{version}")
        for b in (pair.kcoord, pair.kafka):  # its markers are written after the answer
            deadline = time.monotonic() + 30
            while not b.wire.call(65, 0, {"transactional_ids": [tid]})["transaction_states"][0][
                    "transaction_state"].startswith("Complete"):
                assert time.monotonic() < deadline, b.side.name
                time.sleep(0.05)
    for committed in (True, False):
        for partition in (0, 1):
            pair.same(lambda b, partition=partition: b.wire.call(
                1, 12, _fetch_body(topic, committed=committed, partition=partition)),
                f"fetch partition {partition}", api_key=1)
    pair.same(lambda b: b.wire.call(9, 7, _offset_fetch(group, topic, True)), "offsets",
              api_key=9)


def test_an_empty_transactional_id_is_an_invalid_request(pair):
    topic, tid = _topic(pair), _name("emptyid")
    _begin(pair, tid)
    for version in (0, 3):
        answer = pair.same(lambda b, v=version: b.wire.call(24, v, {
            "v3_and_below_transactional_id": "", "v3_and_below_producer_id": b.pid(tid),
            "v3_and_below_producer_epoch": b.epoch(tid),
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]}),
            f"AddPartitionsToTxn v{version}")
        assert answer["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
            "partition_error_code"] == E.INVALID_REQUEST
    for version in (0, 3, 5):
        answer = pair.same(lambda b, v=version: b.wire.call(26, v, {
            "transactional_id": "", "producer_id": b.pid(tid), "producer_epoch": b.epoch(tid),
            "committed": True}), f"EndTxn v{version}")
        assert answer["error_code"] == E.INVALID_REQUEST
    answer = pair.same(lambda b: b.wire.call(25, 3, {
        "transactional_id": "", "producer_id": b.pid(tid), "producer_epoch": b.epoch(tid),
        "group_id": "g"}), "AddOffsetsToTxn")
    assert answer["error_code"] == E.INVALID_REQUEST


# --- 8. TxnOffsetCommit and OffsetFetch require_stable ----------------------------

def _group_ready(pair: Pair, group: str, timeout: float = 60) -> None:
    """Kafka answers COORDINATOR_LOAD_IN_PROGRESS while it loads a group's partition."""
    for b in (pair.kcoord, pair.kafka):
        deadline = time.monotonic() + timeout
        while True:
            answer = b.wire.call(9, 8, {"require_stable": False, "groups": [
                {"group_id": group, "member_id": None, "member_epoch": -1, "topics": []}]})
            if answer["groups"][0]["error_code"] == 0:
                break
            assert time.monotonic() < deadline, (b.side.name, answer)
            time.sleep(0.05)


def _add_offsets(b: Broker, tid: str, group: str, version: int = 3) -> dict:
    return b.wire.call(25, version, {"transactional_id": tid, "producer_id": b.pid(tid),
                                     "producer_epoch": b.epoch(tid), "group_id": group})


def _txn_commit(b: Broker, tid: str, group: str, topic: str, offset: int, version: int,
                generation: int = -1, member: str = "") -> dict:
    topic_ref = {"topic_id": b.side.topic_ids.get(topic)} if version >= 6 else {"name": topic}
    return b.wire.call(28, version, {
        "transactional_id": tid, "group_id": group, "producer_id": b.pid(tid),
        "producer_epoch": b.epoch(tid), "generation_id_or_member_epoch": generation,
        "member_id": member, "group_instance_id": None,
        "topics": [{**topic_ref, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": "m"}]}]})


def _offset_fetch(group: str, topic: str, stable: bool) -> dict:
    return {"group_id": group, "require_stable": stable,
            "topics": [{"name": topic, "partition_indexes": [0]}]}


def _learn_topic_ids(pair: Pair, topic: str) -> None:
    for b in (pair.kcoord, pair.kafka):
        for t in b.wire.call(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                     "allow_auto_topic_creation": False})["topics"]:
            b.side.topic_ids[topic] = t["topic_id"]


def test_txn_offset_commit_counts_once_the_transaction_commits(pair):
    topic, tid, group = _topic(pair), _name("toc"), _name("g")
    _group_ready(pair, group)
    _begin(pair, tid)
    for version in range(5):  # no transaction at all
        pair.same(lambda b: _txn_commit(b, tid, group, topic, 7, version),
                  f"TxnOffsetCommit v{version}, Empty")
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add")
    for version in range(5):  # a transaction, without the group's partition
        refused = pair.same(lambda b: _txn_commit(b, tid, group, topic, 7, version),
                            f"TxnOffsetCommit v{version} without AddOffsetsToTxn")
        assert _code(refused) == (E.TRANSACTION_ABORTABLE if version >= 4
                                  else E.INVALID_TXN_STATE)
    for version in range(5):
        pair.same(lambda b: _add_offsets(b, tid, group, version), f"AddOffsetsToTxn v{version}")
    for version in range(5):
        assert _code(pair.same(lambda b: _txn_commit(b, tid, group, topic, 42, version),
                               f"TxnOffsetCommit v{version}")) == E.NONE
    pending = pair.d.same(9, 7, _offset_fetch(group, topic, True))
    assert pending["topics"][0]["partitions"][0]["error_code"] == E.UNSTABLE_OFFSET_COMMIT
    pair.d.same(9, 7, _offset_fetch(group, topic, False))
    assert pair.same(lambda b: _settled(b, tid, True), "commit") == E.NONE
    for stable in (True, False):
        pair.d.same(9, 7, _offset_fetch(group, topic, stable))
    # the next transaction's offsets are dropped by its abort
    pair.same(lambda b: _add_offsets(b, tid, group), "AddOffsetsToTxn")
    pair.same(lambda b: _txn_commit(b, tid, group, topic, 99, 3), "TxnOffsetCommit 99")
    pair.d.same(9, 7, _offset_fetch(group, topic, True))
    assert pair.same(lambda b: _settled(b, tid, False), "abort") == E.NONE
    for stable in (True, False):
        answer = pair.d.same(9, 7, _offset_fetch(group, topic, stable))
        assert answer["topics"][0]["partitions"][0]["committed_offset"] == 42


def test_txn_offset_commit_v6_names_topics_by_id(pair):
    topic, tid, group = _topic(pair), _name("toc6"), _name("g6")
    _group_ready(pair, group)
    _learn_topic_ids(pair, topic)
    _begin(pair, tid)
    pair.same(lambda b: _add_offsets(b, tid, group), "AddOffsetsToTxn")
    pair.same(lambda b: _txn_commit(b, tid, group, topic, 5, 6), "TxnOffsetCommit v6",
              api_key=28)
    assert pair.same(lambda b: _settled(b, tid, True), "commit") == E.NONE
    pair.d.same(9, 7, _offset_fetch(group, topic, True))


def test_txn_offset_commit_refusals(pair):
    topic, tid, group = _topic(pair), _name("tocr"), _name("gr")
    _group_ready(pair, group)
    _begin(pair, tid)
    pair.same(lambda b: _add_offsets(b, tid, group), "AddOffsetsToTxn")
    missing = _name("missing")
    for version in range(5):
        assert _code(pair.same(lambda b: _txn_commit(b, tid, group, missing, 1, version),
                               f"v{version} unknown topic")) == E.UNKNOWN_TOPIC_OR_PARTITION
    # a generation for a group that does not exist
    _learn_topic_ids(pair, topic)
    for version in (3, 4, 5, 6):
        pair.same(lambda b: _txn_commit(b, tid, group, topic, 1, version, generation=3,
                                        member="m-1"), f"v{version} generation, no group", 28)
    pair.same(lambda b: _txn_commit(b, tid, group, topic, 1, 3, member="m-1"),
              "member id only, no group")
    assert pair.same(lambda b: _settled(b, tid, False), "abort") == E.NONE
    pair.d.same(9, 7, _offset_fetch(group, topic, True))


# --- 9. a new producer instance fences the old one --------------------------------

def test_a_new_instance_fences_the_old_ones_open_transaction(pair):
    topic, tid = _topic(pair), _name("fence")
    _begin(pair, tid)
    pair.same(lambda b: _add(b, tid, [(topic, 0)]), "add")
    pair.same(lambda b: _produce(b, tid, topic, 0, [b"zombie"]), "produce")
    old = {b.side.name: b.producers[tid] for b in (pair.kcoord, pair.kafka)}
    told = pair.same(lambda b: b.wire.call(22, 4, {
        "transactional_id": tid, "transaction_timeout_ms": 60_000,
        "producer_id": -1, "producer_epoch": -1}), "first InitProducerId of the new instance")
    assert told["error_code"] == E.CONCURRENT_TRANSACTIONS
    again = pair.same(lambda b: _init(b, tid), "InitProducerId asked again")
    assert (again["error_code"], again["producer_epoch"]) == (E.NONE, 2)
    late = pair.same(lambda b: _end(b, tid, True, pid=old[b.side.name][0],
                                    epoch=old[b.side.name][1]), "the old instance's EndTxn")
    assert late["error_code"] == E.PRODUCER_FENCED
    for version in (3, 9, 11):
        late = pair.same(lambda b: _produce(b, tid, topic, 1, [b"late"], version=version,
                                            epoch=old[b.side.name][1]),
                         f"the old instance's Produce v{version}")
        assert _code(late) == E.INVALID_PRODUCER_EPOCH
    for committed in (True, False):
        _fetch(pair, topic, 12, committed=committed)
