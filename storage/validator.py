"""The checks in front of every append, after Kafka's ``UnifiedLog.analyzeAndValidateRecords``
and ``LogValidator``; shared by Produce and the group coordinator.

For every batch (any origin): magic 2 (legacy message sets are up-converted
before they get here), a client's base offset 0, the size against
``max.message.bytes``, the CRC-32C.

Then, for appends that get their offsets here (``CLIENT`` and ``COORDINATOR``):

* a client sends one batch per partition ("Compressed outer record has more
  than one batch"); the coordinator may group several of its own;
* a client's batch: a positive record count equal to its offset range, no
  control batch, a sequence number when it carries a producer id;
* every record: well formed (the declared count fills the batch exactly), a key
  when the topic is compacted, a timestamp within
  ``message.timestamp.before.max.ms`` / ``after.max.ms`` of now (CreateTime
  topics), no LogAppendTime set by a producer; failing records are reported
  one by one (``record_errors``), as Produce v8+ answers them;
* offsets are assigned from the log end offset, the partition leader epoch is
  set, and LogAppendTime topics get the append time;
* a topic whose ``compression.type`` is not ``producer`` gets its batches
  recompressed (or decompressed) to that codec, as does a compressed batch
  whose inner offsets are not 0, 1, 2, ...; after a rebuild the batch is
  checked against ``max.message.bytes`` again, and any append against
  ``segment.bytes``.

``REPLICATION`` appends (batches that keep their offsets: copies, tools) only
get the first checks.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kcoord.protocol import compression
from kcoord.protocol.records import (
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    CorruptRecordError,
    batch_header,
    batch_payload,
    build_batch,
    build_keyed_batch,
    crc_valid,
    decode_batch,
    iter_entries,
    largest_record_body,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
    walk_records,
)
from kcoord.storage.config import LogConfig
from kcoord.storage.errors import (
    CorruptBatchError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UndecompressableBatchError,
)


class AppendOrigin(enum.Enum):
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"  # offsets kept as they are


@dataclass(slots=True)
class ValidatedAppend:
    records: bytearray | bytes  # the bytes to write
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime


def _java_record(offset: int, timestamp: int, key_len: int, value_len: int) -> str:
    return (f"DefaultRecord(offset={offset}, timestamp={timestamp}, key={max(key_len, 0)} bytes, "
            f"value={max(value_len, 0)} bytes)")


def validate_and_assign(buf: bytearray, *, tp: str, config: LogConfig, next_offset: int, now: int,
                        origin: AppendOrigin = AppendOrigin.CLIENT,
                        leader_epoch: int | None = None) -> ValidatedAppend:
    try:
        entries = list(iter_entries(buf))
    except CorruptRecordError as exc:
        raise CorruptBatchError(f"{exc} in topic partition {tp}") from exc
    if not entries:
        raise InvalidRecordError("Record batch has no batches at all")
    client = origin is AppendOrigin.CLIENT
    headers = []
    for pos, size, magic in entries:
        if magic != 2:
            raise InvalidRecordError(
                f"magic {magic} in topic partition {tp}: legacy message sets are up-converted first")
        header = batch_header(buf, pos)
        headers.append(header)
        if client and header.base_offset != 0:
            raise InvalidRecordError(
                f"The baseOffset of the record batch in the append to {tp} should be 0, "
                f"but it is {header.base_offset}")
        if size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append to {tp} is {size} bytes which exceeds "
                f"the maximum configured value of {config.max_message_bytes}.")
        if not crc_valid(buf, pos, size):
            raise CorruptBatchError(
                f"Record is corrupt (stored crc = {header.crc}) in topic partition {tp}.")
    if origin is AppendOrigin.REPLICATION:
        return _keep_offsets(buf, entries, next_offset, leader_epoch)
    if client and len(entries) > 1:
        raise InvalidRecordError("Compressed outer record has more than one batch")

    out = bytearray()
    offset = next_offset
    first_offset = next_offset
    max_ts, offset_of_max = NO_TIMESTAMP, next_offset
    append_time = now if config.log_append_time else -1
    target = None if config.compression_type == "producer" else \
        compression.BY_NAME.get(config.compression_type, compression.NONE)
    for (pos, size, _magic), header in zip(entries, headers):
        count = header.records_count
        if client:
            _check_client_batch(header, tp)
        try:
            if header.compression == compression.NONE:
                # Read in place: a megabyte copied per append is most of its cost.
                payload = memoryview(buf)[pos + RECORD_BATCH_OVERHEAD:pos + size]
            else:
                payload = batch_payload(buf, pos, size)
            walked = walk_records(payload, count)
            limit = config.max_decompressed_message_bytes
            if header.compression != compression.NONE and len(payload) > limit:
                # max.decompressed.message.bytes: a record's body once decompressed
                # (DefaultRecord.readFrom with LogValidator's maxRecordBodySize)
                largest = largest_record_body(payload, count)
                if largest > limit:
                    raise InvalidRecordError(f"Invalid record size: {largest} exceeds the "
                                             f"configured maximum record size of {limit}.")
        except compression.DecompressionError as exc:
            raise UndecompressableBatchError(f"{exc} in topic partition {tp}") from exc
        except (CorruptRecordError, ValueError, OSError, compression.UnsupportedCodecError) as exc:
            raise InvalidRecordError(f"{exc} in topic partition {tp}") from exc
        _check_records(header, walked, config, now, tp, offset)
        rebuild = (target is not None and header.compression != target
                   and not (header.is_control and header.compression == compression.NONE)) \
            or (header.compression != compression.NONE and count > 0
                and not all(w[0] == i for i, w in enumerate(walked)))
        last_delta = count - 1 if client else header.last_offset_delta
        if rebuild:
            batch = _rebuild(buf, pos, offset, header, target, config, append_time, leader_epoch)
            if len(batch) > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"Message batch size is {len(batch)} bytes in append topartition {tp} which "
                    f"exceeds the maximum configured size of {config.max_message_bytes}.")
            batch_max = batch_header(batch, 0).max_timestamp
        else:
            # The client's whole append is one batch: ``buf`` is already a private copy.
            batch = buf if size == len(buf) else bytearray(memoryview(buf)[pos:pos + size])
            set_base_offset(batch, 0, offset)
            if leader_epoch is not None:
                set_partition_leader_epoch(batch, 0, leader_epoch)
            if config.log_append_time and not header.is_control:
                set_log_append_time(batch, 0, now)
                batch_max = now
            elif header.timestamp_type == LOG_APPEND_TIME or not walked:
                batch_max = header.max_timestamp
            else:
                # LogValidator sets maxTimestamp from the records: the header's
                # value is the producer's word and checked by nothing.
                batch_max = header.base_timestamp + max(w[1] for w in walked)
                if batch_max != header.max_timestamp:
                    set_max_timestamp(batch, 0, batch_max)
        last = offset + last_delta
        if batch_max > max_ts:
            max_ts, offset_of_max = batch_max, last
        if out or len(entries) > 1:
            out += batch
        else:
            out = batch
        offset = last + 1
    if len(out) > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"Message batch size is {len(out)} bytes in append to partition {tp}, which exceeds "
            f"the maximum configured segment size of {config.segment_bytes}.")
    return ValidatedAppend(out, first_offset, offset - 1, max_ts, offset_of_max, append_time)


def own_batch(records, *, tp: str, config: LogConfig, next_offset: int, now: int,
              leader_epoch: int | None) -> ValidatedAppend | None:
    """``validate_and_assign(build_batch(...), origin=COORDINATOR)`` for the
    ``(key, value)`` records the broker writes itself, all timestamped ``now``,
    without decoding back the batch just built: the batch is built at its final
    offset and leader epoch (neither is covered by the CRC), which is all the
    validator would change.  Of its checks only the two sizes can fail such a
    batch; the others hold by construction.

    None where the log's config could make the validator change or refuse the
    batch (LogAppendTime, a ``compression.type`` to convert to, negative
    timestamp bounds, a record without key in a compacted log): the caller then
    takes the general path.  A test checks both paths give the same bytes, the
    same offsets and the same errors.
    """
    if not records or now < 0 or config.log_append_time \
            or config.message_timestamp_before_max_ms < 0 \
            or config.message_timestamp_after_max_ms < 0:
        return None
    if config.compression_type != "producer" and \
            compression.BY_NAME.get(config.compression_type, compression.NONE) != compression.NONE:
        return None
    if config.compact and any(key is None for key, _value in records):
        return None
    batch = build_keyed_batch(records, base_offset=next_offset, timestamp=now,
                              partition_leader_epoch=-1 if leader_epoch is None else leader_epoch)
    size = len(batch)
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"The record batch size in the append to {tp} is {size} bytes which exceeds "
            f"the maximum configured value of {config.max_message_bytes}.")
    if size > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"Message batch size is {size} bytes in append to partition {tp}, which exceeds "
            f"the maximum configured segment size of {config.segment_bytes}.")
    last = next_offset + len(records) - 1
    return ValidatedAppend(batch, next_offset, last, now, last, -1)


def rebase(checked: ValidatedAppend, shift: int) -> ValidatedAppend:
    """The same append moved ``shift`` offsets on: validated off the event loop
    against a log end offset that appends have since moved.  Records hold
    offset deltas and the CRC does not cover the base offset, so only the base
    offsets change."""
    if shift == 0:
        return checked
    buf = checked.records
    for pos, _size, _magic in iter_entries(buf):
        set_base_offset(buf, pos, batch_header(buf, pos).base_offset + shift)
    return ValidatedAppend(buf, checked.first_offset + shift, checked.last_offset + shift,
                           checked.max_timestamp, checked.offset_of_max_timestamp + shift,
                           checked.log_append_time)


def _keep_offsets(buf, entries, next_offset, leader_epoch) -> ValidatedAppend:
    first = None
    max_ts, offset_of_max = NO_TIMESTAMP, next_offset
    last = next_offset - 1
    for pos, _size, _magic in entries:
        header = batch_header(buf, pos)
        if header.base_offset <= last:
            raise InvalidRecordError(
                f"batch offset {header.base_offset} is not above the last offset {last}")
        if leader_epoch is not None:
            set_partition_leader_epoch(buf, pos, leader_epoch)
        if first is None:
            first = header.base_offset
        last = header.last_offset
        if header.max_timestamp > max_ts:
            max_ts, offset_of_max = header.max_timestamp, last
    return ValidatedAppend(buf, first, last, max_ts, offset_of_max, -1)


def _check_client_batch(header, tp: str) -> None:
    """LogValidator.validateBatch for batches from clients."""
    count_from_offsets = header.last_offset_delta + 1
    last = header.base_offset + header.last_offset_delta
    if count_from_offsets <= 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [{header.base_offset}, {last}] in topic "
            f"partition {tp}")
    if header.records_count <= 0:
        raise InvalidRecordError(
            f"Invalid reported count for record batch: {header.records_count} in topic "
            f"partition {tp}")
    if count_from_offsets != header.records_count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{header.base_offset}, {last}] and count of "
            f"records {header.records_count} in topic partition {tp}")
    if header.is_control:
        raise InvalidRecordError(
            f"Clients are not allowed to write control records in topic partition {tp}")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id} in topic partition {tp}")


def _java_long(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


def _check_records(header, walked, config: LogConfig, now: int, tp: str, base: int) -> None:
    """LogValidator.validateRecord: keys of compacted topics and timestamps."""
    errors: list[tuple[int, str]] = []
    timestamps = False
    create_time = not config.log_append_time
    lat_batch = header.timestamp_type == LOG_APPEND_TIME
    check_ts = create_time or lat_batch
    if not (config.compact or check_ts) or header.is_control:
        return
    for index, (offset_delta, ts_delta, key_len, value_len) in enumerate(walked):
        timestamp = header.max_timestamp if lat_batch else header.base_timestamp + ts_delta
        if config.compact and key_len < 0:
            errors.append((index, "Compacted topic cannot accept message without key in topic "
                                  f"partition {tp}"))
            continue
        if create_time and timestamp != NO_TIMESTAMP:
            if now - timestamp > config.message_timestamp_before_max_ms or \
                    timestamp - now > config.message_timestamp_after_max_ms:
                timestamps = True
                # Java long arithmetic: with a bound near Long.MAX_VALUE (3.x's
                # default) Kafka's message shows the wrapped value, and so does this one.
                low = _java_long(now - config.message_timestamp_before_max_ms)
                high = _java_long(now + config.message_timestamp_after_max_ms)
                errors.append((index, f"Timestamp {timestamp} of message with offset "
                                      f"{base + offset_delta} is out of range. The timestamp "
                                      f"should be within [{low}, {high}]"))
        elif lat_batch:
            timestamps = True
            record = _java_record(base + offset_delta, timestamp, key_len, value_len)
            errors.append((index, f"Invalid timestamp type in message {record}. Producer should "
                                  "not set timestamp type to LogAppendTime."))
    if not errors:
        return
    if timestamps:
        raise InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp", errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise InvalidRecordError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]", errors)


def _rebuild(buf, pos, base_offset, header, target, config, append_time, leader_epoch) -> bytes:
    """LogValidator.buildRecordsAndAssignOffsets: a new batch with fresh offsets and codec."""
    batch = decode_batch(buf, pos, verify=False)
    records = batch.records
    for i, record in enumerate(records):
        record.offset = base_offset + i
    codec = header.compression if target is None else target
    lat = config.log_append_time
    level = config.compression_level(compression.NAMES.get(codec, ""))
    return build_batch(
        records,
        base_offset=base_offset,
        compression_type=codec,
        timestamp_type=LOG_APPEND_TIME if lat else header.timestamp_type,
        max_timestamp=append_time if lat else None,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        control=header.is_control,
        partition_leader_epoch=header.partition_leader_epoch if leader_epoch is None else leader_epoch,
        compression_level=level,
    )
