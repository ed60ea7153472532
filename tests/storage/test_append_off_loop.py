"""Large client appends are validated in a worker thread: the event loop only
moves the validated batch to the log end, which other appends may have moved
meanwhile."""

from __future__ import annotations

import asyncio
import threading

import pytest

from protocol import compression
from protocol.records import Record, build_batch, decode_record_set
from storage.config import LogConfig
from storage.errors import InvalidRecordError
from storage import log as log_module
from storage.log import VALIDATE_IN_THREAD_BYTES, PartitionLog


def _big(value=b"x" * 100, key=b"k"):
    count = VALIDATE_IN_THREAD_BYTES // len(value) + 10
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
