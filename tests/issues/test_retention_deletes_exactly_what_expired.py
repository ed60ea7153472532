"""The retention tests passed when retention deleted one unexpired segment too
many: they checked that what remained was within retention, not that nothing
within retention was lost.  Kafka deletes a segment when ``now - its largest
timestamp > retention.ms``, and by size only while the log stays at least
``retention.bytes`` without it."""

from __future__ import annotations

from kcoord.storage.config import LogConfig
from kcoord.storage.log import PartitionLog
from tests.storage.helpers import batch


def _log(tmp_path, **config):
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_bytes=300, **config))
    for i in range(12):  # one batch (~170 bytes) per segment, timestamps 1000, 2000, ...
        plog.append(batch([b"x" * 100], ts=1_000 * (i + 1)))
    assert [s.max_timestamp for s in plog.segments] == [1_000 * (i + 1) for i in range(12)]
    return plog


def test_time_retention_keeps_a_segment_exactly_at_the_limit(tmp_path):
    plog = _log(tmp_path, retention_ms=5_000)
    # now - 4000 == 5000 is not over the limit: segments up to ts 3000 go.
    assert plog.delete_old_segments(now_ms=9_000) == 3
    assert [s.max_timestamp for s in plog.segments][0] == 4_000
    assert plog.log_start_offset == 3


def test_size_retention_keeps_at_least_retention_bytes(tmp_path):
    plog = _log(tmp_path, retention_ms=-1, retention_bytes=1_000)
    seg = plog.segments[0].size
    total = plog.size_bytes
    deleted = plog.delete_old_segments(now_ms=0)
    assert plog.size_bytes >= 1_000 and plog.size_bytes - seg < 1_000
    assert deleted == (total - 1_000) // seg


def test_nothing_goes_when_nothing_expired(tmp_path):
    plog = _log(tmp_path, retention_ms=20_000, retention_bytes=100_000)
    assert plog.delete_old_segments(now_ms=13_000) == 0
    assert len(plog.segments) == 12 and plog.log_start_offset == 0


def test_retention_zero_deletes_everything_but_keeps_the_log_end(tmp_path):
    plog = _log(tmp_path, retention_ms=0)
    assert plog.delete_old_segments(now_ms=13_000) == 12
    assert plog.log_end_offset == 12 and plog.log_start_offset == 12
    assert len(plog.segments) == 1 and plog.segments[0].size == 0
    # The new empty active segment is never deleted, even long after its file's
    # modification time (what retention goes by when a segment has no timestamp).
    far_future = 10 ** 15
    assert plog.delete_old_segments(now_ms=far_future) == 0
    assert len(plog.segments) == 1


def test_every_expired_segment_goes_when_the_active_one_is_empty(tmp_path):
    plog = _log(tmp_path, retention_ms=5_000)
    plog.roll()  # the active segment is now empty
    assert plog.delete_old_segments(now_ms=100_000) == 12
    assert len(plog.segments) == 1 and plog.log_start_offset == plog.log_end_offset == 12


def test_size_retention_of_zero_bytes_and_an_exact_fit(tmp_path):
    plog = _log(tmp_path, retention_ms=-1, retention_bytes=0)
    assert plog.delete_old_segments(now_ms=0) == 12
    exact = _log(tmp_path / "exact", retention_ms=-1, retention_bytes=1)
    sizes = [s.size for s in exact.segments]
    # Without its first three segments the log is exactly retention.bytes: they go.
    exact.config = LogConfig(segment_bytes=300, retention_ms=-1,
                             retention_bytes=sum(sizes[3:]))
    assert exact.delete_old_segments(now_ms=0) == 3
    assert exact.size_bytes == sum(sizes[3:])


def test_segments_wholly_below_the_log_start_go_even_without_retention(tmp_path):
    plog = _log(tmp_path, retention_ms=-1, retention_bytes=-1)
    base = [s.base_offset for s in plog.segments]
    plog.advance_log_start_offset(base[4])  # exactly the base of the fifth segment
    assert plog.delete_old_segments(now_ms=0) == 4
    assert plog.segments[0].base_offset == base[4] == plog.log_start_offset
    plog.advance_log_start_offset(plog.log_end_offset)  # past every segment
    assert plog.delete_old_segments(now_ms=0) == len(base) - 5
    assert len(plog.segments) == 1  # the active segment stays
