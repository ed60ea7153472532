"""Mutants of the index sanity check and of the flush bookkeeping survived every
storage test: disabling the check, or forgetting a segment that received bytes
while its fsync ran, changed no outcome.  Indexes are caches nothing
checksums, so opening a segment rebuilds any index that fails these checks;
and a segment stays "unflushed" until an fsync covered everything written to
it."""

from __future__ import annotations

import struct

import pytest

from kcoord.storage.config import LogConfig
from kcoord.storage.index import OffsetIndex, TimeIndex
from kcoord.storage.log import PartitionLog
from tests.storage.helpers import batch


def _offset_index(tmp_path, entries, extra=b""):
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(b"".join(struct.pack(">ii", r, p) for r, p in entries) + extra)
    return OffsetIndex(str(path), 100)


def _time_index(tmp_path, entries, extra=b""):
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(b"".join(struct.pack(">qi", t, r) for t, r in entries) + extra)
    return TimeIndex(str(path), 100)


@pytest.mark.parametrize("entries,extra,log_size,sane", [
    ([(0, 0), (5, 100), (9, 250)], b"", 300, True),
    ([], b"", 0, True),
    ([(0, 0)], b"", 0, True),            # an empty log still has position 0
    ([(0, 1)], b"", 0, False),           # ...but nothing after it
    ([(0, 0), (5, 299)], b"", 300, True),
    ([(0, 0), (5, 300)], b"", 300, False),  # a position at or past the log's end
    ([(0, 0), (5, 100)], b"\x00", 300, False),  # a torn entry
    ([(-1, 0)], b"", 300, False),
    ([(0, -4)], b"", 300, False),
    ([(3, 10), (3, 20)], b"", 300, False),  # offsets must increase
    ([(3, 10), (4, 10)], b"", 300, False),  # positions must increase
    ([(3, 10), (2, 20)], b"", 300, False),
    ([(1, 10), (2, 20), (2, 30)], b"", 300, False),
    ([(1, 10), (2, 20), (3, 20)], b"", 300, False),
])
def test_offset_index_sanity(tmp_path, entries, extra, log_size, sane):
    assert _offset_index(tmp_path, entries, extra).is_sane(log_size) is sane


@pytest.mark.parametrize("entries,extra,sane", [
    ([(1_000, 0), (2_000, 3), (3_000, 3)], b"", True),  # equal offsets are fine
    ([(1_000, 0)], b"", True),
    ([], b"", True),
    ([(1_000, 0)], b"\x01\x02", False),
    ([(1_000, -1)], b"", False),
    ([(1_000, 1), (1_000, 2)], b"", False),  # timestamps must increase
    ([(1_000, 5), (2_000, 4)], b"", False),  # offsets never go back
    ([(1_000, 1), (2_000, 2), (2_000, 3)], b"", False),
    ([(1_000, 3), (2_000, 4), (3_000, 2)], b"", False),
])
def test_time_index_sanity(tmp_path, entries, extra, sane):
    assert _time_index(tmp_path, entries, extra).is_sane() is sane


def test_a_segment_written_during_its_fsync_stays_unflushed(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig())
    plog.append(batch([b"a"]))
    segment = plog.segments[0]
    pending, upto = plog.flusher._pending()
    plog.append(batch([b"b"]))  # lands while the fsync of the first runs
    plog.flusher._fsync(pending, upto)
    assert plog.flusher.unflushed.get(segment.base_offset) is segment
    assert plog.recovery_point == upto == 1
    plog.flush()
    assert plog.flusher.unflushed == {} and plog.recovery_point == 2


def test_truncation_lowers_the_recovery_point_and_keeps_a_cleaner_offset_at_the_end(tmp_path):
    plog = PartitionLog(str(tmp_path / "c-0"), LogConfig(cleanup_policy="compact", segment_bytes=400))
    for i in range(12):
        plog.append(batch([b"v"], keys=[b"k%d" % i]))
    plog.flush()
    assert plog.recovery_point == 12
    plog.cleaner_offset = 6
    plog.truncate_to(6)
    assert plog.log_end_offset == 6
    assert plog.recovery_point == 6  # the bytes past the end are gone, not flushed
    assert plog.cleaner_offset == 6  # cleaned up to the end: still true


def test_start_writes_a_missing_partition_metadata_and_forgets_gone_logs(tmp_path):
    import asyncio
    import os

    from kcoord.storage.manager import RECOVERY_POINT_FILE, read_checkpoint, read_partition_metadata
    from tests.issues.test_deleted_topic_stays_deleted import _crash, _open

    topics = _open(tmp_path)
    created = asyncio.run(topics.create("meta", 1, {}))
    topics.logs.write_checkpoints()
    _crash(topics)
    os.unlink(tmp_path / "meta-0" / "partition.metadata")  # e.g. a folder from an old Kafka
    # A checkpoint entry of a log that is gone (its folder removed by hand).
    entries = read_checkpoint(str(tmp_path / RECOVERY_POINT_FILE))
    entries[("gone", 3)] = 42
    from kcoord.storage.manager import write_checkpoint
    write_checkpoint(str(tmp_path / RECOVERY_POINT_FILE), entries)
    again = _open(tmp_path)
    from kcoord.broker.topics.manager import topic_id_to_str
    assert read_partition_metadata(str(tmp_path / "meta-0")) == topic_id_to_str(created.topic_id)
    again.logs.write_checkpoints()
    assert ("gone", 3) not in read_checkpoint(str(tmp_path / RECOVERY_POINT_FILE))
    _crash(again)


def test_deleting_a_partition_that_is_not_open_removes_its_folder(tmp_path):
    import os

    from kcoord.storage.manager import LogManager

    os.makedirs(tmp_path / "loose-0")
    (tmp_path / "loose-0" / "00000000000000000000.log").write_bytes(b"")
    LogManager(str(tmp_path)).delete("loose", 0)
    assert os.listdir(tmp_path) == []
