"""The records of ``__transaction_state``: keys and values as Kafka writes them.

Every key and value is an int16 version followed by the fields of that
version:

* the key: the record type (Kafka's CoordinatorRecordType, 0 for the
  transaction log, the only one), then TransactionLogKey v0: the
  transactional id.  Kafka skips a key of any other type.
* the value: TransactionLogValue, v0 or v1 (the first flexible version, with
  the tagged fields ``previous_producer_id`` (tag 0), ``next_producer_id``
  (1), ``client_transaction_version`` (2) and ``next_producer_epoch`` (3)).
  Kafka 4.4 writes the version its ``transaction.version`` feature says
  (TransactionVersion.transactionLogValueVersion): v0 at TV0, v1 at TV1 and
  TV2, and TV2 is the default of a new cluster: v1.  It sets
  ``previous_producer_id``, ``next_producer_id`` and
  ``client_transaction_version``, never ``next_producer_epoch`` (left at -1,
  so not written); a tagged field at its default is not written.  An Empty
  transaction's ``transaction_partitions`` is written null.

A null value is a tombstone.  A value version newer than the newest known one
is read here with the newest known layout (KIP-915 keeps later changes to
tagged fields), as ``group_records`` does; Kafka 4.4 itself skips such a
value (TransactionLog.read answers UnknownValueVersion).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping

from kcoord.protocol.schema import F, S, Api

TRANSACTION_LOG_RECORD_TYPE = 0  # the key's version: CoordinatorRecordType.TRANSACTION_LOG
TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSION = 1  # what Kafka 4.4 writes at transaction.version 1 and 2


class TransactionState(enum.IntEnum):
    """A transaction's state, by the id Kafka writes in ``transaction_status``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """The name DescribeTransactions and ListTransactions give."""
        return STATE_NAMES[self]

    @classmethod
    def by_display(cls, name: str) -> "TransactionState | None":
        return next((state for state, shown in STATE_NAMES.items() if shown == name), None)


# The names DescribeTransactions and ListTransactions answer and filter on.
STATE_NAMES: dict[TransactionState, str] = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

TRANSACTION_LOG_KEY = Api(
    key=-1, name="TransactionLogKey", versions="0", flexible=None,
    request=S(F("transactional_id", "string")),
    response=S(),
    generated=True,  # written on every step of every transaction
)

TRANSACTION_LOG_VALUE = Api(
    key=-1, name="TransactionLogValue", versions="0-1", flexible="1+",
    request=S(
        F("producer_id", "int64"),
        F("previous_producer_id", "int64", v="1+", tag=0, default=-1),
        F("next_producer_id", "int64", v="1+", tag=1, default=-1),
        F("producer_epoch", "int16"),
        F("next_producer_epoch", "int16", v="1+", tag=3, default=-1),
        F("transaction_timeout_ms", "int32"),
        F("transaction_status", "int8"),
        F("transaction_partitions", [S(
            F("topic", "string"),
            F("partition_ids", ["int32"]),
        )], nullable="0+"),
        F("transaction_last_update_timestamp_ms", "int64"),
        F("transaction_start_timestamp_ms", "int64"),
        F("client_transaction_version", "int16", v="1+", tag=2, default=0),
    ),
    response=S(),
    generated=True,  # written on every step of every transaction
)

_VERSION = struct.Struct(">h")


class UnknownKeyVersion(ValueError):
    """A key of a record type other than the transaction log's: Kafka skips it."""

    def __init__(self, version: int):
        super().__init__(f"unknown __transaction_state key version {version}")
        self.version = version


def encode_key(transactional_id: str) -> bytes:
    return _VERSION.pack(TRANSACTION_LOG_RECORD_TYPE) + TRANSACTION_LOG_KEY.codec(
        TRANSACTION_LOG_KEY_VERSION, "request").encode({"transactional_id": transactional_id})


def encode_value(fields: Mapping, version: int = TRANSACTION_LOG_VALUE_VERSION) -> bytes:
    """The value in ``version`` (fields not given take their defaults).

    As Kafka's TransactionLog.valueToBytes: an Empty transaction holds no
    partitions and writes them null; any other state writes a list."""
    fields = dict(fields)
    partitions = fields.get("transaction_partitions")
    if fields.get("transaction_status", 0) == TransactionState.EMPTY:
        if partitions:
            raise ValueError("an Empty transaction holds no partitions")
        fields["transaction_partitions"] = None
    elif partitions is None:
        fields["transaction_partitions"] = []
    return _VERSION.pack(version) + TRANSACTION_LOG_VALUE.codec(version, "request").encode(fields)


def decode_key(raw: bytes) -> str:
    """The transactional id; ``UnknownKeyVersion`` for a record to skip."""
    if len(raw) < 2:
        raise ValueError("a record key shorter than its version")
    (version,) = _VERSION.unpack_from(raw, 0)
    if version != TRANSACTION_LOG_RECORD_TYPE:
        raise UnknownKeyVersion(version)
    return TRANSACTION_LOG_KEY.codec(TRANSACTION_LOG_KEY_VERSION, "request").decode(
        raw[2:]).transactional_id


def decode_value(raw: bytes | None):
    """The value's fields (a mapping, also read by attribute), or None for a
    tombstone; a version newer than 1 is read as 1."""
    if raw is None:
        return None
    if len(raw) < 2:
        raise ValueError("a record value shorter than its version")
    (version,) = _VERSION.unpack_from(raw, 0)
    if version < TRANSACTION_LOG_VALUE.min_version:
        raise ValueError(f"TransactionLogValue version {version} does not exist")
    version = min(version, TRANSACTION_LOG_VALUE.max_version)
    return TRANSACTION_LOG_VALUE.codec(version, "request").decode(raw[2:])
