"""DeleteRecords against kcoord and Apache Kafka 4.4 over the raw wire, answers
compared field by field: log start offsets moved (to an offset, to the high
watermark), what ListOffsets and Fetch say afterwards, and each refusal
(unknown topic or partition, past the high watermark, a compacted topic, an
internal topic)."""

from __future__ import annotations

import itertools

import pytest

from tests.reference.differential import Differential
from tests.reference.test_differential_data import (
    TS, _batch, _fetch_body, _produce_body, _wait_until_fetchable)

_names = itertools.count()


@pytest.fixture
def d(reference_pair) -> Differential:
    kcoord, ref = reference_pair("main")
    return Differential(kcoord.bootstrap, ref.bootstrap, f"Kafka {ref.version}")


def _topic(d: Differential, partitions: int = 2, policy: str | None = None) -> str:
    name = f"ddr-{next(_names)}"
    # The batches carry 2023 timestamps: without this, a retention pass on one
    # broker and not yet on the other would move one log start (both roll an
    # expired active segment, as Kafka does).
    configs = [{"name": "retention.ms", "value": "-1"}]
    if policy is not None:
        configs.append({"name": "cleanup.policy", "value": policy})
    d.same(19, 4, {"topics": [{"name": name, "num_partitions": partitions,
                               "replication_factor": 1, "assignments": [],
                               "configs": configs}],
                   "timeout_ms": 10000, "validate_only": False})
    for side in (d.kcoord, d.kafka):
        d.wait_for_topics(side, [name])
    _wait_until_fetchable(d, name, partitions)
    for p in range(partitions):
        d.same(0, 9, _produce_body(name, _batch(*(b"v%d" % i for i in range(5))), partition=p))
        d.same(0, 9, _produce_body(name, _batch(*(b"w%d" % i for i in range(5))), partition=p))
    return name


def _delete(topic: str, *partitions: tuple[int, int]) -> dict:
    return {"topics": [{"name": topic, "partitions": [
        {"partition_index": p, "offset": o} for p, o in partitions]}], "timeout_ms": 10000}


def _earliest(topic: str, partition: int, timestamp: int = -2) -> dict:
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "timestamp": timestamp, "current_leader_epoch": -1}]}]}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_records_are_deleted_as_on_kafka(d, version):
    topic = _topic(d)
    moved = d.same(21, version, _delete(topic, (0, 3), (1, -1)))
    assert [p["low_watermark"] for p in moved["topics"][0]["partitions"]] == [3, 10]
    d.same(21, version, _delete(topic, (0, 2)))  # below the log start: nothing moves
    d.same(21, version, _delete(topic, (0, 10)))  # up to the log end exactly
    for p in (0, 1):
        d.same(2, 7, _earliest(topic, p))
        # the largest timestamp is still found in its segment, below the log
        # start (kcoord answered OFFSET_OUT_OF_RANGE); by time, nothing is left
        d.same(2, 7, _earliest(topic, p, -3))
        d.same(2, 7, _earliest(topic, p, TS + 2))
    d.same(1, 12, _fetch_body(topic, 0))  # below the log start: OFFSET_OUT_OF_RANGE
    d.same(1, 12, _fetch_body(topic, 10))


def test_refused_deletions_as_kafka_refuses_them(d):
    topic = _topic(d)
    compacted = _topic(d, partitions=1, policy="compact")
    both = _topic(d, partitions=1, policy="compact,delete")
    d.same(21, 2, _delete(topic, (0, 11), (1, -2), (5, 1)))  # past the end, below -1, no such
    d.same(21, 2, _delete("ddr-missing", (0, 1)))
    d.same(21, 2, _delete(compacted, (0, 1)))
    d.same(21, 2, _delete(both, (0, 4)))
    d.same(21, 2, _delete("__consumer_offsets", (0, 0)))
    d.same(2, 7, _earliest(both, 0))
