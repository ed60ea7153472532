"""The coordinator's shell: it runs the pure core (``coordinator.py``) on the
event loop and does its I/O.

* Answers: a ticket is an ``asyncio.Future`` that the handler awaits; the
  core's answers complete them (a ticket already answered is left alone).
* Writes: the records go to the group's ``__consumer_offsets`` partition in
  one v2 batch (the log engine every topic uses), appended at once so that
  writes keep the order the core gave them; the continuation runs once the
  batch is durable under ``kcoord.fsync.policy``, or with the error of a
  failed append.
* Timers: one loop timer, armed for the core's earliest deadline.
* Loading: partitions whose log has data are replayed in a worker thread after
  the broker has started listening; meanwhile their groups get
  COORDINATOR_LOAD_IN_PROGRESS from the core.
"""

from __future__ import annotations

import asyncio
import collections
import time

import structlog

from broker.groups.coordinator import (
    GroupCoordinator,
    JoinRequest,
    LoadedPartition,
    Outcome,
    Write,
    replay,
)
from broker.groups.timers import WallClock
from broker.topics.data import LEADER_EPOCH
from protocol.errors import ErrorCode
from protocol.records import batch_header, batch_payload, key_values
from storage.errors import CorruptLogError, StorageError
from storage.layout import OFFSETS_TOPIC, segment_name

log = structlog.get_logger("kcoord.groups")

# Answers completed in one turn of the event loop; each costs its connection
# about 30-50 us to encode and send once woken.
ANSWERS_PER_TURN = 64


