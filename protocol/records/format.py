"""The record batch v2 layout (magic 2): CRC-32C, the constants and attribute
bits, the construct declarations (``BATCH_HEADER``, ``RECORD``,
``LEGACY_MESSAGE``), the fixed 61-byte header read and rewritten in place
(the hot path: produce and fetch never decode records), and the decoded
``Record`` and ``RecordBatch``.

CRC-32C comes from google-crc32c; importing this module fails if its C
implementation is not active, since the pure-Python fallback is about 2000x
slower and would silently cap the broker.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

from construct import Int8sb, Int16sb, Int32sb, Int32ub, Int64sb

from kcoord.protocol import compression
from kcoord.protocol.types import KArray, KBytes, KStruct, VarBytes, VarInt, VarLong, VarString

import google_crc32c

if google_crc32c.implementation != "c":  # pragma: no cover - depends on the wheel
    raise ImportError("google-crc32c is running its pure-Python fallback; install the C build")

_crc32c_value = google_crc32c.value
_crc32c_extend = google_crc32c.extend


# google-crc32c reads only ``bytes``: any other buffer is copied, in pieces of this
# size.  One copy of a whole megabyte batch would be a fresh allocation, which
# malloc serves with new pages (faulted in and zeroed) and returns at once: ten
# times the cost of the CRC itself.  Pieces this small reuse the same warm memory.
_CRC_PIECE = 64 * 1024


def crc32c(data) -> int:
    """CRC-32C of any bytes-like object, without copying ``bytes``."""
    if type(data) is bytes:
        return _crc32c_value(data)
    view = memoryview(data)
    if len(view) <= _CRC_PIECE:
        return _crc32c_value(bytes(view))
    crc = 0
    for start in range(0, len(view), _CRC_PIECE):
        crc = _crc32c_extend(crc, bytes(view[start:start + _CRC_PIECE]))
    return crc


# --- constants ------------------------------------------------------------------

LOG_OVERHEAD = 12  # int64 offset + int32 length
MAGIC_OFFSET = 16
RECORD_BATCH_OVERHEAD = 61
LEGACY_HEADER_SIZE = {0: 14, 1: 22}  # crc .. value length, i.e. the minimum message size

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # 0 CreateTime, 1 LogAppendTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_TIMESTAMP = -1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

# Byte offsets inside a v2 batch (DefaultRecordBatch.java).
_BASE_OFFSET_AT = 0
_LENGTH_AT = 8
_LEADER_EPOCH_AT = 12
_CRC_AT = 17
_ATTRIBUTES_AT = 21


class CorruptRecordError(ValueError):
    """Bytes that do not form a valid batch or message: bad size, magic, CRC or layout."""


# --- construct declarations -------------------------------------------------------


# The 61-byte record batch header (DefaultRecordBatch).  ``crc`` covers everything
# from ``attributes`` to the end of the batch.
BATCH_HEADER = KStruct(
    [
        ("base_offset", Int64sb, 0),
        ("batch_length", Int32sb, 0),
        ("partition_leader_epoch", Int32sb, -1),
        ("magic", Int8sb, 2),
        ("crc", Int32ub, 0),
        ("attributes", Int16sb, 0),
        ("last_offset_delta", Int32sb, 0),
        ("base_timestamp", Int64sb, NO_TIMESTAMP),
        ("max_timestamp", Int64sb, NO_TIMESTAMP),
        ("producer_id", Int64sb, NO_PRODUCER_ID),
        ("producer_epoch", Int16sb, -1),
        ("base_sequence", Int32sb, -1),
        ("records_count", Int32sb, 0),
    ]
)

RECORD_HEADER = KStruct([("key", VarString, ""), ("value", VarBytes, None)])

# One record after its zig-zag ``length`` prefix (DefaultRecord).
RECORD = KStruct(
    [
        ("attributes", Int8sb, 0),
        ("timestamp_delta", VarLong, 0),
        ("offset_delta", VarInt, 0),
        ("key", VarBytes, None),
        ("value", VarBytes, None),
        ("headers", KArray(RECORD_HEADER, varint=True), []),
    ]
)

# A legacy message after ``offset``, ``message_size`` and ``crc`` (CRC-32 covers it all).
LEGACY_MESSAGE = {
    0: KStruct(
        [
            ("magic", Int8sb, 0),
            ("attributes", Int8sb, 0),
            ("key", KBytes(compact=False, nullable=True), None),
            ("value", KBytes(compact=False, nullable=True), None),
        ]
    ),
    1: KStruct(
        [
            ("magic", Int8sb, 1),
            ("attributes", Int8sb, 0),
            ("timestamp", Int64sb, NO_TIMESTAMP),
            ("key", KBytes(compact=False, nullable=True), None),
            ("value", KBytes(compact=False, nullable=True), None),
        ]
    ),
}

# Control record key and value (EndTransactionMarker.java).
CONTROL_KEY = KStruct([("version", Int16sb, 0), ("type", Int16sb, 0)])
CONTROL_VALUE = KStruct([("version", Int16sb, 0), ("coordinator_epoch", Int32sb, 0)])

_batch_header_codec = BATCH_HEADER.compile()
_record_codec = RECORD.compile()
_legacy_codecs = {magic: s.compile() for magic, s in LEGACY_MESSAGE.items()}
_control_key_codec = CONTROL_KEY.compile()
_control_value_codec = CONTROL_VALUE.compile()

_parse_record = _record_codec.parsefunc
_build_record = _record_codec.buildfunc

COMPILED = {
    "batch_header": _batch_header_codec,
    "record": _record_codec,
    "legacy_v0": _legacy_codecs[0],
    "legacy_v1": _legacy_codecs[1],
    "control_key": _control_key_codec,
    "control_value": _control_value_codec,
}


# --- header-only access (hot path) -------------------------------------------------

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
_OFFSET_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


class _BatchHeaderFields(NamedTuple):
    """The 61-byte v2 batch header, field by field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int


