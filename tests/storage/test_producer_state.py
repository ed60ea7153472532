"""The idempotent-producer rules of storage.producer_state, batch by batch."""

from __future__ import annotations

import pytest

from protocol.records import Record, batch_header, build_batch
from storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from storage.producer_state import INT32_MAX, NUM_BATCHES_TO_RETAIN, ProducerState, last_sequence


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
