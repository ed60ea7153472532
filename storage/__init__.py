"""The segment-log engine: Kafka's on-disk format for topic partitions and ``__consumer_offsets``.

Depends on ``protocol`` only, never on ``broker``.
"""

from kcoord.storage.config import LogConfig
from kcoord.storage.errors import (
    InvalidRecordError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from kcoord.storage.log import AppendInfo, PartitionLog, TimestampOffset

__all__ = [
    "AppendInfo",
    "InvalidRecordError",
    "LogClosedError",
    "LogConfig",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordTooLargeError",
    "StorageError",
    "TimestampOffset",
]
