"""Record batches and legacy message sets, checked against kafka-python's and aiokafka's own code.

A round trip through our codec alone proves nothing about Kafka compatibility,
so every format test here has an independent implementation on one side.
"""

from __future__ import annotations

import io
import struct

import aiokafka.record.default_records as ak_default
import aiokafka.record.legacy_records as ak_legacy
import aiokafka.record.memory_records as ak_memory
import google_crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from kcoord.protocol import compression, wire
from kcoord.protocol import records as R
from kcoord.protocol.records.decode import _decode_record_stream
from kcoord.protocol.records.format import _batch_header_codec, _build_record
from kcoord.protocol.records import Record

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]

AK_BUILDERS = {
    "c": ak_default.DefaultRecordBatchBuilder,
    "py": ak_default._DefaultRecordBatchBuilderPy,
}
AK_LEGACY_BUILDERS = {
    "c": ak_legacy.LegacyRecordBatchBuilder,
    "py": ak_legacy._LegacyRecordBatchBuilderPy,
}
AK_READERS = {"c": ak_memory.MemoryRecords, "py": ak_memory._MemoryRecordsPy}

keys = st.one_of(st.none(), st.binary(max_size=20))
values = st.one_of(st.none(), st.binary(max_size=300))
header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10))), max_size=3
)
record_lists = st.lists(
    st.tuples(st.integers(0, 2_000_000_000_000), keys, values, header_lists), min_size=1, max_size=12
)


def _records(raw):
    return [Record(None, ts, k, v, list(h)) for ts, k, v, h in raw]


def _read_with(reader_cls, data):
    out = []
    mr = reader_cls(data)
    while (batch := mr.next_batch()) is not None:
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]))
    return out


