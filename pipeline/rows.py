"""The three row shapes the pipeline reads from segments, as Arrow record batches.

* ``records``: the records of topic partitions (control batches skipped);
* ``offsets``: the decoded records of ``__consumer_offsets``: offset commits
  and classic group metadata (record types of the new protocols are skipped,
  as the broker skips them), and the markers of transactions that committed
  offsets; a split's commits, group records and markers come in separate
  Arrow batches, each in log order;
* ``batches``: one row per batch, from its header alone (offsets, timestamps,
  sizes): what log end offsets and lag over time need, without decoding records.

Decoding uses the broker's own decoders (``protocol.records``,
``protocol.group_records``).  Each shape has its Arrow schema and the Spark
DDL string of the same columns.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from kcoord.pipeline.segments import Split, read_split
from kcoord.protocol import group_records as G
from kcoord.protocol.records import decode_control_record

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

_GROUP_METADATA = pa.struct([
    ("protocol_type", pa.string()),
    ("protocol", pa.string()),
    ("generation", pa.int32()),
    ("leader", pa.string()),
    ("state_timestamp", pa.int64()),
    ("members", pa.list_(_MEMBER)),
])

RECORDS = pa.schema([
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.int64(), nullable=False),
    # 0 CreateTime, 1 LogAppendTime (as Spark's Kafka source)
    pa.field("timestamp_type", pa.int32(), nullable=False),
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
])

OFFSETS = pa.schema([
    pa.field("source_partition", pa.int32(), nullable=False),  # the __consumer_offsets partition
    pa.field("source_offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.int64(), nullable=False),
    # offset_commit | group_metadata | transaction_marker
    pa.field("record_type", pa.string(), nullable=False),
    ("group", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("tombstone", pa.bool_()),
    ("committed_offset", pa.int64()),
    ("leader_epoch", pa.int32()),
    ("metadata", pa.string()),
    ("commit_timestamp", pa.int64()),
    ("expire_timestamp", pa.int64()),
    # A group metadata record's fields (null for the other record types, and for a
    # group's tombstone).
    ("group_metadata", _GROUP_METADATA),
    # Transactional offset commits (Kafka's sendOffsetsToTransaction): the producer
    # id of a record written in a transaction, and the transaction markers
    # (record type "transaction_marker", marker "commit" or "abort") that decide
    # whether it counts.
    ("producer_id", pa.int64()),
    ("marker", pa.string()),
])

BATCHES = pa.schema([
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("base_offset", pa.int64(), nullable=False),
    pa.field("last_offset", pa.int64(), nullable=False),
    pa.field("max_timestamp", pa.int64(), nullable=False),
    pa.field("records", pa.int32(), nullable=False),
    pa.field("bytes", pa.int32(), nullable=False),
    # base offset of the segment file that held the batch when the read was planned
    pa.field("segment", pa.int64(), nullable=False),
])

SHAPES = {"records": RECORDS, "offsets": OFFSETS, "batches": BATCHES}


def spark_ddl(schema: pa.Schema) -> str:
    """The Spark DDL string of an Arrow schema of the types used here (a column that
    always has a value is NOT NULL: Spark then skips its null checks)."""
    return ", ".join(f"`{f.name}` {_ddl_type(f.type)}{'' if f.nullable else ' NOT NULL'}"
                     for f in schema)


def _ddl_type(t: pa.DataType) -> str:
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"`{t.field(i).name}`: {_ddl_type(t.field(i).type)}"
                                     for i in range(t.num_fields)) + ">"
    if pa.types.is_list(t):
        return f"array<{_ddl_type(t.value_type)}>"
    return {pa.string(): "string", pa.binary(): "binary", pa.int32(): "int",
            pa.int64(): "bigint", pa.bool_(): "boolean"}[t]


class _Rows:
    """Rows of some columns of a schema, gathered as tuples (as cheap as building a
    tuple per record can be) and turned into an Arrow record batch in one pass
    (Arrow reads the tuples as structs: no transposing in Python); the schema's
    other columns are constants of the split or null."""

    def __init__(self, schema: pa.Schema, names: tuple[str, ...], **constants):
        self.schema = schema
        self.index = {name: i for i, name in enumerate(names)}
        assert set(self.index) | set(constants) <= set(schema.names)
        self.gathered = pa.struct([schema.field(name) for name in names])
        self.constants = {name: pa.scalar(value, schema.field(name).type)
                          for name, value in constants.items()}
        self.rows: list[tuple] = []

    def batch(self) -> pa.RecordBatch:
        n = len(self.rows)
        columns = pa.array(self.rows, type=self.gathered).flatten()
        self.rows.clear()
        arrays = []
        for f in self.schema:
            i = self.index.get(f.name)
            if i is not None:
                arrays.append(columns[i])
            elif f.name in self.constants:
                arrays.append(pa.repeat(self.constants[f.name], n))
            else:
                arrays.append(pa.nulls(n, type=f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def read(shape: str, split: Split, stats: dict | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of ``shape`` in a split, as Arrow record batches (at most about
    ``ROWS_PER_BATCH`` rows each)."""
    fill, sinks = _SHAPES[shape](split)
    for _ in fill(split, *[sink.rows.append for sink in sinks], stats):
        for sink in sinks:
            if len(sink.rows) >= ROWS_PER_BATCH:
                yield sink.batch()
    for sink in sinks:
        if sink.rows:
            yield sink.batch()