class _BatchAttributes:
    """Accessors shared by a batch header and a decoded batch."""

    __slots__ = ()

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG else None


class BatchHeader(_BatchHeaderFields, _BatchAttributes):
    """The fixed header of a v2 batch, read without touching the records."""

    __slots__ = ()

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD


def batch_header(buf, pos: int = 0) -> BatchHeader:
    """The header of the v2 batch at ``pos`` (no validation beyond the length of ``buf``)."""
    if len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError("fewer bytes than a record batch header")
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def entry_size(buf, pos: int = 0) -> int:
    """Total size of the batch or legacy entry at ``pos`` (offset and length included)."""
    (length,) = _INT32.unpack_from(buf, pos + 8)
    return length + LOG_OVERHEAD


def entry_magic(buf, pos: int = 0) -> int:
    return buf[pos + MAGIC_OFFSET]


def crc_valid(buf, pos: int = 0, size: int | None = None) -> bool:
    """Whether the CRC-32C of the v2 batch at ``pos`` matches its content."""
    if size is None:
        size = entry_size(buf, pos)
    (stored,) = _UINT32.unpack_from(buf, pos + _CRC_AT)
    return crc32c(memoryview(buf)[pos + _ATTRIBUTES_AT : pos + size]) == stored


def set_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Rewrite ``baseOffset`` in place; it is outside the CRC."""
    _INT64.pack_into(buf, pos + _BASE_OFFSET_AT, base_offset)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    """Rewrite ``partitionLeaderEpoch`` in place; it is outside the CRC."""
    _INT32.pack_into(buf, pos + _LEADER_EPOCH_AT, epoch)


def set_log_append_time(buf: bytearray, pos: int, timestamp: int) -> None:
    """Turn the batch at ``pos`` into LogAppendTime with ``timestamp``; recomputes its CRC."""
    header = batch_header(buf, pos)
    struct.pack_into(">h", buf, pos + _ATTRIBUTES_AT, header.attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + 35, timestamp)
    _rewrite_crc(buf, pos, header.size)


def set_max_timestamp(buf: bytearray, pos: int, timestamp: int) -> None:
    """Set the batch's ``maxTimestamp`` (type unchanged); recomputes its CRC."""
    header = batch_header(buf, pos)
    _INT64.pack_into(buf, pos + 35, timestamp)
    _rewrite_crc(buf, pos, header.size)


def _rewrite_crc(buf: bytearray, pos: int, size: int) -> None:
    crc = crc32c(memoryview(buf)[pos + _ATTRIBUTES_AT : pos + size])
    _UINT32.pack_into(buf, pos + _CRC_AT, crc)


def iter_entries(buf, *, partial_ok: bool = False) -> Iterator[tuple[int, int, int]]:
    """Yield ``(position, size, magic)`` for every entry of a record set.

    A truncated last entry is a ``CorruptRecordError`` unless ``partial_ok``
    (fetch responses may end with a partial batch, which readers skip).
    """
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < LOG_OVERHEAD + 5:
            if partial_ok:
                return
            raise CorruptRecordError(f"{end - pos} stray bytes at the end of a record set")
        (length,) = _INT32.unpack_from(buf, pos + 8)
        size = length + LOG_OVERHEAD
        magic = buf[pos + MAGIC_OFFSET]
        if magic not in (0, 1, 2):
            raise CorruptRecordError(f"invalid magic {magic} at position {pos}")
        minimum = RECORD_BATCH_OVERHEAD if magic == 2 else LOG_OVERHEAD + LEGACY_HEADER_SIZE[magic]
        if size < minimum:
            raise CorruptRecordError(f"entry of {size} bytes at position {pos} is too small")
        if pos + size > end:
            if partial_ok:
                return
            raise CorruptRecordError(f"truncated entry at position {pos}")
        yield pos, size, magic
        pos += size


def validate_batch(buf, pos: int, size: int) -> BatchHeader:
    """Check one v2 batch: layout, lengths and CRC; return its header."""
    header = batch_header(buf, pos)
    if header.magic != 2:
        raise CorruptRecordError(f"magic {header.magic} where a v2 batch was expected")
    if header.size != size or size < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError("batch length does not match")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptRecordError("negative last offset delta or record count")
    if header.compression > compression.ZSTD:
        raise CorruptRecordError(f"invalid compression codec {header.compression}")
    if not crc_valid(buf, pos, size):
        raise CorruptRecordError(f"CRC mismatch in the batch at offset {header.base_offset}")
    return header


# --- decoded records ---------------------------------------------------------------


@dataclass(slots=True)
class Record:
    """One record: absolute offset and timestamp, key, value, headers."""

    offset: int | None = None
    timestamp: int = NO_TIMESTAMP
    key: bytes | None = None
    value: bytes | None = None
    headers: list = field(default_factory=list)  # [(str, bytes | None)]


@dataclass(slots=True)
class RecordBatch(_BatchAttributes):
    """A decoded v2 batch (or a legacy entry expanded to its messages, magic 0/1)."""

    base_offset: int
    records: list
    magic: int = 2
    attributes: int = 0
    last_offset_delta: int = 0
    base_timestamp: int = NO_TIMESTAMP
    max_timestamp: int = NO_TIMESTAMP
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1
    base_sequence: int = -1
    partition_leader_epoch: int = -1
    crc: int = 0
    records_count: int = 0
