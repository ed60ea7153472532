"""Kafka record formats: record batch v2 (magic 2) and legacy message sets (magic 0/1).

A ``records`` field on the wire and a ``.log`` segment file hold the same thing:
a concatenation of entries that all start with ``int64 offset, int32 length``
and carry their magic byte at offset 16.

The layouts are declared with construct, in the project's compiled ``KStruct``
form (``BATCH_HEADER``, ``RECORD``, ``LEGACY_MESSAGE``); they are compiled once
at import and used to decode and encode records.  Produce and fetch never
decode records: they need only the fixed 61-byte batch header, which
``batch_header`` reads with one ``struct.unpack_from`` (a test checks it agrees
with the construct declaration), ``crc_valid`` checks, and ``set_base_offset`` /
``set_partition_leader_epoch`` rewrite in place (both fields lie outside the CRC).

CRC-32C comes from google-crc32c; importing this module fails if its C
implementation is not active, since the pure-Python fallback is about 2000x
slower and would silently cap the broker.
"""

from __future__ import annotations

import io as _io
import struct
import zlib
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple, Sequence

import google_crc32c
from construct import Int8sb, Int16sb, Int32sb, Int32ub, Int64sb

from protocol import compression, wire
from protocol.types import KArray, KBytes, KStruct, VarBytes, VarInt, VarLong, VarString

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


def _decode_record_stream(data: bytes, count: int, base_offset: int, base_ts: int, ts_override):
    stream = _io.BytesIO(data)
    read_varint = wire.read_varint
    records = []
    for _ in range(count):
        try:
            length = read_varint(stream)
            start = stream.tell()
            body = _parse_record(stream, None)
        except Exception as exc:  # construct, struct and wire errors alike
            raise CorruptRecordError(f"undecodable record: {exc}") from exc
        if stream.tell() - start != length:
            raise CorruptRecordError("record length does not match its content")
        records.append(
            Record(
                base_offset + body.offset_delta,
                ts_override if ts_override is not None else base_ts + body.timestamp_delta,
                body.key,
                body.value,
                [(h.key, h.value) for h in body.headers],
            )
        )
    if stream.tell() != len(data):
        raise CorruptRecordError(f"{len(data) - stream.tell()} bytes after the last record")
    return records


def _zigzag_at(data: bytes, pos: int, max_shift: int = 28) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > max_shift:
            raise CorruptRecordError("varint too long")


def decode_records_fast(data: bytes, count: int, base_offset: int, base_ts: int, ts_override):
    """The records of a decompressed batch, decoded by offsets into ``data``.

    The same layout as ``RECORD`` (a test checks both decoders agree); this one
    avoids a stream per record and serves compaction and timestamp lookups.
    """
    zz = _zigzag_at
    records = []
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            length, pos = zz(data, pos)
            stop = pos + length
            if length < 0 or stop > end:
                raise CorruptRecordError("record length exceeds the batch")
            pos += 1  # attributes
            ts_delta, pos = zz(data, pos, 63)
            offset_delta, pos = zz(data, pos)
            n, pos = zz(data, pos)
            if n >= 0:
                key = data[pos : pos + n]
                pos += n
            else:
                key = None
            n, pos = zz(data, pos)
            if n >= 0:
                value = data[pos : pos + n]
                pos += n
            else:
                value = None
            count_h, pos = zz(data, pos)
            if count_h < 0:
                raise CorruptRecordError("negative header count")
            headers = []
            for _h in range(count_h):
                n, pos = zz(data, pos)
                if n < 0:
                    raise CorruptRecordError("null header key")
                hkey = str(data[pos : pos + n], "utf-8", wire.JAVA_UTF8_UNBOUNDED)
                pos += n
                n, pos = zz(data, pos)
                if n >= 0:
                    hvalue = data[pos : pos + n]
                    pos += n
                else:
                    hvalue = None
                headers.append((hkey, hvalue))
            if pos != stop:
                raise CorruptRecordError("record length does not match its content")
            records.append(
                Record(
                    base_offset + offset_delta,
                    ts_override if ts_override is not None else base_ts + ts_delta,
                    key,
                    value,
                    headers,
                )
            )
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"invalid UTF-8 in a header key: {exc}") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last record")
    return records