def _records(split: Split, add, stats) -> Iterator[None]:
    for entry in read_split(split, stats=stats):
        batch = entry.decode()
        if batch.magic == 2 and batch.is_control:
            continue
        ts_type = batch.timestamp_type
        for r in batch.records:
            add((r.offset, r.timestamp, ts_type, r.key, r.value,
                 [{"key": k, "value": v} for k, v in r.headers]))
        yield


def _batches(split: Split, add, stats) -> Iterator[None]:
    for entry in read_split(split, stats=stats):
        if entry.magic == 2:
            h = entry.header()
            add((h.base_offset, h.last_offset, h.max_timestamp, h.records_count, len(entry.data)))
        else:  # a legacy entry: its offset is the last one it holds
            batch = entry.decode()
            records = batch.records
            add((records[0].offset if records else batch.base_offset,
                 records[-1].offset if records else batch.base_offset,
                 max((r.timestamp for r in records), default=-1), len(records), len(entry.data)))
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


TRANSACTION_MARKER = "transaction_marker"
_MARKERS = {0: "abort", 1: "commit"}


def _offsets(split: Split, commit, group, marker, stats) -> Iterator[None]:
    unreadable = 0
    for entry in read_split(split, stats=stats):
        batch = entry.decode()
        if batch.magic == 2 and batch.is_control:
            for r in batch.records:
                try:
                    kind = _MARKERS.get(decode_control_record(r)[0])
                except Exception:
                    kind = None
                if kind is None:
                    unreadable += 1
                    continue
                marker((r.offset, r.timestamp, batch.producer_id, kind))
            yield
            continue
        txn = batch.producer_id if batch.magic == 2 and batch.is_transactional else None
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
            if kind == G.OFFSET_COMMIT:
                if value is None:
                    commit((r.offset, r.timestamp, key.group, key.topic, key.partition, True,
                            None, None, None, None, None, txn))
                else:
                    commit((r.offset, r.timestamp, key.group, key.topic, key.partition, False,
                            value.offset, value.leader_epoch, value.metadata,
                            value.commit_timestamp, value.expire_timestamp, txn))
            elif kind != G.GROUP_METADATA:
                continue  # a consumer group's (KIP-848) records: not among the rows
            elif value is None:
                group((r.offset, r.timestamp, key.group, True, None, txn))
            else:
                group((r.offset, r.timestamp, key.group, False, {
                    "protocol_type": value.protocol_type,
                    "protocol": value.protocol,
                    "generation": value.generation,
                    "leader": value.leader,
                    "state_timestamp": value.current_state_timestamp,
                    "members": [member_row(m, value.protocol_type) for m in value.members],
                }, txn))
        yield
    if stats is not None and unreadable:
        stats["unreadable"] = stats.get("unreadable", 0) + unreadable


def _record_shape(split: Split):
    s = split.segment
    return _records, [_Rows(RECORDS, ("offset", "timestamp", "timestamp_type", "key", "value",
                                      "headers"), topic=s.topic, partition=s.partition)]


def _offsets_shape(split: Split):
    source = split.segment.partition
    return _offsets, [
        _Rows(OFFSETS, ("source_offset", "timestamp", "group", "topic", "partition", "tombstone",
                        "committed_offset", "leader_epoch", "metadata", "commit_timestamp",
                        "expire_timestamp", "producer_id"),
              source_partition=source, record_type=G.OFFSET_COMMIT),
        _Rows(OFFSETS, ("source_offset", "timestamp", "group", "tombstone", "group_metadata",
                        "producer_id"), source_partition=source, record_type=G.GROUP_METADATA),
        _Rows(OFFSETS, ("source_offset", "timestamp", "producer_id", "marker"),
              source_partition=source, record_type=TRANSACTION_MARKER),
    ]


def _batch_shape(split: Split):
    s = split.segment
    return _batches, [_Rows(BATCHES, ("base_offset", "last_offset", "max_timestamp", "records",
                                      "bytes"), topic=s.topic, partition=s.partition,
                            segment=s.base_offset)]


_SHAPES = {"records": _record_shape, "offsets": _offsets_shape, "batches": _batch_shape}
