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

The package is split along the format's seams: ``format`` (the layout, the
header access, CRC-32C), ``decode`` (reading records), ``build`` (writing
batches) and ``legacy`` (magic 0 and 1); this module is their interface.
"""

from __future__ import annotations

from kcoord.protocol.records.format import (
    BATCH_HEADER,
    BatchHeader,
    COMPILED,
    COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_FLAG,
    CONTROL_KEY,
    CONTROL_VALUE,
    CREATE_TIME,
    CorruptRecordError,
    DELETE_HORIZON_FLAG,
    LEGACY_HEADER_SIZE,
    LEGACY_MESSAGE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORD,
    RECORD_BATCH_OVERHEAD,
    RECORD_HEADER,
    Record,
    RecordBatch,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    batch_header,
    crc32c,
    crc_valid,
    entry_magic,
    entry_size,
    iter_entries,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
    validate_batch,
)
from kcoord.protocol.records.decode import (
    batch_payload,
    decode_batch,
    decode_records_fast,
    key_values,
    record_keys,
    largest_record_body,
    walk_records,
)
from kcoord.protocol.records.build import (
    assemble_batch,
    build_batch,
    build_control_batch,
    build_keyed_batch,
    decode_control_record,
    empty_batch,
    encode_records,
)
from kcoord.protocol.records.legacy import (
    build_legacy,
    decode_legacy_entry,
    decode_record_set,
    down_convert,
    down_convert_for_fetch,
    iter_records,
    legacy_as_batch,
)

__all__ = [
    "BATCH_HEADER",
    "BatchHeader",
    "COMPILED",
    "COMPRESSION_MASK",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "CONTROL_FLAG",
    "CONTROL_KEY",
    "CONTROL_VALUE",
    "CREATE_TIME",
    "CorruptRecordError",
    "DELETE_HORIZON_FLAG",
    "LEGACY_HEADER_SIZE",
    "LEGACY_MESSAGE",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "NO_PRODUCER_ID",
    "NO_TIMESTAMP",
    "RECORD",
    "RECORD_BATCH_OVERHEAD",
    "RECORD_HEADER",
    "Record",
    "RecordBatch",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG",
    "batch_header",
    "crc32c",
    "crc_valid",
    "entry_magic",
    "entry_size",
    "iter_entries",
    "set_base_offset",
    "set_log_append_time",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "validate_batch",
    "batch_payload",
    "decode_batch",
    "decode_records_fast",
    "key_values",
    "record_keys",
    "largest_record_body",
    "walk_records",
    "assemble_batch",
    "build_batch",
    "build_control_batch",
    "build_keyed_batch",
    "decode_control_record",
    "empty_batch",
    "encode_records",
    "build_legacy",
    "decode_legacy_entry",
    "decode_record_set",
    "down_convert",
    "down_convert_for_fetch",
    "iter_records",
    "legacy_as_batch",
]
