"""Errors the storage engine raises; the broker maps them to Kafka error codes."""

from protocol.records import CorruptRecordError


class StorageError(Exception):
    pass


class OffsetOutOfRangeError(StorageError):
    """OFFSET_OUT_OF_RANGE (1): below the log start offset or beyond the log end offset."""


class RecordTooLargeError(StorageError):
    """MESSAGE_TOO_LARGE (10): a batch bigger than max.message.bytes."""


class InvalidRecordError(StorageError):
    """CORRUPT_MESSAGE (2) / INVALID_RECORD (87): not a valid v2 batch."""


class KafkaStorageError(StorageError):
    """KAFKA_STORAGE_ERROR (56): the log dir went offline after an I/O error."""


class LogClosedError(StorageError):
    """The log was closed or deleted."""


__all__ = [
    "StorageError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "InvalidRecordError",
    "LogClosedError",
    "KafkaStorageError",
    "CorruptRecordError",
]
