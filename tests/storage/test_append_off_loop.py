"""Large client appends are validated in a worker thread: the event loop only
moves the validated batch to the log end, which other appends may have moved
meanwhile."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from kcoord.protocol import compression
from kcoord.protocol.records import Record, build_batch, decode_record_set
from kcoord.storage.config import LogConfig
from kcoord.storage.errors import InvalidRecordError
from kcoord.storage import log as log_module
from kcoord.storage.log import INLINE_RECORDS, VALIDATE_IN_THREAD_BYTES, PartitionLog


def _big(value=b"x" * 100, key=b"k"):
    # Too many records to be checked on the event loop.
    count = max(VALIDATE_IN_THREAD_BYTES // len(value) + 10, INLINE_RECORDS + 1)
    return build_batch([Record(None, 1_000 + i, key, value) for i in range(count)],
                       compression_type=compression.NONE), count


def test_an_append_made_while_a_large_one_is_validated_comes_first(tmp_path, monkeypatch):
    plog = PartitionLog(str(tmp_path / "t-0"))
    big, count = _big()
    threads = []
    real = log_module.validate_and_assign
    small_done = threading.Event()

    def recording(*args, **kwargs):
        on_loop = threading.current_thread() is threading.main_thread()
        threads.append(on_loop)
        if not on_loop:
            small_done.wait(10)  # the small append goes first
        return real(*args, **kwargs)

    monkeypatch.setattr(log_module, "validate_and_assign", recording)

    async def run():
        task = asyncio.ensure_future(plog.append_async(big))
        await asyncio.sleep(0)  # the large append is now in its worker thread
        small = plog.append(build_batch([Record(None, 5, b"s", b"small")]))
        small_done.set()
        return small, await task

    small, large = asyncio.run(run())
    assert (small.first_offset, large.first_offset, large.last_offset) == (0, 1, count)
    assert large.offset_of_max_timestamp == count
    batches = decode_record_set(plog.read(0, 1 << 22))
    assert [b.base_offset for b in batches] == [0, 1]
    assert [r.offset for r in batches[1].records] == list(range(1, count + 1))
    assert plog.log_end_offset == count + 1
    assert threads == [False, True]  # the large one off the event loop's thread
    plog.close()


def test_a_large_invalid_append_is_refused_and_writes_nothing(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig(cleanup_policy=("compact",)))
    big, _count = _big(key=None)
    with pytest.raises(InvalidRecordError) as info:
        asyncio.run(plog.append_async(big))
    assert info.value.record_errors
    assert plog.log_end_offset == 0
    plog.close()


@pytest.mark.parametrize("large", [False, True])
def test_an_owned_buffer_is_validated_and_written_in_place(tmp_path, large):
    """``owned=True``: a writable buffer given away (a view of a produce request's
    frame) is rewritten and written where it is, with the same result as a copy;
    anything else (bytes, a read-only view) is copied and left as it was."""
    if large:
        batch, _count = _big()
    else:
        batch = build_batch([Record(None, 1_000 + i, b"k", b"v%d" % i) for i in range(5)])
    config = LogConfig(message_timestamp_type="LogAppendTime")  # the CRC is rewritten too
    copied = PartitionLog(str(tmp_path / "copied-0"), config, clock=lambda: 7_000)
    in_place = PartitionLog(str(tmp_path / "in-place-0"), config, clock=lambda: 7_000)

    async def run():
        await copied.append_async(build_batch([Record(None, 1, b"k", b"first")]))
        await in_place.append_async(build_batch([Record(None, 1, b"k", b"first")]))
        frame = bytearray(b"head" + batch + b"tail")
        view = memoryview(frame)[4:-4]
        kept = bytes(batch)
        readonly = memoryview(kept)
        info = await in_place.append_async(view, owned=True)
        expected = await copied.append_async(batch)
        # A read-only view and bytes are not touched, owned or not.
        await in_place.append_async(readonly, owned=True)
        await copied.append_async(kept, owned=True)
        return frame, kept, info, expected

    frame, kept, info, expected = asyncio.run(run())
    assert (info.first_offset, info.last_offset, info.log_append_time) == \
        (expected.first_offset, expected.last_offset, expected.log_append_time)
    size = copied.segments[-1].size
    assert in_place.read(0, size) == copied.read(0, size)
    written = in_place.read(0, size)
    (_first, _second, third) = decode_record_set(written)  # every CRC checked
    # The frame holds what was written: rewritten in place (offsets, epoch,
    # append time, CRC), not copied.
    start = written.index(bytes(frame[4 + 12:-4]))
    assert written[start - 12:start - 12 + len(batch)] == bytes(frame[4:-4])
    assert bytes(frame[4:-4]) != batch and frame[:4] == b"head" and frame[-4:] == b"tail"
    assert kept == batch and third.base_offset == info.last_offset + 1
    copied.close()
    in_place.close()


def test_an_owned_buffer_that_fails_validation_appends_nothing(tmp_path):
    batch, _count = _big()
    frame = bytearray(batch)
    frame[len(frame) // 2] ^= 0xFF
    plog = PartitionLog(str(tmp_path / "t-0"))
    with pytest.raises(Exception) as failed:
        asyncio.run(plog.append_async(memoryview(frame), owned=True))
    assert failed.value.code.name == "CORRUPT_MESSAGE"
    assert plog.log_end_offset == 0 and plog.segments[-1].size == 0
    plog.close()


@pytest.mark.parametrize("kind, on_loop", [
    ("few records", True), ("many records", False), ("compressed", False),
    ("recompressed", False), ("small", True)])
def test_only_large_appends_costly_to_check_leave_the_event_loop(tmp_path, monkeypatch, kind,
                                                                  on_loop):
    def value():
        return os.urandom(VALIDATE_IN_THREAD_BYTES // 8)  # stays large compressed

    records = {
        "few records": [Record(None, 1, b"k", value()) for _ in range(10)],
        "many records": [Record(None, 1, b"k", b"v" * 60) for _ in range(INLINE_RECORDS + 1)],
        "compressed": [Record(None, 1, b"k", value()) for _ in range(10)],
        "recompressed": [Record(None, 1, b"k", value()) for _ in range(10)],
        "small": [Record(None, 1, b"k", b"v")],
    }[kind]
    batch = build_batch(records, compression_type=compression.GZIP if kind == "compressed"
                        else compression.NONE)
    assert (len(batch) >= VALIDATE_IN_THREAD_BYTES) == (kind != "small")
    config = LogConfig(compression_type="lz4" if kind == "recompressed" else "producer")
    plog = PartitionLog(str(tmp_path / "t-0"), config)
    threads = []
    real = log_module.validate_and_assign

    def recording(*args, **kwargs):
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(log_module, "validate_and_assign", recording)
    info = asyncio.run(plog.append_async(batch))
    assert (info.first_offset, info.last_offset) == (0, len(records) - 1)
    assert threads == [on_loop]
    plog.close()
