"""``__transaction_state`` record keys and values: Kafka's versions and bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol import txn_records as R
from kcoord.protocol.txn_records import TransactionState
from tests.protocol.strategies import message_values, plain


def _value(**overrides):
    fields = {
        "producer_id": 1000, "producer_epoch": 3, "transaction_timeout_ms": 60000,
        "transaction_status": TransactionState.ONGOING,
        "transaction_partitions": [{"topic": "t", "partition_ids": [0, 2]}],
        "transaction_last_update_timestamp_ms": 2000, "transaction_start_timestamp_ms": 1500,
    }
    fields.update(overrides)
    return fields


def test_state_ids_are_kafkas():
    assert [(s.name, int(s)) for s in TransactionState] == [
        ("EMPTY", 0), ("ONGOING", 1), ("PREPARE_COMMIT", 2), ("PREPARE_ABORT", 3),
        ("COMPLETE_COMMIT", 4), ("COMPLETE_ABORT", 5), ("DEAD", 6), ("PREPARE_EPOCH_FENCE", 7)]
    assert R.STATE_NAMES[TransactionState.PREPARE_EPOCH_FENCE] == "PrepareEpochFence"
    assert set(R.STATE_NAMES) == set(TransactionState)


def test_key_bytes():
    # Record type 0 (the transaction log), then TransactionLogKey v0: an int16-sized string.
    assert R.encode_key("txn-1") == b"\x00\x00" + b"\x00\x05txn-1"
    assert R.decode_key(b"\x00\x00\x00\x05txn-1") == "txn-1"
    assert R.decode_key(R.encode_key("ü")) == "ü"
    with pytest.raises(R.UnknownKeyVersion) as info:
        R.decode_key(b"\x00\x01\x00\x05txn-1")
    assert info.value.version == 1
    with pytest.raises(ValueError):
        R.decode_key(b"\x00")


def test_value_v0_bytes():
    raw = R.encode_value(_value(), version=0)
    assert raw == (
        b"\x00\x00"                                   # version 0
        + struct.pack(">qhib", 1000, 3, 60000, 1)     # producer id, epoch, timeout, Ongoing
        + struct.pack(">i", 1)                        # one topic
        + b"\x00\x01t" + struct.pack(">iii", 2, 0, 2)  # "t", partitions [0, 2]
        + struct.pack(">qq", 2000, 1500))             # last update, start
    back = R.decode_value(raw)
    assert back == {**_value(), "previous_producer_id": -1, "next_producer_id": -1,
                    "next_producer_epoch": -1, "client_transaction_version": 0}


def test_value_v1_bytes_with_tagged_fields():
    raw = R.encode_value(_value(previous_producer_id=5, client_transaction_version=2))
    assert raw == (
        b"\x00\x01"                                   # version 1 (Kafka 4.4's, flexible)
        + struct.pack(">qhib", 1000, 3, 60000, 1)
        + b"\x02"                                     # compact array: one topic
        + b"\x02t" + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"  # "t", [0, 2], no tags
        + struct.pack(">qq", 2000, 1500)
        + b"\x02"                                     # two tagged fields, by tag:
        + b"\x00\x08" + struct.pack(">q", 5)          # 0 previous_producer_id
        + b"\x02\x02" + struct.pack(">h", 2))         # 2 client_transaction_version
    back = R.decode_value(raw)
    assert (back.previous_producer_id, back.next_producer_id, back.next_producer_epoch,
            back.client_transaction_version) == (5, -1, -1, 2)
    # At their defaults, tagged fields are not written: an empty tagged section.
    assert R.encode_value(_value()).endswith(struct.pack(">qq", 2000, 1500) + b"\x00")


def test_empty_transaction_writes_null_partitions():
    raw = R.encode_value(_value(transaction_status=TransactionState.EMPTY,
                                transaction_partitions=[], transaction_start_timestamp_ms=-1))
    assert raw[2:18] == struct.pack(">qhib", 1000, 3, 60000, 0) + b"\x00"  # null compact array
    assert R.decode_value(raw).transaction_partitions is None
    v0 = R.encode_value(_value(transaction_status=0, transaction_partitions=None), version=0)
    assert v0[17:21] == struct.pack(">i", -1)
    with pytest.raises(ValueError):
        R.encode_value(_value(transaction_status=TransactionState.EMPTY))
    # Any other state writes a list, empty when none was given.
    done = R.encode_value(_value(transaction_status=TransactionState.COMPLETE_COMMIT,
                                 transaction_partitions=None))
    assert R.decode_value(done).transaction_partitions == []


def test_records_as_kafka_4_4_wrote_them():
    """An Empty then an Ongoing record, read from ``__transaction_state`` of a
    Kafka 4.4.0 broker (a librdkafka producer, transactional id "txn-1"):
    value v1, previous_producer_id written, the client's TV 0 not."""
    key = bytes.fromhex("0000000574786e2d31")
    empty = bytes.fromhex("0001000000000000000000000000ea600000000001a21ceb5c2c"
                          "ffffffffffffffff0100080000000000000000")
    ongoing = bytes.fromhex("0001000000000000000000000000ea600102027403000000010000000000"
                            "000001a21ceb5c6e000001a21ceb5c6e0100080000000000000000")
    assert R.decode_key(key) == "txn-1" and R.encode_key("txn-1") == key
    first, second = R.decode_value(empty), R.decode_value(ongoing)
    assert first.transaction_status == TransactionState.EMPTY
    assert first.transaction_partitions is None and first.transaction_start_timestamp_ms == -1
    assert second.transaction_status == TransactionState.ONGOING
    assert second.transaction_partitions == [{"topic": "t", "partition_ids": [1, 0]}]
    assert (second.producer_id, second.producer_epoch, second.transaction_timeout_ms,
            second.previous_producer_id, second.client_transaction_version) == (0, 0, 60000, 0, 0)
    assert R.encode_value(first) == empty and R.encode_value(second) == ongoing


