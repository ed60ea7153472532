"""Durability of one partition log: which segments hold bytes not yet fsynced,
the recovery point, and the fsync policy applied to appends.

* ``never`` (default): an append is acknowledged once ``os.pwrite`` has handed
  the bytes to the OS, which survives a SIGKILL of the broker (Kafka's
  default); segments that stop being active are fsynced in the background,
  which moves the recovery point (Kafka flushes after a roll too);
* ``batch``: the append waits for one shared fsync, run in a worker thread,
  that starts after its write; appends arriving while an fsync runs share the
  next one (group commit);
* ``always``: every append waits for its own fsync in a worker thread.

A segment stays "unflushed" until an fsync of everything written to it so
far has succeeded, and the recovery point only moves past bytes that were
fsynced.  An fsync error takes the log offline (``PartitionLog.io_failed``):
it is never swallowed, and the recovery point stays where it was.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kcoord.storage.errors import KafkaStorageError
from kcoord.storage.files import fsync_dir

if TYPE_CHECKING:  # pragma: no cover
    from kcoord.storage.log import PartitionLog
    from kcoord.storage.segment import LogSegment


class LogFlusher:
    def __init__(self, plog: "PartitionLog"):
        self.plog = plog
        self.unflushed: dict[int, "LogSegment"] = {}
        self._waiters: list[asyncio.Future] = []
        self._group: asyncio.Task | None = None
        self._background: set[asyncio.Task] = set()
        self.unflushed_messages = 0  # for flush.messages
        self.last_flush_ms: int | None = None  # for flush.ms

    # --- bookkeeping (called with the log's lock held) ------------------------------

    def written(self, segment: "LogSegment", messages: int = 0) -> None:
        self.unflushed[segment.base_offset] = segment
        self.unflushed_messages += messages

    def forget(self, segments) -> None:
        for segment in segments:
            if self.unflushed.get(segment.base_offset) is segment:
                del self.unflushed[segment.base_offset]

    def clear(self) -> None:
        self.unflushed.clear()

    # --- flushing ------------------------------------------------------------------------

    def _pending(self):
        if self.plog.offline:
            raise KafkaStorageError(f"the log dir of {self.plog.name} is offline")
        with self.plog._lock:
            pending = [(seg, seg.size) for seg in self.unflushed.values()]
            self.unflushed_messages = 0
            self.last_flush_ms = self.plog.clock()
            return pending, self.plog.log_end_offset

    def _fsync(self, pending, upto: int) -> None:
        plog = self.plog
        try:
            for segment, _size in pending:
                try:
                    segment.flush()
                except OSError:
                    if not segment.closed:  # deleted meanwhile by retention or the cleaner
                        raise
            fsync_dir(plog.directory)
        except OSError as exc:
            if plog.closed and not plog.offline:
                return  # the log was deleted meanwhile: nothing is left to flush
            raise plog.io_failed(exc, "flush") from exc
        with plog._lock:
            for segment, size in pending:
                if self.unflushed.get(segment.base_offset) is segment and segment.size == size:
                    del self.unflushed[segment.base_offset]
            if upto > plog.recovery_point:
                plog.recovery_point = upto

    def flush(self) -> None:
        """fsync everything written so far (synchronously)."""
        self._fsync(*self._pending())

    async def flush_async(self) -> None:
        """fsync everything written so far, in a worker thread."""
        pending, upto = self._pending()
        await asyncio.get_running_loop().run_in_executor(None, self._fsync, pending, upto)

    def durable_now(self, rolled: bool) -> bool:
        """True when the policy asks for no fsync before acknowledging this append
        (``never``, no flush threshold reached): ``after_append`` need not be
        awaited.  A segment that stopped being active is fsynced in the background."""
        config = self.plog.config
        if self.last_flush_ms is None:
            self.last_flush_ms = self.plog.clock()
        if config.flush_policy != "never" or self.unflushed_messages >= config.flush_messages \
                or self.plog.clock() - self.last_flush_ms >= config.flush_ms:
            return False
        if rolled:
            self._flush_in_background()
        return True

    def _flush_in_background(self) -> None:
        task = asyncio.get_running_loop().create_task(self.flush_async())
        self._background.add(task)
        task.add_done_callback(self._background_done)

    async def after_append(self, rolled: bool) -> None:
        """Wait for durability as the log's fsync policy requires."""
        config = self.plog.config
        policy = config.flush_policy
        if self.last_flush_ms is None:
            self.last_flush_ms = self.plog.clock()
        if policy == "always" or self.unflushed_messages >= config.flush_messages or \
                self.plog.clock() - self.last_flush_ms >= config.flush_ms:
            # Kafka flushes in the append path once flush.messages records (or
            # flush.ms) are unflushed; kcoord acknowledges after that fsync.
            await self.flush_async()
        elif policy == "batch":
            await self._group_flush()
        elif rolled:
            self._flush_in_background()

    def _background_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled():
            task.exception()  # already reported by io_failed; retrieved so asyncio stays quiet

    async def _group_flush(self) -> None:
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiters.append(waiter)
        if self._group is None or self._group.done():
            self._group = loop.create_task(self._run_group_flushes())
        await waiter

    async def _run_group_flushes(self) -> None:
        # One fsync covers every append whose write happened before it started;
        # appends arriving meanwhile wait for the next round.
        while self._waiters:
            waiters, self._waiters = self._waiters, []
            try:
                await self.flush_async()
            except BaseException as exc:  # noqa: BLE001 - handed to every waiter
                for w in waiters:
                    if not w.done():
                        w.set_exception(exc)
                continue
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    async def drain(self) -> None:
        """Wait for background and group flushes in flight (before closing the files)."""
        tasks = list(self._background)
        if self._group is not None and not self._group.done():
            tasks.append(self._group)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