def _ours(data):
    return [
        (r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
        for r in R.iter_records(data)
    ]


# --- the implementation underneath --------------------------------------------------


def test_crc32c_runs_in_c():
    assert google_crc32c.implementation == "c"
    assert R.crc32c(b"123456789") == 0xE3069283


def test_compiled_structs_have_no_interpreter_fallback():
    for name, compiled in R.COMPILED.items():
        assert "linkedparsers[" not in compiled.source, name
        assert "linkedbuilders[" not in compiled.source, name


@given(st.binary(min_size=61, max_size=61))
def test_fast_header_agrees_with_construct_declaration(raw):
    fast = R.batch_header(raw)
    declared = R.BATCH_HEADER.compile().parse(raw)
    assert fast._asdict() == {k: v for k, v in declared.items() if not k.startswith("_")}
    assert R.BATCH_HEADER.parse(raw).records_count == fast.records_count
    assert R.BATCH_HEADER.build(declared) == raw


# --- our batches read by kafka-python and aiokafka ---------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=record_lists,
    codec=st.sampled_from(CODECS),
    base=st.integers(0, 1 << 40),
    producer=st.sampled_from([(-1, -1, -1), (7, 3, 100)]),
    log_append=st.booleans(),
)
def test_our_batches_read_by_both_clients(raw, codec, base, producer, log_append):
    recs = _records(raw)
    data = R.build_batch(
        recs,
        base_offset=base,
        compression_type=codec,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        timestamp_type=R.LOG_APPEND_TIME if log_append else R.CREATE_TIME,
        max_timestamp=123456 if log_append else None,
    )
    expected = [
        (base + i, 123456 if log_append else r.timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(recs)
    ]
    assert _read_with(KpMemoryRecords, data) == expected
    for reader in AK_READERS.values():
        assert _read_with(reader, data) == expected
    assert _ours(data) == expected
    batch = ak_default.DefaultRecordBatch(data)
    header = R.batch_header(data)
    assert (batch.base_offset, batch.last_offset_delta, batch.producer_id, batch.producer_epoch,
            batch.base_sequence, batch.compression_type, batch.max_timestamp) == (
        header.base_offset, header.last_offset_delta, header.producer_id, header.producer_epoch,
        header.base_sequence, header.compression, header.max_timestamp)


def test_transactional_and_control_batches_read_by_kafka_python():
    data = R.build_control_batch(
        R.CONTROL_COMMIT, producer_id=42, producer_epoch=1, coordinator_epoch=5, timestamp=1000,
        base_offset=9,
    )
    assert len(data) == 78  # the size of librdkafka's mock marker batch
    batch = KpMemoryRecords(data).next_batch()
    assert batch.is_control_batch and batch.is_transactional and batch.validate_crc()
    (ours,) = R.decode_record_set(data)
    assert ours.is_control and ours.is_transactional
    assert R.decode_control_record(ours.records[0]) == (R.CONTROL_COMMIT, 5)


def test_delete_horizon_batch_keeps_record_timestamps():
    recs = [Record(5, 1000, b"k", None), Record(7, 1500, b"j", b"v")]
    data = R.build_batch(recs, base_offset=5, last_offset_delta=4, delete_horizon_ms=99_999)
    header = R.batch_header(data)
    assert header.has_delete_horizon and header.delete_horizon_ms == 99_999
    assert header.last_offset == 9 and header.records_count == 2
    assert _read_with(KpMemoryRecords, data) == [
        (5, 1000, b"k", None, []),
        (7, 1500, b"j", b"v", []),
    ]


def test_header_rewrites_stay_outside_the_crc():
    data = bytearray(R.build_batch(_records([(1, b"k", b"v", [])])))
    R.set_base_offset(data, 0, 1234)
    R.set_partition_leader_epoch(data, 0, 7)
    assert R.crc_valid(data)
    batch = KpMemoryRecords(bytes(data)).next_batch()
    assert batch.base_offset == 1234 and batch.leader_epoch == 7 and batch.validate_crc()
    R.set_log_append_time(data, 0, 5555)
    assert R.crc_valid(data)
    assert _read_with(KpMemoryRecords, bytes(data))[0][1] == 5555
    data[-1] ^= 0xFF
    assert not R.crc_valid(data)
    with pytest.raises(R.CorruptRecordError):
        R.decode_batch(bytes(data))


def test_empty_batch_spans_its_offsets():
    data = R.empty_batch(base_offset=10, last_offset_delta=4, timestamp=77)
    header = R.batch_header(data)
    assert header.records_count == 0 and header.next_offset == 15
    batch = KpMemoryRecords(data).next_batch()
    assert batch.validate_crc() and list(batch) == []


# --- their batches read by ours ---------------------------------------------------------


def _client_batches(codec, raw):
    """The same records written by kafka-python's and aiokafka's (C and Python) builders."""
    out = {}
    builders = {"kafka-python": KpBuilder, **{f"aiokafka-{k}": v for k, v in AK_BUILDERS.items()}}
    for name, cls in builders.items():
        b = cls(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
        for i, (ts, k, v, h) in enumerate(raw):
            b.append(i, timestamp=ts, key=k, value=v, headers=list(h))
        out[name] = bytes(b.build())
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=record_lists, codec=st.sampled_from(CODECS))
def test_client_batches_read_by_ours_byte_for_byte(raw, codec):
    for name, data in _client_batches(codec, raw).items():
        header = R.validate_batch(data, 0, len(data))
        # The clients store a batch uncompressed when compression would not shrink it.
        assert header.compression in (codec, compression.NONE), name
        batch = R.decode_batch(data)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
            (i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(raw)
        ], name
        # The record section we encode from the decoded records is the clients' own.
        payload = R.batch_payload(data)
        assert R.encode_records(batch.records, 0, header.base_timestamp) == payload, name
        if header.compression == compression.NONE:
            rebuilt = R.build_batch(
                batch.records, partition_leader_epoch=header.partition_leader_epoch
            )
            assert rebuilt == data, name


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_both_directions(codec):
    raw = [(1_700_000_000_000 + i, b"key%d" % i, b"value-%d " % i * 40, [("h", b"x")]) for i in range(50)]
    for name, data in _client_batches(codec, raw).items():
        assert [r.value for r in R.decode_batch(data).records] == [v for _, _, v, _ in raw], name
    ours = R.build_batch(_records(raw), compression_type=codec)
    assert R.batch_header(ours).compression == codec
    assert len(_read_with(KpMemoryRecords, ours)) == 50
    assert len(_read_with(AK_READERS["c"], ours)) == 50


# --- legacy message sets -----------------------------------------------------------------


def _legacy_cases():
    for magic in (0, 1):
        for codec in (compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4):
            yield magic, codec


@pytest.mark.parametrize("magic,codec", list(_legacy_cases()))
def test_legacy_message_sets_both_directions(magic, codec):
    raw = [(1_600_000_000_000 + i, None if i == 2 else b"k%d" % i, b"v%d" % i * 30) for i in range(5)]
    expected_ts = [ts if magic == 1 else None for ts, _, _ in raw]
    # Ours, read by the clients.
    ours = R.build_legacy(
        [Record(None, ts, k, v) for ts, k, v in raw], magic=magic, base_offset=100,
        compression_type=codec,
    )
    readers = [KpMemoryRecords, *AK_READERS.values()]
    if not (magic == 0 and codec == compression.LZ4):  # neither client writes or reads Kafka 0.8 LZ4
        for reader in readers:
            got = _read_with(reader, ours)
            assert [(o, t, k, v) for o, t, k, v, _ in got] == [
                (100 + i, expected_ts[i], k, v) for i, (_ts, k, v) in enumerate(raw)
            ]
    # Theirs, read by ours.
    builders = [KpLegacyBuilder, *AK_LEGACY_BUILDERS.values()]
    for cls in builders:
        if magic == 0 and codec == compression.LZ4:
            continue
        b = cls(magic=magic, compression_type=codec, batch_size=1 << 20)
        for i, (ts, k, v) in enumerate(raw):
            b.append(i, timestamp=ts, key=k, value=v)
        data = bytes(b.build())
        got = [(r.offset, r.timestamp, r.key, r.value) for r in R.iter_records(data)]
        assert got == [
            (i, ts if magic == 1 else R.NO_TIMESTAMP, k, v) for i, (ts, k, v) in enumerate(raw)
        ]
        if codec == compression.NONE:
            mine = R.build_legacy([Record(None, ts, k, v) for ts, k, v in raw], magic=magic)
            assert mine == data  # byte for byte
    # Ours, read by ours (covers Kafka 0.8's LZ4 header checksum for magic 0).
    assert [(r.offset, r.key, r.value) for r in R.iter_records(ours)] == [
        (100 + i, k, v) for i, (_ts, k, v) in enumerate(raw)
    ]


def test_legacy_crc_is_checked():
    data = bytearray(R.build_legacy([Record(None, 5, b"k", b"v")], magic=1))
    data[-1] ^= 1
    with pytest.raises(R.CorruptRecordError):
        R.decode_record_set(bytes(data))


def test_up_and_down_conversion():
    legacy = R.build_legacy(
        [Record(None, 1000 + i, b"k%d" % i, b"v%d" % i) for i in range(4)],
        magic=1, base_offset=0, compression_type=compression.GZIP,
    )
    plain = R.build_legacy([Record(None, 2000, b"p", b"q")], magic=1, base_offset=9)
    v2 = R.legacy_as_batch(legacy)
    header = R.batch_header(v2)
    assert header.magic == 2 and header.records_count == 4 and header.compression == compression.GZIP
    # Every message of the set, wrapped or not, goes into one batch from offset 0.
    both = R.legacy_as_batch(plain + legacy)
    assert [(o, k) for o, _t, k, _v, _h in _read_with(KpMemoryRecords, both)] == [
        (0, b"p"), *[(1 + i, b"k%d" % i) for i in range(4)]]
    assert R.batch_header(both).compression == compression.GZIP
    assert _read_with(KpMemoryRecords, v2) == [
        (i, 1000 + i, b"k%d" % i, b"v%d" % i, []) for i in range(4)
    ]
    zstd = R.build_batch([Record(None, 7, b"a", b"b")], base_offset=4, compression_type=compression.ZSTD)
    for magic in (0, 1):
        down = R.down_convert(v2, magic)
        got = _read_with(KpMemoryRecords, down)
        assert [(o, k, v) for o, _t, k, v, _h in got] == [
            (i, b"k%d" % i, b"v%d" % i) for i in range(4)]
        # zstd has no legacy form (Kafka's RecordsUtil refuses it) ...
        with pytest.raises(compression.UnsupportedCodecError):
            R.down_convert(zstd, magic)
        # ... so a Fetch answer stops before it, filled up to the size of the v2
        # data with an entry clients skip as a partial message.
        answer = R.down_convert_for_fetch(v2 + zstd, magic, 0)
        assert len(answer) == len(v2 + zstd)
        assert answer.startswith(down)
        assert answer[len(down):len(down) + 8] == b"\xff" * 8
        got = _read_with(KpMemoryRecords, answer)
        assert [o for o, *_rest in got] == [0, 1, 2, 3]


def test_down_conversion_for_a_fetch_goes_chunk_by_chunk_as_kafka():
    """The first batch alone, then chunks of up to 128 KiB of v2 data: a chunk
    holding a zstd batch fails whole (its gzip batch is not sent either), and the
    answer keeps its size with an overflow entry (asked of Kafka 3.9 in
    tests/reference)."""
    first = R.build_batch([Record(None, 5, b"k", b"a")], base_offset=0)
    gzip = R.build_batch([Record(None, 5, b"k", b"b")], base_offset=1,
                         compression_type=compression.GZIP)
    zstd = R.build_batch([Record(None, 5, b"k", b"c")], base_offset=2,
                         compression_type=compression.ZSTD)
    for magic in (0, 1):
        answer = R.down_convert_for_fetch(first + gzip + zstd, magic, 0)
        assert len(answer) == len(first + gzip + zstd)
        assert [o for o, *_rest in _read_with(KpMemoryRecords, answer)] == [0]
        # without the zstd batch, both go
        answer = R.down_convert_for_fetch(first + gzip, magic, 0)
        assert [o for o, *_rest in _read_with(KpMemoryRecords, answer)] == [0, 1]
        # a zstd batch before any converted one refuses the partition
        marker = R.build_control_batch(0, producer_id=1, producer_epoch=0,
                                       coordinator_epoch=0, timestamp=5, base_offset=1)
        with pytest.raises(compression.UnsupportedCodecError):
            R.down_convert_for_fetch(marker + zstd, magic, 1)


def test_down_conversion_starts_uncompressed_batches_at_the_fetch_offset():
    v2 = R.build_batch([Record(None, 5, b"k%d" % i, b"v") for i in range(4)], base_offset=10)
    for magic in (0, 1):
        answer = R.down_convert_for_fetch(v2, magic, 12)
        assert [o for o, *_rest in _read_with(KpMemoryRecords, answer)] == [12, 13]


# --- codecs -------------------------------------------------------------------------------


def test_snappy_reads_raw_and_xerial():
    data = b"abc" * 50_000
    framed = compression.snappy_compress(data)
    assert compression.is_xerial(framed)
    assert compression.snappy_decompress(framed) == data
    raw = compression.snappy_compress(data, xerial=False)
    assert not compression.is_xerial(raw)
    assert compression.snappy_decompress(raw) == data


def test_gzip_reads_concatenated_members():
    data = compression.gzip_compress(b"one ") + compression.gzip_compress(b"two")
    assert compression.gzip_decompress(data) == b"one two"


def test_lz4_frames_use_independent_blocks():
    frame = compression.lz4_compress(b"x" * 100_000)
    assert struct.unpack_from("<I", frame)[0] == 0x184D2204
    assert frame[4] & 0x20  # FLG block independence (KIP-57)


def test_lz4_kafka08_header_checksum():
    assert compression.xxh32(b"") == 0x02CC5D05
    assert compression.xxh32(b"abc") == 0x32D153FF
    assert compression.xxh32(bytes(range(40))) == compression.xxh32(bytes(range(40)))
    data = b"hello kafka " * 100
    broken = compression.lz4_compress_broken_checksum(data)
    assert broken != compression.lz4_compress(data)
    assert compression.lz4_decompress_any_checksum(broken) == data
    assert compression.lz4_decompress_any_checksum(compression.lz4_compress(data)) == data


def test_lz4_frames_of_dependent_blocks_are_refused_as_kafka_refuses_them():
    """lz4 itself reads them; Kafka's KafkaLZ4BlockInputStream does not (and a
    Java consumer could not read them back)."""
    import cramjam
    linked = cramjam.lz4.Compressor(level=9, content_checksum=False, block_linked=True)
    linked.compress(b"hello kafka " * 100)
    frame = bytes(linked.finish())
    assert bytes(cramjam.lz4.decompress(frame)) == b"hello kafka " * 100
    with pytest.raises(compression.DecompressionError, match="Dependent block stream"):
        compression.decompress(compression.LZ4, frame)


@pytest.mark.parametrize("codec, data", [
    (compression.GZIP, compression.gzip_compress(b"x" * 100)[:-10]),  # EOFError
    (compression.GZIP, b"not gzip at all"),  # BadGzipFile
    (compression.GZIP, b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"\xff" * 20),  # zlib.error
    (compression.SNAPPY, b"\xff" * 40),
    (compression.SNAPPY, b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00\x01"),  # xerial, cut
    (compression.LZ4, b"\x04\x22\x4d\x18" + b"\xff" * 30),
    (compression.ZSTD, b"\x28\xb5\x2f\xfd" + b"\xff" * 30),
])
def test_bytes_a_codec_cannot_read_raise_one_error(codec, data):
    """Whatever the codec's library raises, the caller gets DecompressionError
    (a Produce is answered UNKNOWN_SERVER_ERROR for it, as Kafka answers)."""
    with pytest.raises(compression.DecompressionError):
        compression.decompress(codec, data)


def test_unknown_codec_is_rejected():
    with pytest.raises(compression.UnsupportedCodecError):
        compression.decompress(6, b"")
    with pytest.raises(compression.UnsupportedCodecError):
        R.build_legacy([Record(None, 1, b"k", b"v")], magic=1, compression_type=compression.ZSTD)


def test_record_set_iteration_rejects_garbage():
    good = R.build_batch(_records([(1, b"k", b"v", [])]))
    assert [p for p, _s, _m in R.iter_entries(good + good)] == [0, len(good)]
    with pytest.raises(R.CorruptRecordError):
        list(R.iter_entries(good + good[:30]))
    assert len(list(R.iter_entries(good + good[:30], partial_ok=True))) == 1
    bad_magic = bytearray(good)
    bad_magic[16] = 7
    with pytest.raises(R.CorruptRecordError):
        list(R.iter_entries(bytes(bad_magic)))
    stream = io.BytesIO()
    assert stream.tell() == 0


@settings(max_examples=60, deadline=None)
@given(raw=record_lists, codec=st.sampled_from(CODECS))
def test_fast_record_decoder_agrees_with_construct_declaration(raw, codec):
    data = R.build_batch(_records(raw), base_offset=77, compression_type=codec)
    assert R.decode_batch(data, fast=True) == R.decode_batch(data, fast=False)


@given(st.binary(max_size=200), st.integers(0, 5))
def test_both_record_decoders_reject_garbage_alike(junk, count):
    outcomes = []
    for decoder in (R.decode_records_fast, _decode_record_stream):
        try:
            outcomes.append(decoder(junk, count, 0, 0, None))
        except (R.CorruptRecordError, ValueError):
            outcomes.append("error")
    assert outcomes[0] == outcomes[1]


@settings(max_examples=100, deadline=None)
@given(raw=record_lists)
def test_key_value_walk_agrees_with_the_record_decoder(raw):
    """The start-up replay reads keys and values only; they are the decoder's."""
    data = R.build_batch(_records(raw), base_offset=5)
    header = R.batch_header(data)
    payload = R.batch_payload(data)
    assert R.key_values(payload, header.records_count) == \
        [(r.key, r.value) for r in R.decode_batch(data).records]


def test_key_value_walk_agrees_past_one_byte_varints():
    # Offset deltas of 64 and more (two-byte varints), records of 64 bytes and
    # more and of 8 KiB and more (two- and three-byte lengths), null keys.
    records = [Record(None, 1_700_000_000_000 + i, None if i % 7 == 0 else b"k%d" % i,
                      b"v" * (i * 37 % 9000)) for i in range(300)]
    data = R.build_batch(records, base_offset=5)
    payload = R.batch_payload(data)
    walked = R.key_values(payload, R.batch_header(data).records_count)
    assert walked == [(r.key, r.value) for r in R.decode_batch(data).records]
    assert len(walked) == 300 and walked[299] == (b"k299", b"v" * (299 * 37 % 9000))


def _keys_of(records, base_offset):
    return [(r.offset - base_offset, r.key, r.value is None) for r in records]


# The walks that read part of each record, and what of the decoder's records each gives.
_PARTIAL_WALKS = {
    "key_values (start-up replay)": (lambda data, count: R.key_values(data, count),
                                     lambda records: [(r.key, r.value) for r in records]),
    "record_keys (compaction)": (lambda data, count: R.record_keys(data, count),
                                 lambda records: _keys_of(records, 0)),
}


@pytest.mark.parametrize("walk", sorted(_PARTIAL_WALKS))
@given(junk=st.binary(max_size=200), count=st.integers(0, 5))
def test_a_partial_walk_of_garbage_fails_cleanly_or_agrees(walk, junk, count):
    """Garbage is refused with CorruptRecordError (no other exception); what is
    accepted is what the decoder reads (headers are not read)."""
    walker, project = _PARTIAL_WALKS[walk]
    try:
        walked = walker(junk, count)
    except R.CorruptRecordError:
        return
    try:
        decoded = R.decode_records_fast(junk, count, 0, 0, None)
    except R.CorruptRecordError:
        return  # rejected for its headers only
    assert walked == project(decoded)


@settings(max_examples=100, deadline=None)
@given(raw=record_lists)
def test_the_compaction_walk_agrees_with_the_record_decoder(raw):
    """Compaction decides by offset, key and tombstone; they are the decoder's."""
    data = R.build_batch(_records(raw), base_offset=5)
    header = R.batch_header(data)
    payload = R.batch_payload(data, header=header)
    assert payload == R.batch_payload(data)
    assert R.record_keys(payload, header.records_count) == \
        _keys_of(R.decode_batch(data).records, 5)


def test_the_compaction_walk_agrees_past_one_byte_varints():
    # Offset deltas of 64 and more, records and values of 64 bytes and more and
    # of 8 KiB and more (two- and three-byte lengths), null keys, tombstones.
    records = [Record(None, 1_700_000_000_000 + i, None if i % 7 == 0 else b"k%d" % i,
                      None if i % 5 == 0 else b"v" * (i * 37 % 9000)) for i in range(300)]
    data = R.build_batch(records, base_offset=5, compression_type=compression.GZIP)
    header = R.batch_header(data)
    walked = R.record_keys(R.batch_payload(data, header=header), header.records_count)
    assert walked == _keys_of(R.decode_batch(data).records, 5)
    assert walked[299] == (299, b"k299", False) and walked[295] == (295, b"k295", True)
    assert walked[294] == (294, None, False)


# --- the direct batch encoder against the construct declarations ----------------------


def _construct_records(records, base_offset, base_timestamp):
    """The record section built with the ``RECORD`` declaration, record by record."""
    out = io.BytesIO()
    for i, r in enumerate(records):
        body = io.BytesIO()
        _build_record({"attributes": 0, "timestamp_delta": r.timestamp - base_timestamp,
                         "offset_delta": i if r.offset is None else r.offset - base_offset,
                         "key": r.key, "value": r.value,
                         "headers": [{"key": k, "value": v} for k, v in r.headers]}, body, None)
        raw = body.getvalue()
        wire.write_varint(out, len(raw))
        out.write(raw)
    return out.getvalue()


def _construct_batch(payload, **header):
    fields = {name: default for name, _sub, default in R.BATCH_HEADER.fields}
    fields.update(header)
    fields.update(magic=2, batch_length=R.RECORD_BATCH_OVERHEAD - R.LOG_OVERHEAD + len(payload),
                  crc=0)
    buf = bytearray(_batch_header_codec.build(fields) + payload)
    struct.pack_into(">I", buf, 17, google_crc32c.value(bytes(buf[21:])))
    return bytes(buf)


wide_records = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(0, 1 << 40)),
              st.integers(-(1 << 62), 1 << 62), keys, values, header_lists),
    max_size=6)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=wide_records, base_offset=st.integers(0, 1 << 40),
       base_timestamp=st.integers(-(1 << 62), 1 << 62))
