"""A cleaner offset that a truncation reset came back from the checkpoint file
at the next start (the checkpoint writer kept the old entry), and
``truncate_to`` could leave the log start offset above the log end offset."""

from __future__ import annotations

from kcoord.storage.config import LogConfig
from kcoord.storage.manager import LogManager
from tests.storage.helpers import batch


def test_a_reset_cleaner_offset_stays_reset_after_a_restart(tmp_path):
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=500, min_cleanable_dirty_ratio=0.0)
    manager = LogManager(str(tmp_path), config)
    plog = manager.get_or_create("c", 0)
    for i in range(40):
        plog.append(batch([b"v"], keys=[b"k%d" % (i % 3)]))
    plog.roll()
    assert plog.compact(force=True) is not None
    assert plog.cleaner_offset == 40
    manager.write_checkpoints()
    plog.truncate_to(30)
    assert plog.cleaner_offset is None
    for i in range(20):  # the log grows past the old cleaner offset again
        plog.append(batch([b"w"], keys=[b"k%d" % (i % 3)]))
    end = plog.log_end_offset
    assert end > 40
    manager.close()
    again = LogManager(str(tmp_path), config).get_or_create("c", 0)
    # Records appended after the truncation were never cleaned: a restored
    # offset of 40 would make the cleaner skip the new records below it.
    assert again.cleaner_offset is None
    assert again.log_end_offset == end


def test_truncation_below_the_log_start_keeps_start_at_most_end(tmp_path):
    manager = LogManager(str(tmp_path), LogConfig(segment_bytes=200))
    plog = manager.get_or_create("t", 0)
    for _ in range(20):
        plog.append(batch([b"0123456789"]))
    plog.advance_log_start_offset(15)
    assert plog.segments[0].base_offset < 12  # the truncation stays inside the log
    plog.truncate_to(12)
    assert plog.log_end_offset == 12
    assert plog.log_start_offset <= plog.log_end_offset
    manager.close()
    again = LogManager(str(tmp_path)).get_or_create("t", 0)
    assert again.log_start_offset <= again.log_end_offset == 12