def walk_records(data: bytes, count: int) -> list[tuple[int, int, int, int]]:
    """``(offset delta, timestamp delta, key length, value length)`` of each record
    of a decompressed batch, reading only lengths and varints (no objects).

    Raises ``CorruptRecordError`` where the records do not fill ``data`` exactly
    as ``count`` records of valid structure.  The hot loop of validating an
    append: varints of one byte, and record and value lengths of two or three
    bytes (values under 1 MiB), are read in line, longer ones by ``_zigzag_at``.
    """
    zz = _zigzag_at
    out = []
    append = out.append
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            elif data[pos + 2] < 0x80:
                raw = (b & 0x7F) | ((data[pos + 1] & 0x7F) << 7) | (data[pos + 2] << 14)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 3
            else:
                length, pos = zz(data, pos)
            stop = pos + length
            if length < 0 or stop > end:
                raise CorruptRecordError("record length exceeds the batch")
            b = data[pos + 1]  # after the attributes byte
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                ts_delta, pos = zz(data, pos + 1, 63)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = zz(data, pos)
            b = data[pos]
            if b < 0x80:
                key_len = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                key_len, pos = zz(data, pos)
            if key_len > 0:
                pos += key_len
            b = data[pos]
            if b < 0x80:
                value_len = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                value_len = (raw >> 1) ^ -(raw & 1)
                pos += 2
            elif data[pos + 2] < 0x80:
                raw = (b & 0x7F) | ((data[pos + 1] & 0x7F) << 7) | (data[pos + 2] << 14)
                value_len = (raw >> 1) ^ -(raw & 1)
                pos += 3
            else:
                value_len, pos = zz(data, pos)
            if value_len > 0:
                pos += value_len
            if pos > stop:
                raise CorruptRecordError("record length does not match its content")
            append((offset_delta, ts_delta, key_len, value_len))
            pos = stop
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last record")
    return out


def key_values(data: bytes, count: int) -> list[tuple[bytes | None, bytes | None]]:
    """``(key, value)`` of each record of a decompressed batch, nothing else: the
    hot loop of replaying ``__consumer_offsets`` at start-up.  Single-byte
    varints (nearly all of them here) are read inline."""
    zz = _zigzag_at
    out = []
    append = out.append
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, pos = zz(data, pos)
            stop = pos + length
            if length < 0 or stop > end:
                raise CorruptRecordError("record length exceeds the batch")
            _ts, pos = zz(data, pos + 1, 63)
            b = data[pos]
            pos = pos + 1 if b < 0x80 else zz(data, pos)[1]  # offset delta
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = zz(data, pos)
            if n >= 0:
                key = data[pos : pos + n]
                pos += n
            else:
                key = None
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = zz(data, pos)
            if n >= 0:
                value = data[pos : pos + n]
                pos += n
            else:
                value = None
            if pos >= stop:  # the header count is still to come
                raise CorruptRecordError("record length does not match its content")
            append((key, value))
            pos = stop  # headers, if any, are not needed
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last record")
    return out


def batch_payload(buf, pos: int = 0, size: int | None = None) -> bytes:
    """The decompressed record bytes of the v2 batch at ``pos``."""
    header = batch_header(buf, pos)
    if size is None:
        size = header.size
    raw = bytes(memoryview(buf)[pos + RECORD_BATCH_OVERHEAD : pos + size])
    return compression.decompress(header.compression, raw)


def decode_batch(buf, pos: int = 0, *, verify: bool = True, fast: bool = True) -> RecordBatch:
    """Decode the v2 batch at ``pos`` with its records.

    ``fast=False`` decodes through the compiled construct ``RECORD`` declaration.
    """
    size = entry_size(buf, pos)
    header = validate_batch(buf, pos, size) if verify else batch_header(buf, pos)
    try:
        payload = batch_payload(buf, pos, size)
        ts_override = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
        decoder = decode_records_fast if fast else _decode_record_stream
        records = decoder(
            payload, header.records_count, header.base_offset, header.base_timestamp, ts_override
        )
    except (wire.DecodeError, ValueError, OSError) as exc:
        if isinstance(exc, CorruptRecordError):
            raise
        raise CorruptRecordError(f"undecodable records: {exc}") from exc
    return RecordBatch(
        base_offset=header.base_offset,
        records=records,
        magic=2,
        attributes=header.attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        crc=header.crc,
        records_count=header.records_count,
    )


