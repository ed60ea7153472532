"""Property tests: the log against a simple in-memory model, recovery, compaction."""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol import records as R
from kcoord.storage import LogConfig, PartitionLog
from tests.storage.helpers import all_records, batch_offsets

SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

record_st = st.tuples(
    st.integers(0, 10_000),  # timestamp
    st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),  # key
    st.one_of(st.none(), st.binary(min_size=0, max_size=120)),  # value (None = tombstone)
)
batches_st = st.lists(st.lists(record_st, min_size=1, max_size=6), min_size=1, max_size=25)
codec_st = st.sampled_from([0, 1, 2, 3, 4])


def _build(recs, codec):
    return R.build_batch([R.Record(None, ts, k, v) for ts, k, v in recs], compression_type=codec)


class _Dir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="kcoord-prop-")
        return os.path.join(self.path, "t-0")

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


ops_st = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(record_st, min_size=1, max_size=5), codec_st),
        st.tuples(st.just("read"), st.integers(0, 200), st.integers(1, 3_000)),
        st.tuples(st.just("time"), st.integers(-5, 10_005)),
        st.tuples(st.just("roll")),
        st.tuples(st.just("reopen"), st.booleans()),
        st.tuples(st.just("truncate"), st.integers(0, 200)),
    ),
    min_size=1,
    max_size=40,
)


@SETTINGS
@given(ops=ops_st)
def test_log_agrees_with_a_list_model(ops):
    cfg = LogConfig(segment_bytes=900, index_interval_bytes=200)
    with _Dir() as path:
        plog = PartitionLog(path, cfg)
        model: list[tuple[int, int, int, bytes, bytes | None]] = []  # (batch base, offset, ts, key, value)
        for op in ops:
            if op[0] == "append":
                _, recs, codec = op
                info = plog.append(_build(recs, codec))
                base = len(model)
                assert info.first_offset == base
                model += [(base, base + i, ts, k, v) for i, (ts, k, v) in enumerate(recs)]
                assert plog.log_end_offset == len(model)
            elif op[0] == "read":
                _, offset, max_bytes = op
                if offset > len(model):
                    continue
                data = plog.read(offset, max_bytes)
                if offset == len(model):
                    assert data == b""
                    continue
                got = [(r.offset, r.timestamp, r.key, r.value) for r in R.iter_records(data)]
                first_base = next(b for b, o, *_ in model if o == offset)
                expected = [(o, t, k, v) for b, o, t, k, v in model if o >= first_base]
                assert got == expected[: len(got)]
                assert got and got[0][0] == first_base
                assert len(data) <= max_bytes or len(batch_offsets(data)) == 1
            elif op[0] == "time":
                found = plog.offset_for_timestamp(op[1])
                expected = next(((o, t) for _b, o, t, _k, _v in model if t >= op[1]), None)
                assert (None if found is None else (found.offset, found.timestamp)) == expected
            elif op[0] == "roll":
                plog.roll()
            elif op[0] == "reopen":
                if op[1]:
                    plog.close()
                    plog = PartitionLog(path, cfg, clean_shutdown=True)
                else:
                    # Unclean: files as the OS has them, no final index entries.
                    plog = PartitionLog(path, cfg)
                assert plog.log_end_offset == len(model)
            elif op[0] == "truncate":
                target = op[1]
                if target >= len(model):
                    continue
                plog.truncate_to(target)
                cut = next(b for b, o, *_ in model if o == target)
                model = model[:cut]
                assert plog.log_end_offset == len(model)
        assert all_records(plog) == [(o, t, k, v) for _b, o, t, k, v in model]


@SETTINGS
@given(batches=batches_st, data=st.data())
def test_reopen_after_damage_recovers_a_valid_prefix(batches, data):
    cfg = LogConfig(segment_bytes=700)
    with _Dir() as path:
        plog = PartitionLog(path, cfg)
        ends = []
        for recs in batches:
            plog.append(_build(recs, 0))
            ends.append(plog.log_end_offset)
        original = all_records(plog)
        last = plog.segments[-1].log_path
        size = os.path.getsize(last)
        if data.draw(st.booleans(), label="truncate") or size == 0:
            with open(last, "r+b") as f:
                f.truncate(data.draw(st.integers(0, size), label="cut"))
        else:
            # A batch's base offset lies outside its CRC: a flip there that
            # moves it forward reads as an offset gap, which recovery accepts
            # as Kafka's does (compacted logs have gaps).  Damage anywhere else.
            with open(last, "rb") as f:
                raw = f.read()
            unprotected = {pos + i for pos, _s, _m in R.iter_entries(raw, partial_ok=True)
                           for i in range(8)}
            where = data.draw(st.sampled_from(
                [i for i in range(size) if i not in unprotected] or [size - 1]), label="where")
            with open(last, "r+b") as f:
                f.seek(where)
                byte = f.read(1)[0]
                f.seek(where)
                f.write(bytes([byte ^ data.draw(st.integers(1, 255), label="flip")]))
        plog = PartitionLog(path, cfg)
        recovered = all_records(plog)
        # A prefix made of whole batches, ending where the log end offset says.
        assert recovered == original[: len(recovered)]
        assert plog.log_end_offset in [0, *ends]
        assert plog.log_end_offset == (recovered[-1][0] + 1 if recovered else plog.segments[-1].base_offset)
        info = plog.append(_build([(1, b"z", b"z")], 0))
        assert info.first_offset == plog.log_end_offset - 1


@SETTINGS
@given(batches=batches_st, codec=codec_st)
def test_compaction_keeps_the_latest_value_of_every_key(batches, codec):
    cfg = LogConfig(segment_bytes=600, cleanup_policy="compact", delete_retention_ms=1_000)
    with _Dir() as path:
        plog = PartitionLog(path, cfg)
        for recs in batches:
            plog.append(_build(recs, codec))
        plog.roll()  # everything becomes cleanable
        before = all_records(plog)
        latest = {}
        for o, _t, k, v in before:
            latest[k] = (o, v)
        by_offset = {o: (t, k, v) for o, t, k, v in before}
        plog.compact(now_ms=50_000, force=True)
        after = all_records(plog)
        # Offsets never change; what is left is exactly the latest record of each key.
        for o, t, k, v in after:
            assert by_offset[o] == (t, k, v)
        assert {k: (o, v) for o, _t, k, v in after} == latest
        assert len(after) == len(latest)
        # Codecs are preserved batch by batch.
        for raw in plog.batches():
            header = R.batch_header(raw)
            assert header.records_count == 0 or header.compression == codec
        # A reopened log reads the same.
        plog.close()
        plog = PartitionLog(path, cfg, clean_shutdown=True)
        assert all_records(plog) == after
        assert plog.log_end_offset == before[-1][0] + 1
        # Past the delete horizon, tombstones go.
        plog.compact(now_ms=50_000 + 1_000, force=True)
        final = all_records(plog)
        assert {k: (o, v) for o, _t, k, v in final} == {
            k: ov for k, ov in latest.items() if ov[1] is not None
        }
