"""The pipeline's segment reader and row shapes, without Spark: splits at batch
boundaries, torn tails, every entry format, and the decoded ``__consumer_offsets``
records."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pyarrow as pa
import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from kcoord.pipeline import rows, segments
from kcoord.protocol import compression
from kcoord.protocol import group_records as G
from kcoord.protocol.records import (
    LOG_APPEND_TIME,
    Record,
    build_batch,
    build_control_batch,
    build_legacy,
)
from kcoord.storage.config import LogConfig
from kcoord.storage.log import PartitionLog
from kcoord.storage.validator import AppendOrigin

T0 = 1_700_000_000_000


def _segment(folder: Path, base: int, *entries: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{base:020d}.log"
    path.write_bytes(b"".join(entries))
    return path


def _table(shape: str, data_dirs, split_bytes=segments.SPLIT_BYTES, stats=None, topics=None):
    splits = segments.plan_splits([str(d) for d in data_dirs], topics, split_bytes)
    batches = [b for s in splits for b in rows.read(shape, s, stats)]
    return pa.Table.from_batches(batches, schema=rows.SHAPES[shape]).to_pylist(), splits


def _logged_topic(data_dir: Path, name: str, batches: int, per_batch: int = 7) -> list[tuple]:
    """A partition written by the storage engine (real indexes), returning the
    (offset, key, value) of every record."""
    log = PartitionLog(str(data_dir / f"{name}-0"), LogConfig(segment_bytes=256 << 10,
                                                              index_interval_bytes=1024))
    written = []
    for b in range(batches):
        recs = [Record(None, T0 + b, b"k%d-%d" % (b, i), os.urandom(40 + (b * 13 + i) % 90))
                for i in range(per_batch)]
        log.append(build_batch(recs), origin=AppendOrigin.CLIENT, now_ms=T0)
    log.close()
    offset = 0
    for b in range(batches):
        for i in range(per_batch):
            written.append(offset)
            offset += 1
    return written


@pytest.mark.parametrize("index", ["kept", "deleted", "garbage"])
def test_large_segments_split_at_batch_boundaries_and_every_record_is_read_once(tmp_path, index):
    offsets = _logged_topic(tmp_path, "big", batches=900)
    folder = tmp_path / "big-0"
    assert len([f for f in os.listdir(folder) if f.endswith(".log")]) > 1  # rolled segments
    for f in folder.glob("*.index"):
        if index == "deleted":
            f.unlink()
        elif index == "garbage":  # entries pointing into the middle of batches
            f.write_bytes(b"".join(struct.pack(">ii", i + 1, 37 + i * 1001) for i in range(200)))
    whole, whole_splits = _table("records", [tmp_path])
    cut, cut_splits = _table("records", [tmp_path], split_bytes=10_000)
    assert all(s.end > s.start for s in cut_splits)
    assert [r["offset"] for r in whole] == offsets
    assert cut == whole
    assert len(cut_splits) > 5 * len(whole_splits)
    # One split per segment file unless it is larger than the split size.
    logs = sorted(str(f) for f in folder.glob("*.log"))
    assert sorted(s.segment.path for s in whole_splits) == logs
    assert all((s.start, s.end) == (0, os.path.getsize(s.segment.path)) for s in whole_splits)
    for s in cut_splits:  # every cut is at the start of a batch
        with open(s.segment.path, "rb") as f:
            f.seek(s.start)
            head = f.read(17)
        assert head[16] == 2, s


def test_a_torn_or_corrupt_tail_ends_the_segment_and_what_precedes_is_read(tmp_path):
    good = build_batch([Record(None, T0, b"a", b"1"), Record(None, T0, b"b", b"2")])
    second = build_batch([Record(None, T0, b"c", b"3")], base_offset=2)
    folder = tmp_path / "t-0"
    path = _segment(folder, 0, good, second[: len(second) // 2])
    stats = {}
    got, _ = _table("records", [tmp_path], stats=stats)
    assert [(r["offset"], r["value"]) for r in got] == [(0, b"1"), (1, b"2")]
    assert stats == {"torn": 1}

    corrupt = bytearray(second)
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    path.write_bytes(good + bytes(corrupt))
    stats = {}
    got, _ = _table("records", [tmp_path], stats=stats)
    assert [r["offset"] for r in got] == [0, 1] and stats == {"torn": 1}

    path.write_bytes(good + second)
    stats = {}
    got, _ = _table("records", [tmp_path], stats=stats)
    assert [r["offset"] for r in got] == [0, 1, 2] and stats == {}


def test_a_batch_larger_than_the_read_window_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(segments, "READ_WINDOW", 4096)
    big = build_batch([Record(None, T0, b"k", os.urandom(20_000)), Record(None, T0, None, b"x")])
    small = build_batch([Record(None, T0, b"s", b"y")], base_offset=2)
    _segment(tmp_path / "t-0", 0, big, small)
    got, _ = _table("records", [tmp_path])
    assert [r["offset"] for r in got] == [0, 1, 2]
    assert len(got[0]["value"]) == 20_000 and got[2]["value"] == b"y"


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.SNAPPY,
                                   compression.LZ4, compression.ZSTD])
def test_records_of_every_codec_and_legacy_format_come_out_with_their_fields(tmp_path, codec):
    v2 = build_batch([Record(None, T0 + 5, b"key", b"value", [("h1", b"x"), ("h2", None)]),
                      Record(None, T0 + 9, None, None)], base_offset=0, compression_type=codec)
    appended = build_batch([Record(None, T0, b"k", b"v")], base_offset=2,
                           timestamp_type=LOG_APPEND_TIME, max_timestamp=T0 + 100)
    legacy_codec = compression.GZIP if codec == compression.ZSTD else codec  # zstd needs v2
    legacy0 = build_legacy([Record(None, -1, b"m0", b"zero")], magic=0, base_offset=3,
                           compression_type=legacy_codec)
    legacy1 = build_legacy([Record(None, T0 + 7, b"m1", b"one"), Record(None, T0 + 8, None, b"two")],
                           magic=1, base_offset=4, compression_type=legacy_codec)
    control = build_control_batch(0, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                  timestamp=T0, base_offset=6)
    _segment(tmp_path / "orders-3", 0, v2, appended, legacy0, legacy1, control)
    got, _ = _table("records", [tmp_path])
    assert [(r["topic"], r["partition"], r["offset"], r["timestamp"], r["timestamp_type"],
             r["key"], r["value"]) for r in got] == [
        ("orders", 3, 0, T0 + 5, 0, b"key", b"value"),
        ("orders", 3, 1, T0 + 9, 0, None, None),
        ("orders", 3, 2, T0 + 100, 1, b"k", b"v"),
        ("orders", 3, 3, -1, 0, b"m0", b"zero"),
        ("orders", 3, 4, T0 + 7, 0, b"m1", b"one"),
        ("orders", 3, 5, T0 + 8, 0, None, b"two"),
    ]  # the control batch (a transaction marker) is no user record
    assert got[0]["headers"] == [{"key": "h1", "value": b"x"}, {"key": "h2", "value": None}]

    heads, _ = _table("batches", [tmp_path])
    # An uncompressed legacy message set is one entry per message; a compressed one
    # is one wrapper entry.
    legacy1_entries = ([(4, 4, T0 + 7, 1), (5, 5, T0 + 8, 1)] if codec == compression.NONE
                       else [(4, 5, T0 + 8, 2)])
    assert [(b["base_offset"], b["last_offset"], b["max_timestamp"], b["records"]) for b in heads] == [
        (0, 1, T0 + 9, 2), (2, 2, T0 + 100, 1), (3, 3, -1, 1), *legacy1_entries, (6, 6, T0, 1)]
    assert sum(b["bytes"] for b in heads) == (tmp_path / "orders-3" / f"{0:020d}.log").stat().st_size


def test_folders_that_are_not_partitions_are_skipped_and_topics_filter(tmp_path):
    batch = build_batch([Record(None, T0, b"k", b"v")])
    for name in ("a-0", "a-1", "b-0", "__cluster_metadata-0", "a-2.0123abcd-delete", "c-0-stray",
                 "__consumer_offsets-7"):
        _segment(tmp_path / name, 0, batch)
    (tmp_path / "meta.properties").write_text("x")
    (tmp_path / "a-0" / "leader-epoch-checkpoint").write_text("0\n")
    found = [(t, p) for _d, _f, t, p in segments.partition_dirs([str(tmp_path)])]
    # Kafka's "-delete" folders and KRaft's metadata log are not read.
    assert found == [("__consumer_offsets", 7), ("a", 0), ("a", 1), ("b", 0)]
    assert {(t, p) for _d, _f, t, p in segments.partition_dirs([str(tmp_path)], {"a"})} == {
        ("a", 0), ("a", 1)}
    with pytest.raises(FileNotFoundError):
        segments.plan_splits([str(tmp_path / "missing")])


def _subscription(*topics):
    return ConsumerProtocolSubscription(version=1, topics=list(topics), user_data=None,
                                        owned_partitions=[]).encode(version=1)


def _assignment(**partitions):
    return ConsumerProtocolAssignment(version=0, assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=p)
        for t, p in partitions.items()], user_data=None).encode(version=0)


def _group_value(members, protocol_type="consumer", generation=3):
    return G.group_metadata_value({
        "protocol_type": protocol_type, "generation": generation, "protocol": "range",
        "leader": members[0][0] if members else None, "current_state_timestamp": T0,
        "members": [{"member_id": m, "group_instance_id": inst, "client_id": "cli",
                     "client_host": "/127.0.0.1", "rebalance_timeout": 300_000,
                     "session_timeout": 45_000, "subscription": sub, "assignment": asg}
                    for m, inst, sub, asg in members]})


def test_consumer_offsets_records_decode_to_commits_groups_and_tombstones(tmp_path):
    old_key = b"\x00\x00" + G.offset_commit_key("g1", "t", 0)[2:]  # key v0
    commit_v1 = b"\x00\x01" + struct.pack(">q", 7) + b"\x00\x02md" + struct.pack(">qq", T0, T0 + 99)
    members = [("m-1", "static-1", _subscription("t", "u"), _assignment(t=[0, 1], u=[2])),
               ("m-2", None, _subscription("t"), b"")]
    records = [
        Record(None, T0, G.offset_commit_key("g1", "t", 0), G.offset_commit_value(42, "meta", T0)),
        Record(None, T0 + 1, old_key, commit_v1),
        Record(None, T0 + 2, G.group_metadata_key("g1"), _group_value(members)),
        Record(None, T0 + 3, G.group_metadata_key("conn"), _group_value(
            [("x", None, b"\x01\x02", b"\x03")], protocol_type="connect")),
        Record(None, T0 + 4, G.offset_commit_key("g1", "t", 0), None),
        Record(None, T0 + 5, G.group_metadata_key("g1"), None),
        Record(None, T0 + 6, b"\x00\x0a" + b"share-group-key", b"\x00\x00"),  # skipped
        Record(None, T0 + 7, G.offset_commit_key("g2", "t", 1), b"\x00"),  # unreadable
    ]
    control = build_control_batch(1, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                  timestamp=T0, base_offset=len(records))
    _segment(tmp_path / "__consumer_offsets-17", 0, build_batch(records), control)
    _segment(tmp_path / "other-0", 0, build_batch([Record(None, T0, b"k", b"v")]))
    stats = {}
    got, _ = _table("offsets", [tmp_path], stats=stats, topics={"__consumer_offsets"})
    got.sort(key=lambda r: r["source_offset"])
    assert stats == {"unreadable": 1}
    assert [(r["source_partition"], r["source_offset"], r["record_type"], r["group"],
             r["tombstone"]) for r in got] == [
        (17, 0, "offset_commit", "g1", False), (17, 1, "offset_commit", "g1", False),
        (17, 2, "group_metadata", "g1", False), (17, 3, "group_metadata", "conn", False),
        (17, 4, "offset_commit", "g1", True), (17, 5, "group_metadata", "g1", True),
        (17, 8, "transaction_marker", None, None)]
    assert (got[-1]["producer_id"], got[-1]["marker"]) == (1, "commit")
    assert all(r["producer_id"] is None for r in got[:-1])  # not written in a transaction
    first, second = got[0], got[1]
    assert (first["topic"], first["partition"], first["committed_offset"], first["leader_epoch"],
            first["metadata"], first["commit_timestamp"], first["expire_timestamp"]) == (
        "t", 0, 42, -1, "meta", T0, -1)
    assert (second["committed_offset"], second["metadata"], second["expire_timestamp"]) == (
        7, "md", T0 + 99)
    assert all(r["group_metadata"] is None for r in got if r["record_type"] != "group_metadata")
    assert got[2]["committed_offset"] is None
    group = got[2]["group_metadata"]
    assert (group["protocol_type"], group["protocol"], group["generation"], group["leader"],
            group["state_timestamp"]) == ("consumer", "range", 3, "m-1", T0)
    m1, m2 = group["members"]
    assert (m1["member_id"], m1["group_instance_id"], m1["session_timeout"],
            m1["subscribed_topics"], m1["assigned_partitions"]) == (
        "m-1", "static-1", 45_000, ["t", "u"],
        [{"topic": "t", "partitions": [0, 1]}, {"topic": "u", "partitions": [2]}])
    assert m1["assignment"] == members[0][3] and m1["subscription"] == members[0][2]
    assert (m2["group_instance_id"], m2["assigned_partitions"]) == (None, None)  # empty assignment
    connect = got[3]["group_metadata"]
    assert connect["protocol_type"] == "connect"
    assert connect["members"][0]["subscribed_topics"] is None  # not the consumer protocol
    assert connect["members"][0]["subscription"] == b"\x01\x02"
    for tomb in got[4:6]:
        assert tomb["committed_offset"] is None and tomb["group_metadata"] is None


def test_every_shape_has_a_spark_schema_naming_the_arrow_columns():
    for schema in rows.SHAPES.values():
        ddl = rows.spark_ddl(schema)
        for f in schema:
            assert f"`{f.name}` " in ddl
    offsets = rows.spark_ddl(rows.OFFSETS)
    assert "`group_metadata` struct<`protocol_type`: string" in offsets
    assert "`members`: array<struct<`member_id`: string" in offsets
    # Columns every row has are NOT NULL, the others nullable.
    assert "`source_offset` bigint NOT NULL, " in offsets
    assert "`committed_offset` bigint, " in offsets


def test_batches_crossing_read_windows_and_an_empty_batch_are_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(segments, "READ_WINDOW", 300)  # most batches cross a window's end
    batches = [build_batch([Record(None, T0, b"k%d" % i, b"v" * (20 + 7 * i))], base_offset=i)
               for i in range(40)]
    empty = build_batch([], base_offset=40, last_offset_delta=0)  # compaction leaves these
    assert len(empty) == 61
    _segment(tmp_path / "t-0", 0, *batches, empty)
    got, splits = _table("records", [tmp_path])
    assert [r["offset"] for r in got] == list(range(40))
    heads, _ = _table("batches", [tmp_path])
    assert [(b["base_offset"], b["records"]) for b in heads][-2:] == [(39, 1), (40, 0)]


def test_a_relative_data_dir_is_read(tmp_path, monkeypatch):
    _segment(tmp_path / "store" / "t-0", 0, build_batch([Record(None, T0, b"k", b"v")]))
    monkeypatch.chdir(tmp_path)
    got, _ = _table("records", ["store"])
    assert [(r["topic"], r["value"]) for r in got] == [("t", b"v")]


def test_a_split_ends_where_the_file_ended_when_it_was_planned(tmp_path):
    path = _segment(tmp_path / "t-0", 0, build_batch([Record(None, T0, b"a", b"1")]))
    splits = segments.plan_splits([str(tmp_path)])
    with open(path, "ab") as f:  # the broker appends after planning
        f.write(build_batch([Record(None, T0, b"b", b"2")], base_offset=1))
    got = [r for s in splits for b in rows.read("records", s) for r in b.to_pylist()]
    assert [r["offset"] for r in got] == [0]
    assert [r["offset"] for r in _table("records", [tmp_path])[0]] == [0, 1]  # planned again


def test_a_legacy_entry_with_a_wrong_crc_is_a_torn_tail(tmp_path):
    good = build_legacy([Record(None, T0, b"a", b"1")], magic=1, base_offset=0)
    bad = bytearray(build_legacy([Record(None, T0, b"b", b"2")], magic=1, base_offset=1))
    bad[-1] ^= 0x01  # the value's last byte: the message CRC no longer matches
    _segment(tmp_path / "t-0", 0, good, bytes(bad))
    stats = {}
    got, _ = _table("records", [tmp_path], stats=stats)
    assert [r["offset"] for r in got] == [0] and stats == {"torn": 1}


def test_offset_index_entries_are_used_up_to_the_preallocated_zeros(tmp_path):
    _logged_topic(tmp_path, "idx", batches=200)
    folder = tmp_path / "idx-0"
    first = sorted(folder.glob("*.log"))[0]
    segment = segments.SegmentFile(str(tmp_path), str(first), "idx", 0, 0, first.stat().st_size)
    fs, _ = segments.filesystem(str(tmp_path))
    entries = segments._index_positions(fs, segment)
    assert len(entries) > 10
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:]))
    index = first.with_suffix(".index")
    raw = index.read_bytes()
    index.write_bytes(raw[: 8 * 5] + b"\0" * 800)  # five entries, then Kafka's preallocated zeros
    assert segments._index_positions(fs, segment) == entries[:5]
    for offset, position in entries[:5]:  # each points at the batch holding its offset
        with open(first, "rb") as f:
            f.seek(position)
            base = struct.unpack(">q", f.read(8))[0]
        assert base <= offset


def test_transactional_commits_carry_their_producer_and_a_clean_read_counts_nothing(tmp_path):
    commit = build_batch([Record(None, T0, G.offset_commit_key("g", "t", 0),
                                 G.offset_commit_value(3, "", T0))],
                         producer_id=42, producer_epoch=1, transactional=True)
    plain = build_batch([Record(None, T0, G.offset_commit_key("g", "t", 1),
                                G.offset_commit_value(4, "", T0))], base_offset=1)
    _segment(tmp_path / "__consumer_offsets-0", 0, commit, plain)
    stats = {}
    got, _ = _table("offsets", [tmp_path], stats=stats, topics={"__consumer_offsets"})
    assert stats == {}
    assert sorted((r["source_offset"], r["producer_id"]) for r in got) == [(0, 42), (1, None)]
    # A control record whose key is not a marker's (type 7) is counted, not read as one.
    broken_marker = build_batch([Record(None, T0, b"\x00\x00\x00\x07", b"\x00" * 6)],
                                producer_id=42, producer_epoch=1, transactional=True,
                                control=True, base_offset=2)
    _segment(tmp_path / "__consumer_offsets-1", 0, broken_marker)
    stats = {}
    got, _ = _table("offsets", [tmp_path], stats=stats, topics={"__consumer_offsets"})
    assert stats == {"unreadable": 1} and len(got) == 2


def test_a_worker_leaves_what_it_held_before_its_first_read_out_of_its_collections(
        tmp_path, monkeypatch):
    """A Spark Python worker holds pyspark's and pyarrow's objects for its whole life:
    its first read freezes them (``gc.freeze``), so that the full collections a
    read's rows trigger walk only the read's own objects; later reads add nothing."""
    import gc
    import json

    from kcoord.pipeline import source

    _segment(tmp_path / "__consumer_offsets-3", 0, build_batch([
        Record(None, T0, G.offset_commit_key("g", "t", 0), G.offset_commit_value(1, "", T0))]))
    monkeypatch.setattr(source, "_settled", False)
    freezes = []
    freeze = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: (freezes.append(1), freeze()))
    reader = source._Reader("offsets", {"paths": json.dumps([str(tmp_path)])})
    (partition,) = reader.partitions()
    before = gc.get_freeze_count()
    try:
        assert sum(b.num_rows for b in reader.read(partition)) == 1
        assert gc.get_freeze_count() > before and len(freezes) == 1
        assert sum(b.num_rows for b in reader.read(partition)) == 1
        assert len(freezes) == 1  # once per worker
    finally:
        gc.unfreeze()


def test_hadoop_s3_schemes_are_read_as_pyarrow_s3():
    assert segments.pyarrow_uri("s3a://bucket/store/kafka-logs") == "s3://bucket/store/kafka-logs"
    assert segments.pyarrow_uri("s3n://bucket/x") == "s3://bucket/x"
    assert segments.pyarrow_uri("S3A://bucket/x") == "s3://bucket/x"
    assert segments.pyarrow_uri("file:/data/kafka-logs") == "/data/kafka-logs"
    for unchanged in ("s3://bucket/x", "file:///data/x", "gs://b/x", "/data/x", "store"):
        assert segments.pyarrow_uri(unchanged) == unchanged
    from pyarrow import fs as pafs

    # A region in the URI: pyarrow asks no one for the bucket's (no network here).
    fs, path = segments.filesystem(
        "s3a://bucket/store?region=eu-west-3&endpoint_override=127.0.0.1:9&scheme=http")
    assert isinstance(fs, pafs.S3FileSystem) and fs.region == "eu-west-3"
    assert path == "bucket/store"
    # Schemes pyarrow knows as they are (built, nothing read).
    assert isinstance(segments.filesystem("gs://bucket/store")[0], pafs.GcsFileSystem)
    azure = segments.filesystem("abfss://store@account.dfs.core.windows.net/kafka-logs")
    assert isinstance(azure[0], pafs.AzureFileSystem) and azure[1] == "store/kafka-logs"
    with pytest.raises(Exception, match="Unrecognized filesystem type"):
        segments.filesystem("wasbs://store@account.blob.core.windows.net/x")


@pytest.mark.parametrize("form", ["uri", "hadoop"])
def test_a_file_uri_data_dir_is_read_as_the_folder(tmp_path, form):
    offsets = _logged_topic(tmp_path, "t", batches=300)
    uri = tmp_path.as_uri() if form == "uri" else "file:" + str(tmp_path)
    assert uri.startswith("file:///" if form == "uri" else "file:/")
    by_path, path_splits = _table("records", [tmp_path], split_bytes=20_000)
    by_uri, uri_splits = _table("records", [uri], split_bytes=20_000)
    assert [r["offset"] for r in by_uri] == offsets and by_uri == by_path
    assert [(s.start, s.end) for s in uri_splits] == [(s.start, s.end) for s in path_splits]
    # Local files: planned with their identity, so reads survive the broker's rewrites.
    assert all(s.segment.identity is not None for s in uri_splits)
