"""The idempotent-producer rules of storage.producer_state, batch by batch."""

from __future__ import annotations

import pytest

from kcoord.protocol.records import Record, batch_header, build_batch
from kcoord.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from kcoord.storage.producer_state import INT32_MAX, NUM_BATCHES_TO_RETAIN, ProducerState, last_sequence


def header(seq, count=1, pid=7, epoch=0, base_offset=0, ts=100):
    return batch_header(build_batch([Record(None, ts, b"k", b"v")] * count,
                                    base_offset=base_offset, producer_id=pid,
                                    producer_epoch=epoch, base_sequence=seq))


def append(state, seq, count=1, epoch=0, offset=0):
    h = header(seq, count, epoch=epoch, base_offset=offset)
    state.check(h, offset, "t-0")
    state.update(h, offset, offset + count - 1, 100)


def test_sequences_must_follow_within_an_epoch():
    state = ProducerState()
    append(state, 0, 3)
    append(state, 3, 2, offset=3)
    with pytest.raises(OutOfOrderSequenceError, match=r"6 \(incoming seq. number\), 4"):
        state.check(header(6), 5, "t-0")
    with pytest.raises(OutOfOrderSequenceError):
        state.check(header(4 - 1), 5, "t-0")


def test_an_unknown_producer_may_start_anywhere_and_a_new_epoch_at_zero():
    state = ProducerState()
    state.check(header(12345), 0, "t-0")
    append(state, 50)
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        state.check(header(51, epoch=1), 1, "t-0")
    state.check(header(0, epoch=1), 1, "t-0")
    append(state, 0, epoch=1, offset=1)
    with pytest.raises(InvalidProducerEpochError, match="smaller than the last seen epoch 1"):
        state.check(header(1, epoch=0), 2, "t-0")


def test_sequences_wrap_after_int32_max():
    assert last_sequence(INT32_MAX, 1) == 0
    state = ProducerState()
    append(state, INT32_MAX - 1, 2)
    state.check(header(0), 2, "t-0")


def test_duplicates_are_found_among_the_last_five_batches_only():
    state = ProducerState()
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        append(state, i * 2, 2, offset=i * 2)
    assert state.find_duplicate(header(2, 2)).first_offset == 2
    assert state.find_duplicate(header(0, 2)) is None  # evicted
    assert state.find_duplicate(header(2, 1)) is None  # another range
    assert state.find_duplicate(header(2, 2, epoch=1)) is None


def test_retention_and_expiry_forget_producers():
    state = ProducerState()
    append(state, 0, 2, offset=10)
    state.truncate_head(11)
    assert len(state) == 1
    state.truncate_head(12)
    assert len(state) == 0
    append(state, 0)
    assert state.remove_expired(now_ms=100 + 999, expiration_ms=1000) == 0
    assert state.remove_expired(now_ms=100 + 1000, expiration_ms=1000) == 1


# --- in a PartitionLog: rebuilt from the log after a reopen ------------------------------

from kcoord.storage.log import PartitionLog  # noqa: E402


def _idempotent(seq, pid=9, value=b"v"):
    return build_batch([Record(None, 100, b"k", value)], producer_id=pid, producer_epoch=0,
                       base_sequence=seq)


def test_a_reopened_log_recognises_a_retry_without_an_explicit_load(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    plog.append(_idempotent(0))
    plog.append(_idempotent(1))
    plog.close_files()  # a crash: no producer snapshot
    plog = PartitionLog(str(tmp_path / "t-0"), clean_shutdown=False)
    assert not plog.producers_loaded
    retry = plog.append(_idempotent(1))
    assert retry.duplicate and retry.first_offset == 1 and plog.log_end_offset == 2
    with pytest.raises(OutOfOrderSequenceError):
        plog.append(_idempotent(5))
    plog.close()


def test_the_background_load_sees_batches_appended_while_it_scans(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    plog.append(_idempotent(0))
    plog.close_files()  # a crash: no producer snapshot
    plog = PartitionLog(str(tmp_path / "t-0"), clean_shutdown=False)
    segment = plog.segments[-1]
    real_headers = segment.headers
    appended = []

    def headers_while_appending(*args, **kwargs):
        if not appended:
            # Another writer appends while the scan runs (the lock is not held).
            appended.append(_append_during_scan(plog))
        return real_headers(*args, **kwargs)

    segment.headers = headers_while_appending
    plog._scan_producers()
    assert plog.producers_loaded
    retry = plog.append(_idempotent(1))
    assert retry.duplicate and retry.first_offset == 1
    plog.close()


def _append_during_scan(plog):
    # A plain append would load the state itself; write the batch as the
    # coordinator path does, keeping the scan the one that loads.
    plog.producers_loaded = True
    info = plog.append(_idempotent(1))
    plog.producers_loaded = False
    return info


def test_retention_forgets_producers_whose_batches_are_gone(tmp_path):
    from kcoord.storage.config import LogConfig
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig(retention_ms=1000))
    plog.append(_idempotent(0), now_ms=100)
    assert len(plog.producers) == 1
    assert plog.delete_old_segments(now_ms=100_000) == 1
    assert len(plog.producers) == 0
    plog.close()