def test_record_encoder_agrees_with_construct_declaration(raw, base_offset, base_timestamp):
    records = [Record(o, ts, k, v, list(h)) for o, ts, k, v, h in raw]
    try:
        expected = _construct_records(records, base_offset, base_timestamp)
    except ValueError:
        # A delta beyond a varint or varlong: refused alike.
        with pytest.raises(ValueError):
            R.encode_records(records, base_offset, base_timestamp)
        return
    assert R.encode_records(records, base_offset, base_timestamp) == expected


header_fields = st.fixed_dictionaries({}, optional={
    "base_offset": st.integers(-(1 << 63), (1 << 63) - 1),
    "partition_leader_epoch": st.integers(-(1 << 31), (1 << 31) - 1),
    "attributes": st.integers(-(1 << 15), (1 << 15) - 1),
    "last_offset_delta": st.integers(-(1 << 31), (1 << 31) - 1),
    "base_timestamp": st.integers(-(1 << 63), (1 << 63) - 1),
    "max_timestamp": st.integers(-(1 << 63), (1 << 63) - 1),
    "producer_id": st.integers(-(1 << 63), (1 << 63) - 1),
    "producer_epoch": st.integers(-(1 << 15), (1 << 15) - 1),
    "base_sequence": st.integers(-(1 << 31), (1 << 31) - 1),
    "records_count": st.integers(-(1 << 31), (1 << 31) - 1),
})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=st.binary(max_size=200), header=header_fields)
def test_batch_assembly_agrees_with_construct_declaration(payload, header):
    assert R.assemble_batch(payload, **header) == _construct_batch(payload, **header)


