"""Transactions in a partition log: open transactions and the last stable
offset, end markers, the aborted transactions a read_committed fetch is given,
their rebuilding after a restart, and compaction that never lets an aborted
record stand for a key."""

from __future__ import annotations

import pytest

from kcoord.protocol.records import Record, build_batch, decode_batch, decode_control_record, iter_entries
from kcoord.protocol.records import batch_header
from kcoord.storage import LogConfig, PartitionLog
from kcoord.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from kcoord.storage.producer_state import ABORT, COMMIT, AbortedTxn
from tests.storage.helpers import all_records


def txn_batch(pid, seq, values, *, epoch=0, keys=None, transactional=True, ts=1_000):
    recs = [Record(None, ts + i, keys[i] if keys else None, v) for i, v in enumerate(values)]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=transactional)


def test_an_open_transaction_holds_the_last_stable_offset_until_its_marker(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    plog.append(txn_batch(-1, -1, [b"plain"], transactional=False))
    assert plog.last_stable_offset == 1
    plog.append(txn_batch(7, 0, [b"a", b"b"]))
    plog.append(txn_batch(8, 0, [b"c"]))
    plog.append(txn_batch(7, 2, [b"d"]))
    assert plog.high_watermark == 5
    assert plog.last_stable_offset == 1  # producer 7's transaction began at 1
    info = plog.append_marker(7, 0, True, coordinator_epoch=0, now_ms=2_000)
    assert info.first_offset == info.last_offset == 5
    assert plog.last_stable_offset == 3  # producer 8's, at 3, is still open
    plog.append_marker(8, 0, False, coordinator_epoch=0, now_ms=2_000)
    assert plog.last_stable_offset == plog.high_watermark == 7
    # the markers are control batches of Kafka's layout
    kinds = []
    for data in plog.batches():
        for pos, _size, _magic in iter_entries(data):
            header = batch_header(data, pos)
            if header.is_control:
                record = decode_batch(data, pos, verify=True).records[0]
                kinds.append((header.producer_id, header.is_transactional,
                              decode_control_record(record)))
    assert kinds == [(7, True, (COMMIT, 0)), (8, True, (ABORT, 0))]


def test_an_abort_is_given_to_the_reads_that_overlap_it(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    plog.append(txn_batch(7, 0, [b"a", b"b"]))          # 0-1
    plog.append(txn_batch(9, 0, [b"x"]))                # 2, still open when 7 aborts
    plog.append_marker(7, 0, False, coordinator_epoch=3)  # 3
    plog.append(txn_batch(-1, -1, [b"p"], transactional=False))  # 4
    plog.append_marker(9, 0, True, coordinator_epoch=3)  # 5
    aborted = AbortedTxn(producer_id=7, first_offset=0, last_offset=3, last_stable_offset=2)
    assert plog.aborted_transactions(0, 6) == [aborted]
    assert plog.aborted_transactions(3, 4) == [aborted]  # the marker itself overlaps
    assert plog.aborted_transactions(4, 6) == []          # after its marker
    # a transaction that begins past the range is not given either
    plog.append(txn_batch(7, 0, [b"c"], epoch=1))      # 6
    plog.append_marker(7, 1, False, coordinator_epoch=3)  # 7
    assert [t.first_offset for t in plog.aborted_transactions(4, 6)] == []
    assert [t.first_offset for t in plog.aborted_transactions(4, 7)] == [6]


def test_a_plain_batch_during_its_producers_transaction_is_refused(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    plog.append(txn_batch(7, 0, [b"a"]))
    with pytest.raises(InvalidTxnStateError, match="Expected transactional write from producer 7"):
        plog.append(txn_batch(7, 1, [b"b"], transactional=False))
    assert plog.log_end_offset == 1
    plog.append_marker(7, 0, True, coordinator_epoch=0)
    plog.append(txn_batch(7, 1, [b"b"], transactional=False))  # after the end: fine
    assert plog.log_end_offset == 3


def test_markers_from_an_older_epoch_or_coordinator_are_refused(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    plog.append(txn_batch(7, 0, [b"a"], epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        plog.append_marker(7, 1, True, coordinator_epoch=0)
    plog.append_marker(7, 2, False, coordinator_epoch=5)
    plog.append(txn_batch(7, 0, [b"b"], epoch=3))
    with pytest.raises(TransactionCoordinatorFencedError):
        plog.append_marker(7, 3, True, coordinator_epoch=4)
    assert plog.log_end_offset == 3
    assert plog.last_stable_offset == 2  # still open after the refusals
    # a marker of a bumped epoch (the coordinator's fencing abort) is taken
    plog.append_marker(7, 4, False, coordinator_epoch=5)
    assert plog.last_stable_offset == plog.log_end_offset


def test_open_and_aborted_transactions_are_rebuilt_after_a_restart(tmp_path):
    path = str(tmp_path / "t-0")
    plog = PartitionLog(path)
    plog.append(txn_batch(7, 0, [b"a"]))
    plog.append_marker(7, 0, False, coordinator_epoch=1)
    plog.append(txn_batch(8, 0, [b"b"]))
    plog.close_files()  # a crash: no producer snapshot, the log is replayed
    again = PartitionLog(path, clean_shutdown=False)
    assert not again.producers_loaded
    again._scan_producers()
    assert again.last_stable_offset == 2
    assert again.aborted_transactions(0, 3) == [AbortedTxn(7, 0, 1, 2)]
    with pytest.raises(InvalidTxnStateError):
        again.append(txn_batch(8, 1, [b"c"], transactional=False))
    again.append_marker(8, 0, True, coordinator_epoch=1)
    assert again.last_stable_offset == again.log_end_offset == 4


def test_retention_forgets_aborts_below_the_log_start_but_not_open_transactions(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    plog.append(txn_batch(7, 0, [b"a"]))
    plog.append_marker(7, 0, False, coordinator_epoch=0)
    plog.append(txn_batch(8, 0, [b"b"]))
    plog.append(txn_batch(-1, -1, [b"p"], transactional=False))
    plog.advance_log_start_offset(3)
    plog.producers.truncate_head(plog.log_start_offset)
    assert plog.aborted_transactions(0, 10) == []
    assert plog.last_stable_offset == 2  # producer 8's transaction is still open
    assert plog.producers.entry(8) is not None


def test_compaction_keeps_the_committed_value_of_a_key_an_abort_wrote_later(tmp_path):
    config = LogConfig(segment_bytes=400, cleanup_policy="compact")
    plog = PartitionLog(str(tmp_path / "t-0"), config)
    plog.append(txn_batch(-1, -1, [b"committed"], keys=[b"k"], transactional=False))
    plog.append(txn_batch(7, 0, [b"aborted"], keys=[b"k"]))
    plog.append_marker(7, 0, False, coordinator_epoch=0)
    for i in range(30):  # fill segments past the transaction
        plog.append(txn_batch(-1, -1, [b"x" * 40], keys=[b"other%d" % (i % 3)],
                              transactional=False))
    plog.roll()
    assert plog.compact(now_ms=10_000, force=True) is not None
    values = {key: value for _o, _t, key, value in all_records(plog)}
    assert values[b"k"] == b"committed"
    assert b"aborted" not in [v for *_x, v in all_records(plog)]


def test_compaction_stops_at_an_open_transaction(tmp_path):
    config = LogConfig(segment_bytes=400, cleanup_policy="compact")
    plog = PartitionLog(str(tmp_path / "t-0"), config)
    plog.append(txn_batch(-1, -1, [b"old"], keys=[b"k"], transactional=False))
    plog.append(txn_batch(7, 0, [b"pending"], keys=[b"k"]))  # may still be aborted
    for i in range(30):
        plog.append(txn_batch(-1, -1, [b"x" * 40], keys=[b"k2"], transactional=False))
    plog.roll()
    plog.compact(now_ms=10_000, force=True)
    records = all_records(plog)
    assert (0, 1_000, b"k", b"old") in records  # not shadowed by the open transaction
    assert any(v == b"pending" for *_x, v in records)


def _txnindex_entries(path):
    import struct
    data = open(path, "rb").read()
    return [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data), 34)]


def test_each_abort_is_listed_in_its_segments_txnindex_as_kafka_writes_it(tmp_path):
    directory = tmp_path / "t-0"
    plog = PartitionLog(str(directory))
    plog.append(txn_batch(7, 0, [b"a"]))
    plog.append_marker(7, 0, True, coordinator_epoch=0, now_ms=2_000)  # a commit lists nothing
    assert not (directory / "00000000000000000000.txnindex").exists()
    plog.append(txn_batch(7, 1, [b"b"]))                 # 2
    plog.append(txn_batch(8, 0, [b"c"]))                 # 3
    plog.append_marker(7, 0, False, coordinator_epoch=0, now_ms=2_000)  # 4: 8's is still open at 3
    plog.roll()
    plog.append_marker(8, 0, False, coordinator_epoch=0, now_ms=2_000)  # 5, in the next segment
    plog.close()
    assert _txnindex_entries(directory / "00000000000000000000.txnindex") == [
        (0, 7, 2, 4, 3)]
    assert _txnindex_entries(directory / "00000000000000000005.txnindex") == [
        (0, 8, 3, 5, 6)]


def test_a_torn_marker_takes_its_txnindex_entry_with_it(tmp_path):
    directory = tmp_path / "t-0"
    plog = PartitionLog(str(directory))
    plog.append(txn_batch(7, 0, [b"a"]))
    plog.append_marker(7, 0, False, coordinator_epoch=0, now_ms=2_000)
    size = plog.active_segment.size
    plog.close()
    with open(directory / "00000000000000000000.log", "r+b") as f:
        f.truncate(size - 5)  # the marker cut short by a crash
    again = PartitionLog(str(directory), clean_shutdown=False)
    assert again.log_end_offset == 1
    again.close()
    path = directory / "00000000000000000000.txnindex"
    assert not path.exists() or _txnindex_entries(path) == []


def test_compaction_keeps_each_kept_aborts_txnindex_entry(tmp_path):
    directory = tmp_path / "t-0"
    plog = PartitionLog(str(directory), LogConfig(segment_bytes=400, cleanup_policy="compact"))
    plog.append(txn_batch(7, 0, [b"aborted"], keys=[b"k"]))
    plog.append_marker(7, 0, False, coordinator_epoch=0, now_ms=2_000)
    for i in range(30):
        plog.append(txn_batch(-1, -1, [b"x" * 40], keys=[b"o%d" % (i % 3)],
                              transactional=False))
    plog.roll()
    assert plog.compact(now_ms=10_000, force=True) is not None
    plog.close()
    entries = [e for p in sorted(directory.glob("*.txnindex")) for e in _txnindex_entries(p)]
    assert entries == [(0, 7, 0, 1, 2)]
    assert not list(directory.glob("*.deleted")) and not list(directory.glob("*.swap"))


def test_a_clean_shutdown_leaves_a_snapshot_the_next_open_reads_instead_of_the_log(
        tmp_path, monkeypatch):
    from kcoord.storage import producer_load

    directory = tmp_path / "t-0"
    plog = PartitionLog(str(directory))
    plog.append(txn_batch(7, 0, [b"a"], epoch=3))
    plog.append_marker(7, 3, False, coordinator_epoch=2, now_ms=2_000)
    plog.append(txn_batch(8, 0, [b"b", b"c"]))  # 2-3, open
    plog.close()
    (snapshot,) = directory.glob("*.snapshot")
    assert snapshot.name == "00000000000000000004.snapshot"

    def no_replay(*_args):
        raise AssertionError("the log was replayed")

    monkeypatch.setattr(producer_load, "replay", no_replay)
    monkeypatch.setattr(producer_load, "scan", no_replay)
    again = PartitionLog(str(directory), clean_shutdown=True)
    assert again.producers_loaded
    assert again.last_stable_offset == 2
    assert again.aborted_transactions(0, 4) == [AbortedTxn(7, 0, 1, 2)]
    entry = again.producers.entry(7)
    assert (entry.epoch, entry.coordinator_epoch, entry.txn_first_offset) == (3, 2, -1)
    assert again.producers.entry(8).last_seq == 1
    # the producer goes on where it was, and a retry of its last batch is a duplicate
    assert again.append(txn_batch(8, 0, [b"b", b"c"])).duplicate
    again.append(txn_batch(8, 2, [b"d"]))
    with pytest.raises(InvalidTxnStateError):
        again.append(txn_batch(8, 3, [b"e"], transactional=False))
    assert not list(directory.glob("*.snapshot"))  # read once, then gone


def test_a_crash_after_the_snapshot_replays_the_log(tmp_path):
    directory = tmp_path / "t-0"
    plog = PartitionLog(str(directory))
    plog.append(txn_batch(7, 0, [b"a"]))
    plog.close()  # a snapshot at 1
    again = PartitionLog(str(directory), clean_shutdown=True)
    again.append_marker(7, 0, False, coordinator_epoch=0)
    again.append(txn_batch(8, 0, [b"b"]))
    again.close_files()  # a crash: no new snapshot
    third = PartitionLog(str(directory), clean_shutdown=False)
    assert not third.producers_loaded
    third._scan_producers()
    assert third.last_stable_offset == 2
    assert third.aborted_transactions(0, 3) == [AbortedTxn(7, 0, 1, 2)]


@pytest.mark.parametrize("load", ["scan", "replay"])
def test_an_abort_whose_index_entry_a_crash_lost_is_listed_again_for_the_next_clean_start(
        tmp_path, load):
    # A crash between an abort marker's write and its .txnindex entry's: the
    # replay after it rebuilds the entry, so a clean stop and a start from the
    # producer snapshot (which takes its aborts from the indexes) still drop the
    # aborted records from a read_committed read.
    directory = tmp_path / "t-0"
    plog = PartitionLog(str(directory))
    plog.append(txn_batch(7, 0, [b"a"]))                        # 0
    plog.append_marker(7, 0, False, coordinator_epoch=0, now_ms=2_000)  # 1, listed
    plog.roll()
    plog.append(txn_batch(8, 0, [b"b", b"c"]))                  # 2-3
    plog.append(txn_batch(9, 0, [b"d"]))                        # 4, open over 8's abort
    plog.append_marker(8, 0, False, coordinator_epoch=0, now_ms=2_000)  # 5
    plog.close_files()  # the crash
    first, index = directory / "00000000000000000000.txnindex", \
        directory / "00000000000000000002.txnindex"
    with open(index, "r+b") as f:
        f.truncate(0)  # the entry of the marker at 5 was not written
    again = PartitionLog(str(directory), clean_shutdown=False)
    if load == "scan":
        again._scan_producers()
    else:
        again.append_marker(9, 0, True, coordinator_epoch=0,   # 6: a marker replays at once
                            now_ms=2_000)
    expected = [AbortedTxn(7, 0, 1, 2), AbortedTxn(8, 2, 5, 4)]
    assert again.aborted_transactions(0, 7) == expected
    assert _txnindex_entries(first) == [(0, 7, 0, 1, 2)]
    assert _txnindex_entries(index) == [(0, 8, 2, 5, 4)]
    again.close()
    third = PartitionLog(str(directory), clean_shutdown=True)
    assert third.producers_loaded  # from the snapshot and the index
    assert third.aborted_transactions(0, 7) == expected
    assert _txnindex_entries(first) == [(0, 7, 0, 1, 2)]
    assert _txnindex_entries(index) == [(0, 8, 2, 5, 4)]


def test_a_damaged_snapshot_is_not_read(tmp_path):
    directory = tmp_path / "t-0"
    plog = PartitionLog(str(directory))
    plog.append(txn_batch(7, 0, [b"a"]))
    plog.close()
    (snapshot,) = directory.glob("*.snapshot")
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    again = PartitionLog(str(directory), clean_shutdown=True)
    assert not again.producers_loaded
    again._scan_producers()
    assert again.last_stable_offset == 0


def test_a_read_looks_at_the_aborts_of_its_range_only(tmp_path):
    """Aborts far past a read's range are not scanned (Kafka stops at the first
    abort whose last stable offset is past the range)."""
    plog = PartitionLog(str(tmp_path / "t-0"))
    for epoch in range(200):
        plog.append(txn_batch(7, 0, [b"x"], epoch=epoch))
        plog.append_marker(7, epoch, False, coordinator_epoch=0, now_ms=2_000)
    looked = []

    class Counting(list):
        def __getitem__(self, i):
            looked.append(i)
            return list.__getitem__(self, i)

    plog.producers.aborted = Counting(plog.producers.aborted)
    assert plog.aborted_transactions(0, 3) == [AbortedTxn(7, 0, 1, 2), AbortedTxn(7, 2, 3, 4)]
    assert len(looked) == 2
    # an abort that began while another transaction was open reaches back past it
    other = PartitionLog(str(tmp_path / "u-0"))
    other.append(txn_batch(8, 0, [b"early"]))  # 0, open throughout
    other.append(txn_batch(7, 0, [b"a"]))      # 1
    other.append_marker(7, 0, False, coordinator_epoch=0, now_ms=2_000)  # 2, lso 0
    other.append(txn_batch(9, 0, [b"b"]))      # 3
    other.append_marker(9, 0, False, coordinator_epoch=0, now_ms=2_000)  # 4, lso 0
    assert [t.producer_id for t in other.aborted_transactions(0, 2)] == [7]
    assert [t.producer_id for t in other.aborted_transactions(0, 4)] == [7, 9]


def test_an_index_entry_written_while_its_index_is_fsynced_is_fsynced_by_the_next_flush(
        tmp_path, monkeypatch):
    # A flush runs in a worker thread while appends go on: an abort listed in
    # the .txnindex during that fsync must not count as flushed (the recovery
    # point would move past a marker whose entry a power loss can take).
    import os as real_os

    from kcoord.storage import index as index_module

    directory = tmp_path / "t-0"
    plog = PartitionLog(str(directory))
    plog.append(txn_batch(7, 0, [b"a"]))
    plog.append_marker(7, 0, False, coordinator_epoch=0, now_ms=2_000)
    txn_index = plog.active_segment.txn_index
    synced = []

    class DuringFsync:
        def __getattr__(self, name):
            return getattr(real_os, name)

        def fsync(self, fd):
            synced.append(fd)
            if len(synced) == 1:  # the next abort is listed meanwhile
                plog.append(txn_batch(8, 0, [b"b"]))
                plog.append_marker(8, 0, False, coordinator_epoch=0, now_ms=2_000)
            real_os.fsync(fd)

    monkeypatch.setattr(index_module, "os", DuringFsync())
    txn_index.flush()
    txn_index.flush()
    assert synced == [txn_index.fd, txn_index.fd]  # the second flush fsyncs it
    assert len(txn_index) == 2
    plog.close()
