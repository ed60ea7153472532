"""Legacy message sets (magic 0 and 1): building and reading them, up-conversion
to a v2 batch on append and down-conversion for old fetchers, as Kafka 3.x."""

from __future__ import annotations

import zlib
from typing import Iterator, Sequence


from kcoord.protocol import compression
from kcoord.protocol.records.build import (
    build_batch,
)
from kcoord.protocol.compression import lz4_compress_broken_checksum, lz4_decompress_any_checksum
from kcoord.protocol.records.decode import (
    decode_batch,
)
from kcoord.protocol.records.format import (
    COMPRESSION_MASK,
    CREATE_TIME,
    CorruptRecordError,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    Record,
    RecordBatch,
    TIMESTAMP_TYPE_MASK,
    _OFFSET_LENGTH,
    _UINT32,
    _legacy_codecs,
    batch_header,
    iter_entries,
)




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
    first batch converted alone if that is larger (a client can then always read
    one whole message).  After that first batch (Kafka's iterator steps over one
    batch for it), the rest is converted in chunks of up to 128 KiB of v2 data;
    a chunk holding a zstd batch fails as a whole.  Converted messages beyond
    the size are cut; a shortfall, or the failed chunk, is filled with an
    "overflow" entry (offset -1 and a length past the end) that clients skip as
    a partial message.  A zstd batch met before any converted one:
    ``compression.UnsupportedCodecError`` (the partition's error).
    """
    entries = list(iter_entries(buf, partial_ok=True))
    if not entries:
        return b""
    view = memoryview(buf)

    def convert(chunk) -> bytes:
        return down_convert(b"".join(view[pos:pos + size] for pos, size, _m in chunk), magic,
                            first_offset)

    first = b""
    for entry in entries:
        first = convert([entry])
        if first:
            break
    total = max(len(buf), len(first)) if first else LOG_OVERHEAD
    out = bytearray(first)
    rest = entries[1:] if first else []
    i = 0
    while len(out) < total and i < len(rest):
        chunk, read = [rest[i]], rest[i][1]
        i += 1
        while i < len(rest) and read + rest[i][1] <= _MAX_CONVERTED_READ:
            chunk.append(rest[i])
            read += rest[i][1]
            i += 1
        try:
            out += convert(chunk)
        except compression.UnsupportedCodecError:
            break
    del out[total:]
    while len(out) < total:
        remaining = total - len(out)
        overflow = bytearray(max(LOG_OVERHEAD, min(remaining + 1, _MAX_CONVERTED_READ)))
        _OFFSET_LENGTH.pack_into(overflow, 0, -1, max(remaining + 1, RECORD_BATCH_OVERHEAD))
        out += overflow[:remaining]
    return bytes(out)
