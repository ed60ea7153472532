"""Deleting a partition left its old log-start, recovery-point and cleaner
checkpoints on disk until the next checkpoint write.  A partition of the same
name created afterwards and crashed before any other checkpoint write reopened
with the old topic's log start offset, hiding every acknowledged record.
Also: a compacted log whose policy later changed to ``delete`` lost everything
after its first offset gap in recovery, because recovery then demanded
contiguous offsets."""

from __future__ import annotations

from kcoord.protocol.records import build_batch, Record
from kcoord.storage.config import LogConfig
from kcoord.storage.manager import LogManager


def _batch(n, key=b"k"):
    return build_batch([Record(key=key + b"%d" % i, value=b"v%d" % i, timestamp=1_000 + i)
                        for i in range(n)])


def test_recreated_partition_keeps_its_records_after_a_crash(tmp_path):
    manager = LogManager(str(tmp_path))
    old = manager.get_or_create("t", 0)
    old.append(_batch(100))
    old.advance_log_start_offset(99)
    manager.write_checkpoints()
    manager.delete("t", 0)

    new = manager.get_or_create("t", 0)
    new.append(_batch(50))
    # crash: no close, no further checkpoint write
    reopened = LogManager(str(tmp_path)).get_or_create("t", 0)
    assert reopened.log_start_offset == 0
    assert reopened.log_end_offset == 50


def test_compacted_log_reopened_under_delete_policy_keeps_its_gaps(tmp_path):
    compact = LogConfig(cleanup_policy=("compact",), segment_bytes=1024, min_cleanable_dirty_ratio=0.0)
    manager = LogManager(str(tmp_path), compact)
    plog = manager.get_or_create("c", 0)
    for _ in range(20):
        plog.append(_batch(5, key=b"same"))
    plog.roll()
    assert plog.compact(force=True) is not None
    end = plog.log_end_offset
    manager.write_checkpoints()
    # unclean stop, then the broker's default policy is now delete
    reopened = LogManager(str(tmp_path), LogConfig()).get_or_create("c", 0)
    assert reopened.log_end_offset == end
