"""Reading records out of a v2 batch: the fast record decoder, the walk over
record boundaries, the (key, value) reader the coordinators load with, and
``decode_batch``."""

from __future__ import annotations

import io as _io


from kcoord.protocol import compression, wire
from kcoord.protocol.records.format import (
    CorruptRecordError,
    LOG_APPEND_TIME,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Record,
    RecordBatch,
    _parse_record,
    batch_header,
    entry_size,
    validate_batch,
)




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


def largest_record_body(data: bytes, count: int) -> int:
    """The largest body length (the length varint's value) among the first
    ``count`` records of a decompressed batch; ``CorruptRecordError`` where the
    lengths do not fit in ``data``."""
    largest = 0
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            length, pos = _zigzag_at(data, pos)
            if length < 0 or pos + length > end:
                raise CorruptRecordError("record length exceeds the batch")
            largest = max(largest, length)
            pos += length
    except IndexError:
        raise CorruptRecordError("record length exceeds the batch") from None
    return largest


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
    as ``count`` records of valid structure, headers included.  The hot loop of validating an
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
            # The headers, as DefaultRecord.readFrom reads them: a count, then a
            # key (never null) and a value (null allowed) for each.
            if data[pos] == 0:  # none: nearly every record
                pos += 1
            else:
                headers, pos = zz(data, pos)
                if headers < 0:
                    raise CorruptRecordError(f"Found invalid number of record headers {headers}")
                if headers > stop - pos:
                    raise CorruptRecordError(
                        f"Found invalid number of record headers. The number of record "
                        f"headers {headers} exceeds the remaining size of the record")
                for _h in range(headers):
                    b = data[pos]
                    if b < 0x80:
                        n, pos = (b >> 1) ^ -(b & 1), pos + 1
                    else:
                        n, pos = zz(data, pos)
                    if n < 0:
                        raise CorruptRecordError(f"Invalid negative header key size {n}")
                    b = data[pos + n]
                    if b < 0x80:
                        n, pos = (b >> 1) ^ -(b & 1), pos + n + 1
                    else:
                        n, pos = zz(data, pos + n)
                    if n > 0:
                        pos += n
            if pos != stop:
                raise CorruptRecordError("record length does not match its content")
            append((offset_delta, ts_delta, key_len, value_len))
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last record")
    return out


def key_values(data: bytes, count: int) -> list[tuple[bytes | None, bytes | None]]:
    """``(key, value)`` of each record of a decompressed batch, nothing else: the
    hot loop of replaying ``__consumer_offsets`` at start-up.  Varints of one
    byte (nearly all of them here) and the record length and offset delta in
    two (a record of 64 bytes or more, the 65th record of a batch on) are read
    inline."""
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
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                length, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                length, pos = zz(data, pos)
            stop = pos + length
            if length < 0 or stop > end:
                raise CorruptRecordError("record length exceeds the batch")
            pos += 1  # attributes
            b = data[pos]
            pos = pos + 1 if b < 0x80 else zz(data, pos, 63)[1]  # timestamp delta
            b = data[pos]
            if b < 0x80:  # offset delta
                pos += 1
            else:
                pos = pos + 2 if data[pos + 1] < 0x80 else zz(data, pos)[1]
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


def record_keys(data: bytes, count: int) -> list[tuple[int, bytes | None, bool]]:
    """``(offset delta, key, is a tombstone)`` of each record of a decompressed
    batch: what compaction decides by, without a ``Record`` per record (most
    batches it reads are dropped or copied whole, never rebuilt).  Varints of
    one byte and record and value lengths of two are read inline."""
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
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                length, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                length, pos = zz(data, pos)
            stop = pos + length
            if length < 0 or stop > end:
                raise CorruptRecordError("record length exceeds the batch")
            pos += 1  # attributes
            b = data[pos]
            pos = pos + 1 if b < 0x80 else zz(data, pos, 63)[1]  # timestamp delta
            b = data[pos]
            if b < 0x80:
                delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                delta, pos = zz(data, pos)
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
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                n, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                n, pos = zz(data, pos)
            if n > 0:
                pos += n
            if pos >= stop:  # the header count is still to come
                raise CorruptRecordError("record length does not match its content")
            append((delta, key, n < 0))
            pos = stop
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last record")
    return out


def batch_payload(buf, pos: int = 0, size: int | None = None, *,
                  header: BatchHeader | None = None) -> bytes:
    """The decompressed record bytes of the v2 batch at ``pos`` (``header``: its
    header, when the caller has read it already)."""
    if header is None:
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
