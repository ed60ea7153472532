"""Raw transaction requests, the steps a transactional producer takes (shared by
the wire tests and the differential tests against Kafka)."""

from __future__ import annotations

import time

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import Record, build_batch

E = ErrorCode


def find_coordinator(wire, transactional_id: str, version: int = 3, within_s: float = 30):
    """FindCoordinator for a transactional id, asked again while the broker makes
    ``__transaction_state`` (COORDINATOR_NOT_AVAILABLE); the first answer and
    the last."""
    first = last = None
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        last = wire.call(10, version, {"key": transactional_id, "key_type": 1})
        first = first or last
        if last["error_code"] != E.COORDINATOR_NOT_AVAILABLE:
            break
        time.sleep(0.1)
    return first, last


def init_producer(wire, transactional_id: str, timeout_ms: int = 60_000, version: int = 4,
                  producer_id: int = -1, producer_epoch: int = -1, within_s: float = 30):
    """InitProducerId, asked again on CONCURRENT_TRANSACTIONS and while loading."""
    deadline = time.monotonic() + within_s
    while True:
        answer = wire.call(22, version, {"transactional_id": transactional_id,
                                         "transaction_timeout_ms": timeout_ms,
                                         "producer_id": producer_id,
                                         "producer_epoch": producer_epoch})
        if answer["error_code"] not in (E.CONCURRENT_TRANSACTIONS,
                                        E.COORDINATOR_LOAD_IN_PROGRESS,
                                        E.COORDINATOR_NOT_AVAILABLE) \
                or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def add_partitions(wire, transactional_id: str, pid: int, epoch: int, partitions,
                   version: int = 3) -> dict:
    """AddPartitionsToTxn v0-3: ``{(topic, partition): error}``."""
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    answer = wire.call(24, version, {
        "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t["name"], p["partition_index"]): p["partition_error_code"]
            for t in answer["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}


def txn_batch(pid: int, epoch: int, seq: int, values, *, transactional: bool = True):
    return build_batch([Record(None, int(time.time() * 1000), None, v) for v in values],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=transactional)


def produce(wire, transactional_id, topic: str, partition: int, records,
            version: int = 9) -> dict:
    answer = wire.call(0, version, {"transactional_id": transactional_id, "acks": -1,
                                    "timeout_ms": 5000,
                                    "topic_data": [{"name": topic, "partition_data": [
                                        {"index": partition, "records": records}]}]})
    return answer["responses"][0]["partition_responses"][0]


def end_txn(wire, transactional_id: str, pid: int, epoch: int, commit: bool,
            version: int = 3) -> int:
    return wire.call(26, version, {"transactional_id": transactional_id, "producer_id": pid,
                                   "producer_epoch": epoch, "committed": commit})["error_code"]


def end_txn_settled(wire, transactional_id: str, pid: int, epoch: int, commit: bool,
                    within_s: float = 10) -> int:
    """EndTxn, then the same again until the transaction is complete (a retry of
    a finished end answers NONE)."""
    code = end_txn(wire, transactional_id, pid, epoch, commit)
    deadline = time.monotonic() + within_s
    while code == E.NONE and time.monotonic() < deadline:
        again = end_txn(wire, transactional_id, pid, epoch, commit)
        if again == E.NONE:
            return code
        time.sleep(0.02)
    return code


def fetch(wire, topic: str, partition: int = 0, *, committed: bool, offset: int = 0,
          version: int = 11) -> dict:
    answer = wire.call(1, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 1 if committed else 0,
        "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]})
    return answer["responses"][0]["partitions"][0]


def latest_offset(wire, topic: str, partition: int = 0, *, committed: bool) -> int:
    answer = wire.call(2, 5, {"replica_id": -1, "isolation_level": 1 if committed else 0,
                              "topics": [{"name": topic, "partitions": [
                                  {"partition_index": partition, "timestamp": -1,
                                   "current_leader_epoch": -1}]}]})
    return answer["topics"][0]["partitions"][0]["offset"]