def test_batch_assembly_refuses_unknown_header_fields():
    with pytest.raises(wire.UnknownFieldError):
        R.assemble_batch(b"", base_ofset=3)
    with pytest.raises(struct.error):
        R.assemble_batch(b"", producer_epoch=1 << 15)


def test_record_encoder_at_varint_edges():
    edges = [0, 1, 63, 64, 65, 127, 128, 8191, 8192, (1 << 31) - 1]
    for n in edges:
        records = [Record(n, n, b"k" * min(n, 9000), b"v" * min(n, 9000), [("h" * (n % 70), b"")]),
                   Record(None, -n, None, None, [])]
        assert R.encode_records(records, 0, 0) == _construct_records(records, 0, 0), n
        if n < (1 << 30):
            assert R.encode_records(records, -n, n) == _construct_records(records, -n, n), n
    for bad in ((1 << 31), -(1 << 31) - 1):
        with pytest.raises(ValueError):
            R.encode_records([Record(bad, 0, None, None, [])], 0, 0)
    with pytest.raises(ValueError):
        R.encode_records([Record(0, 1 << 63, None, None, [])], 0, 0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=st.lists(st.tuples(keys, st.one_of(st.none(), st.binary(max_size=200))), max_size=70),
       base_offset=st.integers(0, 1 << 50), timestamp=st.integers(-1, 1 << 50),
       epoch=st.integers(-1, (1 << 31) - 1))
