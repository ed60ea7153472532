"""Errors the storage engine raises, each with the Kafka error code the broker answers."""

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import CorruptRecordError


class StorageError(Exception):
    code = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(StorageError):
    """Below the log start offset or beyond the log end offset."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class RecordTooLargeError(StorageError):
    """A batch bigger than max.message.bytes."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(StorageError):
    """An append bigger than segment.bytes."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class CorruptBatchError(StorageError):
    """A batch whose CRC or framing is wrong (CorruptRecordException)."""

    code = ErrorCode.CORRUPT_MESSAGE


class CorruptLogError(StorageError):
    """Bytes on disk that are not a valid batch where one should be: a damaged
    segment found by a reader that must not skip anything."""

    code = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, message: str, *, offset: int, segment: int, position: int,
                 bytes_after: int):
        super().__init__(message)
        self.offset = offset
        self.segment = segment
        self.position = position
        self.bytes_after = bytes_after


class InvalidRecordError(StorageError):
    """Not a valid batch or record for this log (InvalidRecordException).

    ``record_errors`` lists ``(batch index, message)`` of the records that
    failed, when the failure is about records (Produce v8+ reports them).
    """

    code = ErrorCode.INVALID_RECORD

    def __init__(self, message: str, record_errors: list[tuple[int, str]] | None = None):
        super().__init__(message)
        self.record_errors = record_errors or []


class UndecompressableBatchError(StorageError):
    """A batch whose records its codec cannot decompress (Kafka: the codec's
    KafkaException, answered UNKNOWN_SERVER_ERROR)."""


class InvalidTimestampError(InvalidRecordError):
    """A record timestamp outside the topic's bounds (InvalidTimestampException)."""

    code = ErrorCode.INVALID_TIMESTAMP


class KafkaStorageError(StorageError):
    """The log dir went offline after an I/O error."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class LogClosedError(StorageError):
    """The log was closed or deleted."""


__all__ = [
    "StorageError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "RecordBatchTooLargeError",
    "CorruptBatchError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "UndecompressableBatchError",
    "LogClosedError",
    "KafkaStorageError",
    "CorruptRecordError",
]


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer's batch does not follow its last sequence number."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError):
    """A batch from an older epoch of a producer than the log has seen."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(StorageError):
    """A producer's batch that does not fit its transaction: a plain batch while
    its transaction is open, or data of a transaction the coordinator does not
    know of (InvalidTxnStateException)."""

    code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError):
    """A marker from a coordinator epoch older than the partition has seen."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED
