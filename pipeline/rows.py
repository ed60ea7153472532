"""The three row shapes the pipeline reads from segments, as Arrow record batches.

* ``records``: the records of topic partitions (control batches skipped);
* ``offsets``: the decoded records of ``__consumer_offsets``: offset commits
  and classic group metadata (record types of the new protocols are skipped,
  as the broker skips them);
* ``batches``: one row per batch, from its header alone (offsets, timestamps,
  sizes): what log end offsets and lag over time need, without decoding records.

Decoding uses the broker's own decoders (``protocol.records``,
``protocol.group_records``).  Each shape has its Arrow schema and the Spark
DDL string of the same columns.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from pipeline.segments import Split, read_split
from protocol import group_records as G

ROWS_PER_BATCH = 65_536

_TOPIC_PARTITIONS = pa.list_(pa.struct([("topic", pa.string()),
                                        ("partitions", pa.list_(pa.int32()))]))
_MEMBER = pa.struct([
    ("member_id", pa.string()),
    ("group_instance_id", pa.string()),
    ("client_id", pa.string()),
    ("client_host", pa.string()),
    ("rebalance_timeout", pa.int32()),
    ("session_timeout", pa.int32()),
    ("subscription", pa.binary()),
    ("assignment", pa.binary()),
    ("subscribed_topics", pa.list_(pa.string())),
    ("assigned_partitions", _TOPIC_PARTITIONS),
])

RECORDS = pa.schema([
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.int64()),
    ("timestamp_type", pa.int32()),  # 0 CreateTime, 1 LogAppendTime (as Spark's Kafka source)
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
])

OFFSETS = pa.schema([
    ("source_partition", pa.int32()),  # the __consumer_offsets partition
    ("source_offset", pa.int64()),
    ("timestamp", pa.int64()),
    ("record_type", pa.string()),  # offset_commit | group_metadata
    ("group", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("tombstone", pa.bool_()),
    ("committed_offset", pa.int64()),
    ("leader_epoch", pa.int32()),
    ("metadata", pa.string()),
    ("commit_timestamp", pa.int64()),
    ("expire_timestamp", pa.int64()),
    ("protocol_type", pa.string()),
    ("protocol", pa.string()),
    ("generation", pa.int32()),
    ("leader", pa.string()),
    ("state_timestamp", pa.int64()),
    ("members", pa.list_(_MEMBER)),
])

BATCHES = pa.schema([
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("base_offset", pa.int64()),
    ("last_offset", pa.int64()),
    ("max_timestamp", pa.int64()),
    ("records", pa.int32()),
    ("bytes", pa.int32()),
    ("segment", pa.int64()),  # base offset of the segment file
])

SHAPES = {"records": RECORDS, "offsets": OFFSETS, "batches": BATCHES}


def spark_ddl(schema: pa.Schema) -> str:
    """The Spark DDL string of an Arrow schema of the types used here."""
    return ", ".join(f"`{f.name}` {_ddl_type(f.type)}" for f in schema)


def _ddl_type(t: pa.DataType) -> str:
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"`{t.field(i).name}`: {_ddl_type(t.field(i).type)}"
                                     for i in range(t.num_fields)) + ">"
    if pa.types.is_list(t):
        return f"array<{_ddl_type(t.value_type)}>"
    return {pa.string(): "string", pa.binary(): "binary", pa.int32(): "int",
            pa.int64(): "bigint", pa.bool_(): "boolean"}[t]


class _Columns:
    """Column lists filled row by row and cut into Arrow record batches."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.columns = [[] for _ in schema]
        self.append = [c.append for c in self.columns]

    def __len__(self) -> int:
        return len(self.columns[0])

    def batch(self) -> pa.RecordBatch:
        arrays = [pa.array(col, type=f.type) for col, f in zip(self.columns, self.schema)]
        for col in self.columns:
            col.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _chunks(cols: _Columns, rows: Iterator[None]) -> Iterator[pa.RecordBatch]:
    for _ in rows:
        if len(cols) >= ROWS_PER_BATCH:
            yield cols.batch()
    if len(cols):
        yield cols.batch()