def test_keyed_batch_is_the_general_batch(pairs, base_offset, timestamp, epoch):
    expected = R.build_batch([Record(None, timestamp, k, v) for k, v in pairs],
                             base_offset=base_offset, partition_leader_epoch=epoch)
    assert R.build_keyed_batch(pairs, base_offset=base_offset, timestamp=timestamp,
                               partition_leader_epoch=epoch) == expected


walked_values = st.one_of(st.none(), st.binary(max_size=300),
                          st.integers(60, 20_000).map(lambda n: b"v" * n))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.lists(st.tuples(st.integers(0, 2_000_000_000_000),
                              st.one_of(st.none(), st.binary(max_size=200)),
                              walked_values, header_lists), min_size=1, max_size=12),
       cut=st.integers(1, 1_000_000))
def test_walking_a_batch_reads_each_record_as_decoding_it_does(raw, cut):
    """The walk that validates appends (varints of one and two bytes read in line,
    longer ones by the general reader) agrees with full decoding, and finds a
    record count that lies or records cut short."""
    batch = R.build_batch(_records(raw))
    header = R.batch_header(batch)
    payload = memoryview(batch)[R.RECORD_BATCH_OVERHEAD:]
    decoded = R.decode_batch(batch).records
    assert R.walk_records(payload, len(raw)) == [
        (r.offset - header.base_offset, r.timestamp - header.base_timestamp,
         -1 if r.key is None else len(r.key), -1 if r.value is None else len(r.value))
        for r in decoded]
    with pytest.raises(R.CorruptRecordError):
        R.walk_records(payload, len(raw) + 1)
    with pytest.raises(R.CorruptRecordError):
        R.walk_records(payload, len(raw) - 1)
    with pytest.raises(R.CorruptRecordError):
        R.walk_records(payload[:len(payload) - 1 - cut % len(payload)], len(raw))