def _put_zigzag(out: bytearray, value: int, bits: int) -> None:
    """``write_varint`` (``bits`` 32) or ``write_varlong`` (64) into a bytearray."""
    if 0 <= value < 64:
        out.append(value << 1)  # the common case: one byte
        return
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f"{'varint' if bits == 32 else 'varlong'} out of range: {value}")
    value = ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_zigzag_bytes(out: bytearray, value) -> None:
    """``write_varint_bytes``: zig-zag length (-1 for null), then the bytes."""
    if value is None:
        out.append(1)  # zig-zag -1
    else:
        _put_zigzag(out, len(value), 32)
        out += value


def encode_records(records: Sequence[Record], base_offset: int, base_timestamp: int) -> bytes:
    """The uncompressed record section of a batch: each record in the layout of
    ``RECORD`` after its zig-zag length.  Written directly into one buffer (a
    test checks it gives the bytes of the construct declaration)."""
    out = bytearray()
    body = bytearray()
    put = _put_zigzag
    put_bytes = _put_zigzag_bytes
    for i, r in enumerate(records):
        body.clear()
        body.append(0)  # attributes
        put(body, r.timestamp - base_timestamp, 64)
        put(body, i if r.offset is None else r.offset - base_offset, 32)
        put_bytes(body, r.key)
        put_bytes(body, r.value)
        headers = r.headers
        put(body, len(headers), 32)
        for key, value in headers:
            put_bytes(body, key.encode("utf-8"))
            put_bytes(body, value)
        put(out, len(body), 32)
        out += body
    return bytes(out)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression_type: int = compression.NONE,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Encode one v2 batch.

    A record with ``offset=None`` takes the offset ``base_offset + index``.
    ``last_offset_delta`` may exceed the last record's delta (compacted batches keep
    their original last offset); ``delete_horizon_ms`` sets attribute bit 6 and
    stores the horizon in ``baseTimestamp`` as Kafka's log cleaner does.
    """
    timestamps = [r.timestamp for r in records]
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    else:
        base_ts = timestamps[0] if records else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max(timestamps) if records else NO_TIMESTAMP
    if last_offset_delta is None:
        if records:
            last = records[-1].offset
            last_offset_delta = len(records) - 1 if last is None else last - base_offset
        else:
            last_offset_delta = 0
    attributes = compression_type & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_FLAG
    if control:
        attributes |= CONTROL_FLAG
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG
    payload = encode_records(records, base_offset, base_ts if records else 0)
    if compression_type != compression.NONE:
        payload = compression.compress(compression_type, payload, compression_level)
    return _assemble(payload, base_offset, partition_leader_epoch, attributes, last_offset_delta,
                     base_ts, max_timestamp, producer_id, producer_epoch, base_sequence,
                     len(records))


def build_keyed_batch(records: Sequence[tuple[bytes | None, bytes | None]], *, base_offset: int,
                      timestamp: int, partition_leader_epoch: int = -1) -> bytes:
    """``build_batch([Record(None, timestamp, key, value) ...], base_offset=...,
    partition_leader_epoch=...)`` for ``(key, value)`` records without headers,
    all at one timestamp (what the group coordinator writes), without a Record
    per record; a test checks both give the same bytes."""
    if not records:
        return build_batch([], base_offset=base_offset,
                           partition_leader_epoch=partition_leader_epoch)
    out = bytearray()
    body = bytearray()
    put = _put_zigzag
    put_bytes = _put_zigzag_bytes
    for i, (key, value) in enumerate(records):
        body.clear()
        body += b"\x00\x00"  # attributes, timestamp delta 0
        put(body, i, 32)
        put_bytes(body, key)
        put_bytes(body, value)
        body.append(0)  # no headers
        put(out, len(body), 32)
        out += body
    count = len(records)
    return _assemble(bytes(out), base_offset, partition_leader_epoch, 0, count - 1, timestamp,
                     timestamp, NO_PRODUCER_ID, -1, -1, count)


_HEADER_DEFAULTS = {name: default for name, _sub, default in BATCH_HEADER.fields}
# The header in two parts: up to the CRC, and what the CRC covers.
_HEADER_TO_CRC = struct.Struct(">qiibI")
_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")
assert _HEADER_TO_CRC.size == _ATTRIBUTES_AT
assert _HEADER.size == _ATTRIBUTES_AT + _HEADER_AFTER_CRC.size


def assemble_batch(payload: bytes, **header) -> bytes:
    """A batch from an already encoded (and compressed) record section.

    ``header`` names fields of ``BATCH_HEADER`` (the others take its
    defaults); magic, length and CRC are always computed."""
    if not header.keys() <= _HEADER_DEFAULTS.keys():
        raise wire.UnknownFieldError(
            f"unknown field(s) {sorted(header.keys() - _HEADER_DEFAULTS.keys())}")
    fields = _HEADER_DEFAULTS | header
    return _assemble(payload, fields["base_offset"], fields["partition_leader_epoch"],
                     fields["attributes"], fields["last_offset_delta"], fields["base_timestamp"],
                     fields["max_timestamp"], fields["producer_id"], fields["producer_epoch"],
                     fields["base_sequence"], fields["records_count"])


def _assemble(payload, base_offset, partition_leader_epoch, attributes, last_offset_delta,
              base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
              records_count) -> bytes:
    covered = _HEADER_AFTER_CRC.pack(attributes, last_offset_delta, base_timestamp,
                                     max_timestamp, producer_id, producer_epoch, base_sequence,
                                     records_count)
    crc = _crc32c_extend(_crc32c_value(covered), payload if type(payload) is bytes
                         else bytes(payload))
    start = _HEADER_TO_CRC.pack(base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
                                partition_leader_epoch, 2, crc)
    return b"".join((start, covered, payload))


def empty_batch(
    *,
    base_offset: int,
    last_offset_delta: int,
    timestamp: int,
    attributes: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A batch with no records that still spans its offsets (DefaultRecordBatch.writeEmptyHeader)."""
    return assemble_batch(
        b"",
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes & ~COMPRESSION_MASK,
        last_offset_delta=last_offset_delta,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=0,
    )