def read(shape: str, split: Split, stats: dict | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of ``shape`` in a split, as Arrow record batches."""
    cols = _Columns(SHAPES[shape])
    fill = {"records": _records, "offsets": _offsets, "batches": _batches}[shape]
    return _chunks(cols, fill(split, cols.append, stats))


def _records(split: Split, a, stats) -> Iterator[None]:
    topic, partition = split.segment.topic, split.segment.partition
    for entry in read_split(split, stats=stats):
        batch = entry.decode()
        if batch.magic == 2 and batch.is_control:
            continue
        ts_type = batch.timestamp_type
        for r in batch.records:
            a[0](topic)
            a[1](partition)
            a[2](r.offset)
            a[3](r.timestamp)
            a[4](ts_type)
            a[5](r.key)
            a[6](r.value)
            a[7]([{"key": k, "value": v} for k, v in r.headers])
        yield


def _batches(split: Split, a, stats) -> Iterator[None]:
    topic, partition, segment = split.segment.topic, split.segment.partition, split.segment.base_offset
    for entry in read_split(split, stats=stats):
        if entry.magic == 2:
            h = entry.header()
            base, last, max_ts, count = h.base_offset, h.last_offset, h.max_timestamp, h.records_count
        else:  # a legacy entry: its offset is the last one it holds
            batch = entry.decode()
            records = batch.records
            base = records[0].offset if records else batch.base_offset
            last = records[-1].offset if records else batch.base_offset
            max_ts = max((r.timestamp for r in records), default=-1)
            count = len(records)
        a[0](topic)
        a[1](partition)
        a[2](base)
        a[3](last)
        a[4](max_ts)
        a[5](count)
        a[6](len(entry.data))
        a[7](segment)
        yield


def _strings(decode, raw: bytes, field: str):
    try:
        return decode(raw)[field]
    except Exception:  # not the consumer protocol, or bytes it cannot read
        return None


def member_row(m, protocol_type: str) -> dict:
    consumer = protocol_type == "consumer"
    assignment = _strings(G.consumer_assignment, m.assignment, "assigned_partitions") \
        if consumer else None
    return {
        "member_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "rebalance_timeout": m.rebalance_timeout,
        "session_timeout": m.session_timeout,
        "subscription": m.subscription,
        "assignment": m.assignment,
        "subscribed_topics": _strings(G.consumer_subscription, m.subscription, "topics")
        if consumer else None,
        "assigned_partitions": None if assignment is None
        else [{"topic": t.topic, "partitions": list(t.partitions)} for t in assignment],
    }


_NO_COMMIT = (None, None, None, None, None)
_NO_GROUP = (None, None, None, None, None, None)


def _offsets(split: Split, a, stats) -> Iterator[None]:
    source = split.segment.partition
    unreadable = 0
    for entry in read_split(split, stats=stats):
        batch = entry.decode()
        if batch.magic == 2 and batch.is_control:
            continue
        for r in batch.records:
            if r.key is None:
                continue
            try:
                kind, key = G.decode_key(r.key)
                value = G.decode_value(kind, r.value)
            except G.UnknownRecordType:
                continue
            except Exception:  # an undecodable record costs itself only
                unreadable += 1
                continue
            a[0](source)
            a[1](r.offset)
            a[2](r.timestamp)
            a[3](kind)
            a[4](key.group)
            a[7](value is None)
            if kind == G.OFFSET_COMMIT:
                a[5](key.topic)
                a[6](key.partition)
                commit = _NO_COMMIT if value is None else (
                    value.offset, value.leader_epoch, value.metadata,
                    value.commit_timestamp, value.expire_timestamp)
                group = _NO_GROUP
            else:
                a[5](None)
                a[6](None)
                commit = _NO_COMMIT
                group = _NO_GROUP if value is None else (
                    value.protocol_type, value.protocol, value.generation, value.leader,
                    value.current_state_timestamp,
                    [member_row(m, value.protocol_type) for m in value.members])
            for i, v in enumerate(commit, 8):
                a[i](v)
            for i, v in enumerate(group, 13):
                a[i](v)
        yield
    if stats is not None and unreadable:
        stats["unreadable"] = stats.get("unreadable", 0) + unreadable