@settings(max_examples=300, deadline=None)
@given(junk=st.binary(max_size=120), count=st.integers(0, 4),
       headers=st.lists(st.tuples(st.integers(-3, 3), st.binary(max_size=3)), max_size=3))
def test_walking_refuses_what_decoding_refuses(junk, count, headers):
    """An append is refused (INVALID_RECORD, as Kafka's DefaultRecord.readFrom
    refuses it) exactly where the full decoder fails: a header section included
    (a negative count, a null header key, fewer headers than counted, bytes left
    over), and only CorruptRecordError is raised."""
    for data in (junk, _one_record_with(headers, junk[:4])):
        try:
            walked = R.walk_records(data, count if data is junk else 1)
        except R.CorruptRecordError:
            walked = None
        try:
            decoded = R.decode_records_fast(data, count if data is junk else 1, 0, 0, None)
        except R.CorruptRecordError:
            decoded = None
        assert (walked is None) == (decoded is None), data.hex()


@pytest.mark.parametrize("section", [b"\x01", b"\x02\x01", b"\x02\x01\x01",
                                     b"\x04\x02h\x01", b"\x00\x00"])
def test_walking_refuses_a_malformed_header_section(section):
    # a count of -1; a null header key (alone, and with a null value); two
    # headers counted, one there; a byte after the headers
    body = b"\x00\x00\x00\x02k\x02v" + section
    data = bytes([len(body) << 1]) + body
    with pytest.raises(R.CorruptRecordError):
        R.walk_records(data, 1)
    with pytest.raises(R.CorruptRecordError):
        R.decode_records_fast(data, 1, 0, 0, None)