def test_unknown_tagged_fields_and_newer_versions_are_read():
    raw = R.encode_value(_value(previous_producer_id=5))
    assert raw.endswith(b"\x01\x00\x08" + struct.pack(">q", 5))
    # A tag this layout does not know (9, two bytes), after the known one: skipped.
    extra = raw[:-11] + b"\x02\x00\x08" + struct.pack(">q", 5) + b"\x09\x02\xab\xcd"
    assert R.decode_value(extra) == R.decode_value(raw)
    # An unknown tag in a partition entry is skipped too.
    entry_tags = raw.index(b"\x03" + struct.pack(">ii", 0, 2)) + 9
    assert raw[entry_tags] == 0
    tagged_entry = raw[:entry_tags] + b"\x01\x05\x01\xff" + raw[entry_tags + 1:]
    assert R.decode_value(tagged_entry) == R.decode_value(raw)
    # A newer version is read with the newest known layout (v1).
    newer = b"\x00\x07" + extra[2:]
    assert R.decode_value(newer) == R.decode_value(raw)
    assert R.decode_value(None) is None  # a tombstone
    with pytest.raises(ValueError):
        R.decode_value(b"\xff\xff" + raw[2:])
    with pytest.raises(ValueError):
        R.decode_value(b"\x00")


@pytest.mark.parametrize("version", range(R.TRANSACTION_LOG_VALUE.min_version,
                                          R.TRANSACTION_LOG_VALUE.max_version + 1))
@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_value_round_trip_every_version(version, data):
    api = R.TRANSACTION_LOG_VALUE
    fields = data.draw(message_values(api.request, version, api.is_flexible(version)))
    expected = plain(fields)
    if fields["transaction_status"] == TransactionState.EMPTY:
        if fields["transaction_partitions"]:
            with pytest.raises(ValueError):
                R.encode_value(fields, version=version)
            return
        expected["transaction_partitions"] = None
    elif fields["transaction_partitions"] is None:
        expected["transaction_partitions"] = []
    raw = R.encode_value(fields, version=version)
    assert raw[:2] == struct.pack(">h", version)
    back = R.decode_value(raw)
    assert plain(back) == expected
    assert R.encode_value(back, version=version) == raw


@settings(max_examples=50, deadline=None)
@given(transactional_id=st.text(max_size=40))
def test_key_round_trip(transactional_id):
    assert R.decode_key(R.encode_key(transactional_id)) == transactional_id
