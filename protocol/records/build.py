"""Writing v2 batches: records encoded with their zig-zag varints, a batch
assembled with its header and CRC, the coordinator's keyed batches, empty
and control (transaction marker) batches."""

from __future__ import annotations

import struct
from typing import Sequence


from kcoord.protocol import compression, wire
from kcoord.protocol.records.format import (
    BATCH_HEADER,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CREATE_TIME,
    DELETE_HORIZON_FLAG,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    Record,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    _ATTRIBUTES_AT,
    _HEADER,
    _control_key_codec,
    _control_value_codec,
    _crc32c_extend,
    _crc32c_value,
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