def _one_record_with(headers, tail: bytes) -> bytes:
    """A record (key ``k``, value ``v``) whose header section is a count and then
    (key length, bytes) pairs as given, with ``tail`` left over inside it."""
    def zz(n):
        raw, out = (n << 1) ^ (n >> 63), bytearray()
        while raw >= 0x80:
            out.append((raw & 0x7F) | 0x80)
            raw >>= 7
        return bytes(out) + bytes([raw])
    section = zz(len(headers)) + b"".join(zz(n) + b"h" * max(n, 0) + zz(len(v)) + v
                                          for n, v in headers)
    body = b"\x00\x00\x00\x02k\x02v" + section + tail
    return zz(len(body)) + body


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 127, 128, 8_191, 8_192, 8_193, 20_000,
                                  1_048_500, 1_048_575, 1_048_576, 2_097_152])
def test_walking_reads_varints_at_their_byte_boundaries(size):
    """Lengths and deltas of 63/64 (one byte or two in zigzag), 8191/8192 (two or
    three), 1048575/1048576 (three or four) and 2 MiB (four bytes, the third
    0x80): a record of ``size`` value bytes,
    key of the same up to 70 bytes, 70 records (3 of the largest) so that offset
    deltas pass 64, timestamps 64 ms apart."""
    key = b"k" * min(size, 70)
    n = 70 if size < 100_000 else 3
    # and a header whose key and value lengths cross the same boundaries (up to 70 and 9,000)
    header = [("h" * min(size, 70), b"w" * min(size, 9_000))]
    recs = [Record(None, 1_000 + 64 * i, key, b"v" * size, header) for i in range(n)]
    batch = R.build_batch(recs)
    payload = memoryview(batch)[R.RECORD_BATCH_OVERHEAD:]
    walked = R.walk_records(payload, len(recs))
    assert walked == [(i, 64 * i, len(key), size) for i in range(n)]
    with pytest.raises(R.CorruptRecordError):
        R.walk_records(payload, n + 1)
    with pytest.raises(R.CorruptRecordError):
        R.walk_records(payload[:len(payload) - 1], n)
