"""Transactions are not served (docs: Decisions): a transactional Produce and a
FindCoordinator for a transaction key are refused over the wire with the message
"transactions are not supported", and each refusal logs a warning."""

from __future__ import annotations

import pytest
import structlog

from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from tests.broker.wire_ops import create_topic as _create

E = ErrorCode
NO_TRANSACTIONS = "transactions are not supported"


def _txn_batch(value: bytes, transactional=True):
    return build_batch([Record(None, 1_700_000_000_000, b"k", value)], producer_id=7,
                       producer_epoch=0, base_sequence=0, transactional=transactional)


def _high_watermark(wire, topic, partition=0):
    answer = wire.call(1, 12, {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                               "topics": [{"topic": topic, "partitions": [
                                   {"partition": partition, "fetch_offset": 0,
                                    "partition_max_bytes": 1 << 20}]}]})
    return answer["responses"][0]["partitions"][0]["high_watermark"]


def _warnings(logs, event):
    return [e for e in logs if e["event"] == event and e["log_level"] == "warning"]


@pytest.mark.parametrize("version", [3, 9, 11])
def test_a_transactional_produce_with_a_transactional_id_is_refused(wire, version):
    topic = f"txn-produce-v{version}"
    _create(wire, topic, partitions=2)
    with structlog.testing.capture_logs() as logs:
        answer = wire.call(0, version, {
            "transactional_id": "shop-orders", "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": _txn_batch(b"a")},
                {"index": 1, "records": _txn_batch(b"b")}]}]})
    parts = answer["responses"][0]["partition_responses"]
    # Every partition of the request is refused, with the reason where the
    # version can carry it (v8+).
    assert [p["error_code"] for p in parts] == [E.INVALID_TXN_STATE] * 2
    assert [(p["base_offset"], p["log_start_offset"]) for p in parts] == [(-1, -1)] * 2
    if version >= 8:
        assert [p["error_message"] for p in parts] == [NO_TRANSACTIONS] * 2
    # Nothing was written.
    assert [_high_watermark(wire, topic, p) for p in (0, 1)] == [0, 0]
    (warning,) = _warnings(logs, "produce.transactional_refused")
    assert warning["transactional_id"] == "shop-orders"
    assert warning["reason"] == NO_TRANSACTIONS


def test_a_plain_batch_with_a_transactional_id_is_appended(wire):
    """Only transactional batches are refused: the transactional id alone (which a
    non-transactional batch ignores, as in Kafka) does not stop the append."""
    _create(wire, "txn-plain")
    with structlog.testing.capture_logs() as logs:
        answer = wire.call(0, 9, {
            "transactional_id": "shop-orders", "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": "txn-plain", "partition_data": [
                {"index": 0, "records": _txn_batch(b"a", transactional=False)}]}]})
    part = answer["responses"][0]["partition_responses"][0]
    assert (part["error_code"], part["base_offset"]) == (0, 0)
    assert _high_watermark(wire, "txn-plain") == 1
    assert _warnings(logs, "produce.transactional_refused") == []


@pytest.mark.parametrize("version", [1, 2, 3])
def test_find_coordinator_for_a_transaction_is_refused(wire, version):
    with structlog.testing.capture_logs() as logs:
        answer = wire.call(10, version, {"key": "shop-orders", "key_type": 1})
    assert answer["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert answer["error_message"] == NO_TRANSACTIONS
    assert (answer["node_id"], answer["host"], answer["port"]) == (-1, "", -1)
    (warning,) = _warnings(logs, "find_coordinator.transactional_refused")
    assert warning["keys"] == ["shop-orders"] and warning["reason"] == NO_TRANSACTIONS
    # The same connection still finds group coordinators.
    group = wire.call(10, version, {"key": "shop-orders", "key_type": 0})
    assert group["error_code"] == 0 and group["node_id"] >= 0


@pytest.mark.parametrize("version", [4, 5, 6])
def test_batched_find_coordinator_refuses_every_transaction_key(wire, version):
    keys = ["orders", "payments", "refunds"]
    with structlog.testing.capture_logs() as logs:
        answer = wire.call(10, version, {"key_type": 1, "coordinator_keys": keys})
    assert [(c["key"], c["error_code"], c["error_message"], c["node_id"], c["host"], c["port"])
            for c in answer["coordinators"]] == [
        (key, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, NO_TRANSACTIONS, -1, "", -1) for key in keys]
    (warning,) = _warnings(logs, "find_coordinator.transactional_refused")
    assert warning["keys"] == keys and warning["reason"] == NO_TRANSACTIONS
    groups = wire.call(10, version, {"key_type": 0, "coordinator_keys": keys})
    assert [(c["key"], c["error_code"]) for c in groups["coordinators"]] == [
        (key, 0) for key in keys]


def test_find_coordinator_for_groups_logs_no_warning(wire):
    with structlog.testing.capture_logs() as logs:
        for version in (0, 3, 4):
            body = {"key": "g", "key_type": 0, "coordinator_keys": ["g"]}
            wire.call(10, version, body)
    assert _warnings(logs, "find_coordinator.transactional_refused") == []
