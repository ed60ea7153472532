"""fsync failures were swallowed: the flush after a roll was fire-and-forget,
the flush bookkeeping forgot segments before their fsync succeeded, and later
flushes moved the recovery point past them.  An EIO on segment 0 showed only as
"exception never retrieved" while the recovery point moved on, and index files
were never fsynced.  Kafka takes a log dir offline on an I/O error and halts
when its last log dir fails: kcoord now does the same, loudly."""

from __future__ import annotations

import asyncio
import errno
import os

import pytest
import structlog

from kcoord.storage.config import LogConfig
from kcoord.storage.errors import KafkaStorageError
from kcoord.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager
from tests.storage.helpers import batch


class FailingFsync:
    """os.fsync that raises EIO for chosen file descriptors."""

    def __init__(self, monkeypatch):
        self.real = os.fsync
        self.bad: set[int] = set()
        self.synced: list[int] = []
        self.paths: set[str] = set()
        monkeypatch.setattr(os, "fsync", self)

    def __call__(self, fd):
        if fd in self.bad:
            raise OSError(errno.EIO, "Input/output error")
        self.synced.append(fd)
        self.paths.add(os.readlink(f"/proc/self/fd/{fd}"))
        self.real(fd)


def _roll_once(plog):
    first = plog.segments[0]
    while len(plog.segments) == 1:
        asyncio.run(plog.append_async(batch([b"x" * 100])))
    return first


def test_a_failed_background_flush_takes_the_dir_offline_and_keeps_the_recovery_point(
        tmp_path, monkeypatch):
    offline = []
    manager = LogManager(str(tmp_path), LogConfig(segment_bytes=1_000), on_offline=offline.append)
    plog = manager.get_or_create("t", 0)
    other = manager.get_or_create("u", 0)
    fsync = FailingFsync(monkeypatch)
    fsync.bad.add(plog.segments[0].fd)

    async def run():
        seg0 = plog.segments[0]
        while len(plog.segments) == 1:
            await plog.append_async(batch([b"x" * 100]))
        await plog.flusher.drain()  # the background flush of the rolled segment
        return seg0

    with structlog.testing.capture_logs() as logs:
        seg0 = asyncio.run(run())
    assert plog.offline and other.offline and manager.offline
    assert len(offline) == 1 and "Input/output error" in offline[0]
    assert plog.recovery_point == 0
    assert plog.flusher.unflushed.get(seg0.base_offset) is seg0
    assert any(e["event"] == "log_dir_offline" and e["log_level"] == "critical" for e in logs)
    with pytest.raises(KafkaStorageError):
        plog.append(batch([b"late"]))
    with pytest.raises(KafkaStorageError):
        other.read(0, 100)
    with pytest.raises(KafkaStorageError):
        manager.get_or_create("new", 0)
    manager.close()
    # No clean-shutdown marker and no checkpoint moved: the next start recovers.
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    monkeypatch.undo()
    again = LogManager(str(tmp_path), LogConfig(segment_bytes=1_000))
    assert not again.clean_shutdown
    assert again.get_or_create("t", 0).log_end_offset == plog.log_end_offset


@pytest.mark.parametrize("policy", ["batch", "always"])
def test_an_append_waiting_for_its_fsync_gets_the_error(tmp_path, monkeypatch, policy):
    manager = LogManager(str(tmp_path), LogConfig(flush_policy=policy))
    plog = manager.get_or_create("t", 0)
    fsync = FailingFsync(monkeypatch)
    fsync.bad.add(plog.segments[0].fd)
    with pytest.raises(KafkaStorageError):
        asyncio.run(plog.append_async(batch([b"a"])))
    assert manager.offline and plog.recovery_point == 0


def test_a_flush_after_a_failed_one_does_not_move_the_recovery_point_past_it(tmp_path, monkeypatch):
    plog = LogManager(str(tmp_path), LogConfig(segment_bytes=1_000)).get_or_create("t", 0)
    fsync = FailingFsync(monkeypatch)
    seg0 = plog.segments[0]
    fsync.bad.add(seg0.fd)
    for _ in range(20):
        plog.append(batch([b"x" * 100]))
    with pytest.raises(KafkaStorageError):
        plog.flush()
    fsync.bad.clear()
    with pytest.raises(KafkaStorageError):
        plog.flush()  # offline: refused, never "succeeds" past segment 0
    assert plog.recovery_point == 0


def test_flushing_a_segment_fsyncs_its_indexes(tmp_path, monkeypatch):
    plog = LogManager(str(tmp_path), LogConfig(segment_bytes=1_000, index_interval_bytes=10)) \
        .get_or_create("t", 0)
    fsync = FailingFsync(monkeypatch)
    seg0 = _roll_once(plog)
    plog.flush()
    assert {seg0.log_path, seg0.offset_index.path, seg0.time_index.path} <= fsync.paths
    fsync.paths.clear()
    plog.append(batch([b"y" * 100]))
    plog.append(batch([b"z" * 100]))
    last = plog.segments[-1]
    plog.close()
    assert {last.log_path, last.offset_index.path, last.time_index.path} <= fsync.paths


def test_the_broker_stops_with_an_error_when_its_log_dir_fails(tmp_path):
    from kcoord.broker.cli import serve
    from kcoord.broker.config import BrokerConfig

    config = BrokerConfig.build({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)})

    async def run():
        from kcoord.broker import app

        real_start = app.Broker.start

        async def start(self):
            await real_start(self)
            await self.topics.create("boom", 1, {})
            self.logs.get("boom", 0).io_failed(OSError(errno.EIO, "Input/output error"), "append")

        app.Broker.start = start
        try:
            return await asyncio.wait_for(serve(config), 20)
        finally:
            app.Broker.start = real_start

    assert asyncio.run(run()) == 1
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
