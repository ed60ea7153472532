"""Small builders shared by the storage tests."""

from __future__ import annotations

from kcoord.protocol import records as R
from kcoord.protocol.records import Record


def batch(values, *, ts=1_000, keys=None, codec=0, ts_step=1) -> bytes:
    """A producer batch (base offset 0) of ``values`` with timestamps ts, ts+step, ..."""
    recs = []
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        recs.append(Record(None, ts + i * ts_step, key, value))
    return R.build_batch(recs, compression_type=codec)


def all_records(plog, start=None):
    """(offset, timestamp, key, value) of every record in the log."""
    data = b"".join(plog.batches(start))
    return [(r.offset, r.timestamp, r.key, r.value) for r in R.iter_records(data)]


def batch_offsets(data: bytes):
    """(base offset, last offset) of each batch in a record set."""
    out = []
    for pos, _size, _magic in R.iter_entries(data):
        h = R.batch_header(data, pos)
        out.append((h.base_offset, h.last_offset))
    return out
