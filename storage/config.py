"""Per-log configuration, with Kafka's topic property names and defaults.

The broker builds a ``LogConfig`` from a topic's configs with
``LogConfig.from_properties``; anything not given keeps Kafka's default
(LogConfig.java).  ``flush.policy`` is kcoord's own property: ``never`` (the
default, like Kafka's default of leaving flushes to the OS), ``batch`` (group
fsync before acknowledging) or ``always`` (fsync every append).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

DAY_MS = 24 * 60 * 60 * 1000
LONG_MAX = (1 << 63) - 1
TIMESTAMP_AFTER_MAX_MS = 3_600_000
MAX_DECOMPRESSED_MESSAGE_BYTES = 2_147_483_639  # the largest array the JVM allocates

FLUSH_POLICIES = ("never", "batch", "always")


def _policy(value) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        items = str(value).split(",")
    items = [v.strip().lower() for v in items if v.strip()]
    for item in items:
        if item not in ("delete", "compact"):
            raise ValueError(f"invalid cleanup.policy {value!r}")
    return tuple(items) or ("delete",)


def _flush(value) -> str:
    value = str(value).strip().lower()
    if value not in FLUSH_POLICIES:
        raise ValueError(f"flush.policy must be one of {FLUSH_POLICIES}, not {value!r}")
    return value


COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def _compression(value) -> str:
    value = str(value).strip().lower()
    if value not in COMPRESSION_TYPES:
        raise ValueError(f"invalid compression.type {value!r}")
    return value


def _timestamp_type(value) -> str:
    value = str(value).strip()
    if value not in ("CreateTime", "LogAppendTime"):
        raise ValueError(f"invalid message.timestamp.type {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    segment_index_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    cleanup_policy: tuple = ("delete",)
    delete_retention_ms: int = DAY_MS
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    max_decompressed_message_bytes: int = MAX_DECOMPRESSED_MESSAGE_BYTES
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    # Kafka 4.0 bounds it at an hour (KIP-1030; Long.MAX before)
    message_timestamp_after_max_ms: int = TIMESTAMP_AFTER_MAX_MS
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    segment_jitter_ms: int = 0
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    flush_policy: str = "never"

    # Kafka property name -> (attribute, parser)
    PROPERTIES = {
        "segment.bytes": ("segment_bytes", int),
        "segment.ms": ("segment_ms", int),
        "segment.index.bytes": ("segment_index_bytes", int),
        "retention.ms": ("retention_ms", int),
        "retention.bytes": ("retention_bytes", int),
        "index.interval.bytes": ("index_interval_bytes", int),
        "cleanup.policy": ("cleanup_policy", _policy),
        "delete.retention.ms": ("delete_retention_ms", int),
        "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float),
        "min.compaction.lag.ms": ("min_compaction_lag_ms", int),
        "max.compaction.lag.ms": ("max_compaction_lag_ms", int),
        "max.message.bytes": ("max_message_bytes", int),
        "max.decompressed.message.bytes": ("max_decompressed_message_bytes", int),
        "message.timestamp.type": ("message_timestamp_type", _timestamp_type),
        "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", int),
        "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", int),
        "compression.type": ("compression_type", _compression),
        "compression.gzip.level": ("compression_gzip_level", int),
        "compression.lz4.level": ("compression_lz4_level", int),
        "compression.zstd.level": ("compression_zstd_level", int),
        "segment.jitter.ms": ("segment_jitter_ms", int),
        "flush.messages": ("flush_messages", int),
        "flush.ms": ("flush_ms", int),
        "flush.policy": ("flush_policy", _flush),
    }

    def __post_init__(self):
        object.__setattr__(self, "cleanup_policy", _policy(self.cleanup_policy))
        _compression(self.compression_type)
        _flush(self.flush_policy)
        _timestamp_type(self.message_timestamp_type)
        if self.segment_bytes < 14:
            raise ValueError("segment.bytes is too small")
        if self.index_interval_bytes < 0:
            raise ValueError("index.interval.bytes must not be negative")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError("min.cleanable.dirty.ratio must be within [0, 1]")

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], base: "LogConfig | None" = None):
        """A config from Kafka property names; unknown names are ignored (the broker warns)."""
        changes = {}
        for name, value in props.items():
            spec = cls.PROPERTIES.get(name)
            if spec is None or value is None:
                continue
            attr, parse = spec
            changes[attr] = parse(value)
        return dataclasses.replace(base or cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        out = {}
        for name, (attr, _parse) in self.PROPERTIES.items():
            value = getattr(self, attr)
            out[name] = ",".join(value) if isinstance(value, tuple) else str(value)
        return out

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def compression_level(self, codec_name: str) -> int | None:
        """compression.<codec>.level for gzip, lz4 and zstd (snappy has none)."""
        return getattr(self, f"compression_{codec_name}_level", None)

    @property
    def max_segment_ms(self) -> int:
        """LogConfig.maxSegmentMs: a compacted log rolls by max.compaction.lag.ms too."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    def random_segment_jitter(self, rng) -> int:
        """LogConfig.randomSegmentJitter."""
        if self.segment_jitter_ms == 0:
            return 0
        return rng.randrange(1 << 31) % min(self.segment_jitter_ms, self.segment_ms)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"