def build_control_batch(
    marker: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """An end-transaction marker: a transactional control batch of one record."""
    key = _control_key_codec.build({"version": 0, "type": marker})
    value = _control_value_codec.build({"version": 0, "coordinator_epoch": coordinator_epoch})
    return build_batch(
        [Record(base_offset, timestamp, key, value)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def decode_control_record(record: Record) -> tuple[int, int]:
    """``(marker type, coordinator epoch)`` of a control record."""
    key = _control_key_codec.parse(record.key)
    coordinator_epoch = -1
    if record.value is not None and len(record.value) >= 6:
        coordinator_epoch = _control_value_codec.parse(record.value).coordinator_epoch
    return key.type, coordinator_epoch


# --- legacy message sets (magic 0 and 1) -----------------------------------------


def _legacy_entry(offset: int, magic: int, attributes: int, timestamp: int, key, value) -> bytes:
    body = {"magic": magic, "attributes": attributes, "key": key, "value": value}
    if magic >= 1:  # magic 0 messages have no timestamp
        body["timestamp"] = timestamp
    message = _legacy_codecs[magic].build(body)
    crc = zlib.crc32(message) & 0xFFFFFFFF
    return _OFFSET_LENGTH.pack(offset, len(message) + 4) + _UINT32.pack(crc) + message


def build_legacy(
    records: Sequence[Record],
    *,
    magic: int,
    base_offset: int = 0,
    compression_type: int = compression.NONE,
    timestamp_type: int = CREATE_TIME,
) -> bytes:
    """Encode a legacy message set; compressed sets become one wrapper message.

    Record offsets default to ``base_offset + index``.  In magic 1 the inner
    offsets of a wrapper are relative and the wrapper carries the absolute
    offset of its last message; in magic 0 the inner offsets are absolute
    (AbstractLegacyRecordBatch.java).
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    if compression_type == compression.ZSTD:
        raise compression.UnsupportedCodecError("zstd needs magic 2")
    ts_attr = TIMESTAMP_TYPE_MASK if (magic == 1 and timestamp_type == LOG_APPEND_TIME) else 0
    offsets = [base_offset + i if r.offset is None else r.offset for i, r in enumerate(records)]
    if compression_type == compression.NONE:
        return b"".join(
            _legacy_entry(o, magic, ts_attr, r.timestamp, r.key, r.value)
            for o, r in zip(offsets, records)
        )
    inner = b"".join(
        _legacy_entry(
            (o - offsets[0]) if magic == 1 else o, magic, 0, r.timestamp, r.key, r.value
        )
        for o, r in zip(offsets, records)
    )
    if compression_type == compression.LZ4 and magic == 0:
        payload = lz4_compress_broken_checksum(inner)
    else:
        payload = compression.compress(compression_type, inner)
    wrapper_ts = max((r.timestamp for r in records), default=NO_TIMESTAMP)
    return _legacy_entry(
        offsets[-1], magic, compression_type | ts_attr, wrapper_ts, None, payload
    )


def decode_legacy_entry(buf, pos: int = 0, *, verify: bool = True) -> RecordBatch:
    """Decode the legacy entry at ``pos``: a message, or a wrapper and its inner messages."""
    (offset, size) = _OFFSET_LENGTH.unpack_from(buf, pos)
    end = pos + LOG_OVERHEAD + size
    if size < 4 + 10 or end > len(buf):
        raise CorruptRecordError("truncated legacy message")
    (stored_crc,) = _UINT32.unpack_from(buf, pos + LOG_OVERHEAD)
    body = bytes(memoryview(buf)[pos + LOG_OVERHEAD + 4 : end])
    if verify and zlib.crc32(body) & 0xFFFFFFFF != stored_crc:
        raise CorruptRecordError(f"CRC mismatch in the legacy message at offset {offset}")
    magic = body[0]
    if magic not in (0, 1):
        raise CorruptRecordError(f"invalid legacy magic {magic}")
    try:
        message = _legacy_codecs[magic].parse(body)
    except Exception as exc:
        raise CorruptRecordError(f"undecodable legacy message: {exc}") from exc
    attributes = message.attributes
    timestamp = message.get("timestamp", NO_TIMESTAMP) if magic == 1 else NO_TIMESTAMP
    log_append = magic == 1 and attributes & TIMESTAMP_TYPE_MASK
    codec = attributes & COMPRESSION_MASK
    batch = RecordBatch(
        base_offset=offset,
        records=[],
        magic=magic,
        attributes=attributes,
        max_timestamp=timestamp,
        crc=stored_crc,
    )
    if codec == compression.NONE:
        batch.records = [Record(offset, timestamp, message.key, message.value)]
        batch.base_timestamp = timestamp
        batch.records_count = 1
        return batch
    if codec == compression.ZSTD or codec > compression.ZSTD:
        raise CorruptRecordError(f"codec {codec} is not allowed in magic {magic}")
    if message.value is None:
        raise CorruptRecordError("compressed wrapper without a value")
    if codec == compression.LZ4 and magic == 0:
        inner = lz4_decompress_any_checksum(message.value)
    else:
        inner = compression.decompress(codec, message.value)
    inner_batches = [decode_legacy_entry(inner, p, verify=verify) for p, _s, _m in iter_entries(inner)]
    records = [r for b in inner_batches for r in b.records]
    if magic == 1 and records:
        # Inner offsets are relative; the wrapper holds the last absolute offset.
        # A wrapper offset of 0 comes from old librdkafka; Kafka then keeps them as they are.
        last_relative = records[-1].offset
        shift = offset - last_relative if offset != 0 else 0
        for r in records:
            r.offset += shift
            if log_append:
                r.timestamp = timestamp
    batch.records = records
    batch.records_count = len(records)
    if records:
        batch.base_offset = records[0].offset
        batch.last_offset_delta = records[-1].offset - records[0].offset
        batch.base_timestamp = records[0].timestamp
    return batch


def decode_record_set(buf, *, verify: bool = True, partial_ok: bool = False) -> list[RecordBatch]:
    """Decode every batch or legacy entry of a record set (magic dispatched per entry)."""
    out = []
    for pos, _size, magic in iter_entries(buf, partial_ok=partial_ok):
        if magic == 2:
            out.append(decode_batch(buf, pos, verify=verify))
        else:
            out.append(decode_legacy_entry(buf, pos, verify=verify))
    return out


def iter_records(buf, *, verify: bool = True) -> Iterator[Record]:
    """Every record of a record set, control records included."""
    for batch in decode_record_set(buf, verify=verify):
        yield from batch.records


def legacy_as_batch(buf) -> bytes:
    """A Produce v0-2 message set as the one v2 batch Kafka 3.x appends for it.

    LogValidator converts every message of the set (inner messages of
    wrappers included) into one batch with offsets 0..n-1, compressed with the
    codec of the last compressed wrapper (the producer's codec); the broker
    assigns the real offsets as for any client batch.  Messages flagged
    LogAppendTime keep the flag, so the validator refuses them as Kafka does.
    """
    records, codec, ts_type = [], compression.NONE, CREATE_TIME
    for pos, _size, magic in iter_entries(buf):
        if magic == 2:
            raise CorruptRecordError("a v2 batch in a legacy message set")
        entry = decode_legacy_entry(buf, pos)
        if entry.compression != compression.NONE:
            codec = entry.compression
        if entry.magic == 1 and entry.timestamp_type == LOG_APPEND_TIME:
            ts_type = LOG_APPEND_TIME
        records.extend(entry.records)
    if not records:
        raise CorruptRecordError("an empty legacy message set")
    converted = [Record(i, r.timestamp, r.key, r.value) for i, r in enumerate(records)]
    return build_batch(converted, compression_type=codec, timestamp_type=ts_type,
                       max_timestamp=max(r.timestamp for r in converted)
                       if ts_type == LOG_APPEND_TIME else None)


def down_convert(buf, magic: int, first_offset: int = 0) -> bytes:
    """Turn v2 batches into legacy messages of ``magic`` for old fetchers (Fetch
    v0-v3), batch by batch, as Kafka's RecordsUtil.downConvert does.

    Control batches are dropped and headers are lost.  An uncompressed batch
    keeps only its records from ``first_offset`` on (legacy messages are not
    batched); a compressed one becomes one wrapper.  zstd does not exist in
    magic 0/1: ``compression.UnsupportedCodecError``.
    """
    out = []
    for pos, size, m in iter_entries(buf, partial_ok=True):
        if m != 2:
            out.append(bytes(memoryview(buf)[pos : pos + size]))
            continue
        header = batch_header(buf, pos)
        if header.is_control:
            continue
        if header.compression == compression.ZSTD:
            raise compression.UnsupportedCodecError(
                "Down-conversion of zstandard-compressed batches is not supported")
        records = decode_batch(buf, pos).records
        if header.compression == compression.NONE:
            records = [r for r in records if r.offset >= first_offset]
        if records:
            out.append(build_legacy(records, magic=magic, compression_type=header.compression,
                                    timestamp_type=header.timestamp_type))
    return b"".join(out)


_MAX_CONVERTED_READ = 128 * 1024


def down_convert_for_fetch(buf, magic: int, first_offset: int) -> bytes:
    """What a Fetch v0-3 answer carries for ``buf``, as Kafka's
    LazyDownConversionRecords sends it.

    The size is decided before converting: the size of the v2 data, or of the
    first converted batch if that is larger (a client can then always read one
    whole message).  Converted messages beyond it are cut; a shortfall, or a
    zstd batch that cannot be converted, is filled with an "overflow" entry
    (offset -1 and a length past the end) that clients skip as a partial
    message.
    """
    entries = list(iter_entries(buf, partial_ok=True))
    if not entries:
        return b""
    converted = []
    for pos, size, _m in entries:
        try:
            converted.append(down_convert(bytes(memoryview(buf)[pos : pos + size]), magic,
                                          first_offset))
        except compression.UnsupportedCodecError:
            break
    first = next((c for c in converted if c), None)
    total = LOG_OVERHEAD if first is None else max(len(buf), len(first))
    out = bytearray(b"".join(converted)[:total])
    while len(out) < total:
        remaining = total - len(out)
        overflow = bytearray(max(LOG_OVERHEAD, min(remaining + 1, _MAX_CONVERTED_READ)))
        _OFFSET_LENGTH.pack_into(overflow, 0, -1, max(remaining + 1, RECORD_BATCH_OVERHEAD))
        out += overflow[:remaining]
    return bytes(out)


# --- LZ4 frames from Kafka 0.8/0.9 (magic 0) ----------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, used only for the few bytes of an LZ4 frame descriptor."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                (lane,) = struct.unpack_from("<I", data, pos + 4 * i)
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_descriptor_end(frame: bytes) -> int:
    flg = frame[4]
    return 4 + 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def lz4_compress_broken_checksum(data: bytes) -> bytes:
    """An LZ4 frame whose header checksum also covers the magic, as Kafka 0.8/0.9 wrote for magic 0."""
    frame = bytearray(compression.lz4_compress(data))
    end = _lz4_descriptor_end(frame)
    frame[end] = (xxh32(bytes(frame[0:end])) >> 8) & 0xFF
    return bytes(frame)


def lz4_decompress_any_checksum(data: bytes) -> bytes:
    """Read an LZ4 frame whose header checksum is either the standard or the Kafka 0.8 form."""
    frame = bytearray(data)
    if len(frame) > 7:
        end = _lz4_descriptor_end(frame)
        if end < len(frame):
            frame[end] = (xxh32(bytes(frame[4:end])) >> 8) & 0xFF
    return compression.lz4_decompress(bytes(frame))