class GroupService:
    def __init__(self, broker, core: GroupCoordinator, clock=None):
        self.broker = broker
        self.core = core
        self.clock = clock or WallClock()
        # Made on the broker's loop; kept because asyncio.get_running_loop()
        # costs a getpid() system call on every request.
        self.loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._inflight: dict[int, set[asyncio.Future]] = {}  # partition -> unfinished writes
        self._tasks: set[asyncio.Task] = set()
        self.loaded = asyncio.Event()
        self._deferred: collections.deque = collections.deque()  # answers for later turns
        self._answering = False

    def now(self) -> int:
        return self.clock()

    # -- running the core ------------------------------------------------------------

    def run(self, outcome: Outcome) -> None:
        self._answer(outcome.answers)
        for write in outcome.writes:
            self._append(write)
        self._arm_timer()

    def _answer(self, answers) -> None:
        """Complete the tickets; past ``ANSWERS_PER_TURN`` (a join phase ending for
        a group of 1,000 members), a slice per turn of the event loop: each
        answer wakes its connection, which then encodes and sends it, and other
        clients' requests are served between the slices."""
        if not self._deferred and len(answers) <= ANSWERS_PER_TURN:
            for ticket, response in answers:
                if not ticket.done():
                    ticket.set_result(response)
            return
        self._deferred.extend(answers)
        if not self._answering:
            self._answering = True
            self.loop.call_soon(self._answer_slice)

    def _answer_slice(self) -> None:
        deferred = self._deferred
        for _ in range(min(ANSWERS_PER_TURN, len(deferred))):
            ticket, response = deferred.popleft()
            if not ticket.done():
                ticket.set_result(response)
        if deferred:
            self.loop.call_soon(self._answer_slice)
        else:
            self._answering = False

    def ask(self, operation, *args, **kwargs) -> asyncio.Future:
        """Run ``operation(ticket, *args, now, **kwargs)``; the ticket (a future) holds
        its answer, often at once (nothing parked, no fsync to wait for)."""
        ticket = self.loop.create_future()
        self.run(operation(ticket, *args, self.now(), **kwargs))
        return ticket

    # -- the coordinator's API: every group handler goes through these ------------------
    # Writes answer through a ticket (a future, often already done); reads and
    # the heartbeat answer at once.

    def join(self, request: JoinRequest) -> asyncio.Future:
        return self.ask(self.core.join, request)

    def sync(self, group_id, generation, member_id, instance_id, protocol_type, protocol_name,
             assignments) -> asyncio.Future:
        return self.ask(self.core.sync, group_id, generation, member_id, instance_id,
                        protocol_type, protocol_name, assignments)

    def heartbeat(self, group_id, generation, member_id, instance_id) -> ErrorCode:
        return self.core.heartbeat(group_id, generation, member_id, instance_id, self.now())

    def leave(self, group_id, members) -> tuple[ErrorCode, list[ErrorCode]]:
        code, errors, outcome = self.core.leave(group_id, members, self.now())
        self.run(outcome)
        return code, errors

    def commit(self, group_id, generation, member_id, instance_id, offsets, *, version,
               retention_ms) -> asyncio.Future:
        return self.ask(self.core.commit, group_id, generation, member_id, instance_id, offsets,
                        version=version, retention_ms=retention_ms)

    def fetch_offsets(self, group_id, topics):
        return self.core.fetch_offsets(group_id, topics)

    def describe(self, group_id) -> dict:
        return self.core.describe(group_id)

    def list_groups(self, states, types):
        return self.core.list_groups(states, types)

    def delete_groups(self, names) -> asyncio.Future:
        return self.ask(self.core.delete_groups, names)

    def delete_offsets(self, group_id, partitions) -> asyncio.Future:
        return self.ask(self.core.delete_offsets, group_id, partitions)

    def unload(self) -> None:
        """The broker stops: parked requests are answered NOT_COORDINATOR."""
        self.run(self.core.unload_all())

    def delete_topic_offsets(self, topics: set[str]) -> None:
        """A deleted topic's committed offsets get tombstones in every group."""
        self.run(self.core.delete_topic_offsets(topics, self.now()))

    # -- writes ------------------------------------------------------------------------

    def _append(self, write: Write) -> None:
        broker = self.broker
        now = self.now()
        if write.partition in self.core.failed:  # never appended past damage
            self._finish(write, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        try:
            plog = broker.logs.get(OFFSETS_TOPIC, write.partition)
            if plog is None:  # a partition's folder appears on its first write
                plog = broker.logs.get_or_create(OFFSETS_TOPIC, write.partition,
                                                 broker.log_config(OFFSETS_TOPIC))
            segments = len(plog.segments)
            plog.append_own(write.records, now_ms=now, leader_epoch=LEADER_EPOCH)
        except StorageError as exc:
            log.warning("groups.write_failed", partition=write.partition, error=exc.code.name,
                        reason=str(exc))
            self._finish(write, exc.code)
            return
        except OSError as exc:
            log.warning("groups.write_failed", partition=write.partition, reason=str(exc))
            self._finish(write, ErrorCode.KAFKA_STORAGE_ERROR)
            return
        broker.fetch_waiters.notify((OFFSETS_TOPIC, write.partition))
        rolled = len(plog.segments) != segments
        if plog.flusher.durable_now(rolled):
            self._finish(write, ErrorCode.NONE)  # the default policy: written is durable
            return
        task = self.loop.create_task(self._durable(plog, write, rolled))
        inflight = self._inflight.setdefault(write.partition, set())
        inflight.add(task)
        self._tasks.add(task)

        def forget(t, partition=write.partition):
            self._tasks.discard(t)
            waiting = self._inflight.get(partition)
            if waiting is not None:
                waiting.discard(t)
                if not waiting:
                    del self._inflight[partition]

        task.add_done_callback(forget)

    async def _durable(self, plog, write: Write, rolled: bool) -> None:
        try:
            await plog.flusher.after_append(rolled=rolled)
        except StorageError as exc:
            self._finish(write, exc.code)
            return
        except OSError:
            self._finish(write, ErrorCode.KAFKA_STORAGE_ERROR)
            return
        self._finish(write, ErrorCode.NONE)

    def _finish(self, write: Write, error: ErrorCode) -> None:
        if write.done is not None:
            self.run(write.done(error, self.now()))

    def writes_in_flight(self, group_ids) -> list[asyncio.Future]:
        """The writes not yet durable on these groups' partitions (OffsetFetch with
        require_stable waits for them, so it sees the commits being written)."""
        return [task for p in {self.core.partition_for(g) for g in group_ids}
                for task in self._inflight.get(p, ())]

    # -- timers ------------------------------------------------------------------------

    def _arm_timer(self) -> None:
        due = self.core.next_deadline()
        if due is None or (self._timer is not None and self._timer_at is not None
                           and self._timer_at <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        delay = max(due - self.now(), 0) / 1000
        self._timer_at = due
        self._timer = self.loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = self._timer_at = None
        try:
            self.run(self.core.tick(self.now()))
        except Exception:
            log.exception("groups.timer_failed")
            self._arm_timer()

    # -- loading -------------------------------------------------------------------------

    def start(self) -> None:
        """Mark every partition with data as loading and replay them in the background."""
        logs = self.broker.logs
        partitions = sorted(p for (topic, p), plog in logs.logs.items()
                            if topic == OFFSETS_TOPIC and plog.log_end_offset > 0)
        self.core.loading.update(partitions)
        task = asyncio.get_running_loop().create_task(self._load(partitions),
                                                      name="kcoord-groups-load")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._arm_timer()

    async def _load(self, partitions: list[int]) -> None:
        loop = asyncio.get_running_loop()
        began = time.monotonic()
        records = groups = 0
        for partition in partitions:
            plog = self.broker.logs.get(OFFSETS_TOPIC, partition)
            try:
                loaded = await loop.run_in_executor(None, load_partition, plog)
            except Exception as exc:
                self._load_failed(partition, plog, exc)
                continue
            records += loaded.records
            groups += len(loaded.groups)
            if loaded.skipped:
                log.warning("groups.records_skipped", partition=partition,
                            records=loaded.skipped, reason="unknown record types")
            if loaded.unreadable:
                log.warning("groups.records_skipped", partition=partition,
                            records=loaded.unreadable, reason="undecodable keys or values")
            self.run(self.core.install(partition, loaded, self.now()))
        self.core.loading.difference_update(partitions)
        self.loaded.set()
        if self.core.failed:
            log.error("groups.partitions_not_served", partitions=sorted(self.core.failed),
                      reason="their logs could not be loaded: their groups are answered "
                             "NOT_COORDINATOR and nothing is written to them")
        if partitions:
            log.info("groups.loaded", partitions=len(partitions), groups=groups,
                     records=records, elapsed_ms=round((time.monotonic() - began) * 1000, 1))

    def _load_failed(self, partition: int, plog, exc: Exception) -> None:
        """A partition that cannot be loaded whole is not served, loudly (as Kafka's
        coordinator loader fails it): its groups' newest commits may lie past
        the damage, so serving the rest would hand consumers older offsets, and
        commits acknowledged after the damage would be cut by the next
        recovery."""
        self.core.failed.add(partition)
        if isinstance(exc, CorruptLogError):
            log.error("groups.load_failed", partition=partition, offset=exc.offset,
                      segment=segment_name(exc.segment), position=exc.position,
                      bytes_after=exc.bytes_after, log_end_offset=plog.log_end_offset,
                      reason=f"{exc}; the partition's groups are answered NOT_COORDINATOR "
                             "until the damage is repaired and the broker restarted")
        else:
            log.error("groups.load_failed", partition=partition, exc_info=exc,
                      reason="the partition's groups are answered NOT_COORDINATOR")

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._tasks):
            if not task.done():
                try:
                    await asyncio.wait_for(asyncio.shield(task), 5)
                except (asyncio.TimeoutError, Exception):
                    task.cancel()


def offsets_records(plog):
    """Every (key, value) of a ``__consumer_offsets`` log, in order (control
    batches hold no group records)."""
    for data in plog.verified_batches():
        header = batch_header(data, 0)
        if header.is_control:
            continue
        yield from key_values(batch_payload(data, 0, header.size), header.records_count)


def load_partition(plog) -> LoadedPartition:
    return replay(offsets_records(plog))
