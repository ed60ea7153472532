"""The coordinator runtime: the engine every coordinator runs on (Kafka's
``CoordinatorRuntime``).

A coordinator is a set of shards, one per partition of its compacted internal
topic (``__consumer_offsets`` for groups).  A shard is a pure, synchronous
state machine (``broker.runtime.outcome``): its operations take ``now`` and
return an ``Outcome``, and a replay of its partition's records rebuilds it.
The runtime does everything else, on the event loop:

* Ownership and loading.  ``start`` gives every partition without data an
  empty shard at once and replays the others in a worker thread, one at a
  time; meanwhile their requests are answered COORDINATOR_LOAD_IN_PROGRESS.
  A partition that cannot be read whole is not served (NOT_COORDINATOR, an
  error in the log) and nothing is ever appended to it.  Requests for a
  partition the runtime does not serve go to a *refusing shard*: an empty
  shard built with the refusal, so that each operation shapes the refusal as
  its API answers it, after the checks Kafka makes before it.  When the broker
  stops, ``unload`` resigns every partition, as Kafka's coordinator does:
  parked requests are answered NOT_COORDINATOR, what was written before is
  appended, and from then on the partitions are refused and their timers
  never fire (a member cannot expire, nor a join phase end, while the broker
  stops, and nothing more is written).
* Writes.  The records of a shard's writes are appended to its partition in
  batches: writes issued within the linger go to the log as one v2 batch
  (one append, one fsync under ``kcoord.fsync.policy=batch``), and each
  write's continuation runs once the batch is durable, or with the error of
  a failed append, in the order the writes were issued.  The linger follows
  Kafka's ``group.coordinator.append.linger.ms``: a positive value waits that
  long, 0 appends every write at once, and -1 (adaptive, Kafka 4.4's default)
  closes a batch after the work already queued on the loop when it opened.
* Timers.  One ``Deadlines`` heap holds every shard's timers (each shard sees
  it through ``ShardTimers``); one loop timer is armed for the earliest.
* Answers.  Tickets are futures; many answers at once (a join phase ending
  for 1,000 members) are given a slice per turn of the loop.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import time
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from kcoord.broker.runtime.outcome import Outcome, Write
from kcoord.broker.runtime.timers import Deadlines, ShardTimers, WallClock
from kcoord.broker.topics.data import LEADER_EPOCH
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import Record, build_batch
from kcoord.storage.errors import CorruptLogError, StorageError
from kcoord.storage.validator import AppendOrigin
from kcoord.storage.layout import segment_name

# Answers completed in one turn of the event loop; each costs its connection
# about 30-100 us to encode and send once woken (a leader's answer listing 1,000
# members, several ms): small slices keep another client's wait short.
ANSWERS_PER_TURN = 16
# A batch is closed before it grows past this, or past what the partition's
# max.message.bytes and segment.bytes allow (as Kafka's runtime sizes its
# batches); a single larger write is its own batch.
MAX_BATCH_BYTES = 256 * 1024
RECORD_OVERHEAD = 24  # bytes a record costs in a batch besides its key and value
BATCH_OVERHEAD = 61  # a v2 batch's header
ADAPTIVE_LINGER = -1


class Shard(Protocol):
    def fire(self, key: Any, payload: Any, now: int) -> Outcome | None: ...

    def install(self, loaded: Any, now: int) -> Outcome: ...

    def unload(self) -> Outcome: ...


class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    UNLOADED = "unloaded"  # the broker is stopping: refused, NOT_COORDINATOR


class _Batch:
    """Writes of one partition waiting to be appended together."""

    __slots__ = ("writes", "size", "handle", "finished")

    def __init__(self):
        self.writes: list[Write] = []
        self.size = 0
        self.handle: asyncio.Handle | None = None
        # Done once every write of the batch is settled; made only when someone
        # waits for it (OffsetFetch with require_stable).
        self.finished: asyncio.Future | None = None


class CoordinatorRuntime:
    def __init__(self, broker, *, name: str, topic: str, partitions: int,
                 new_shard: Callable[..., Shard], load: Callable[[Any], Any],
                 clock: Callable[[], int] | None = None, linger_ms: int = ADAPTIVE_LINGER,
                 on_effects: Callable[[int, list], None] | None = None):
        self.broker = broker
        self.name = name
        self.topic = topic
        self.partitions = partitions
        self.clock = clock or WallClock()
        self.linger_ms = linger_ms
        self.log = structlog.get_logger(f"kcoord.{name}")
        # new_shard(partition, timers, now, refusal) -> a shard; load(plog) -> what
        # a shard installs, built in a worker thread.
        self._new_shard = new_shard
        self._load = load
        self._on_effects = on_effects  # (partition, effects) of an outcome, for the service
        # Made on the broker's loop; kept because asyncio.get_running_loop()
        # costs a getpid() system call on every request.
        self.loop = asyncio.get_running_loop()
        self.deadlines = Deadlines()
        self.shards: dict[int, Shard] = {}
        self.state: dict[int, PartitionState] = {}
        self._refusing: dict[ErrorCode, Shard] = {}
        self.loaded = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        # Deadlines.mark() when the timer was last checked: until a deadline is
        # scheduled again, the check would find the same (cancelling one never
        # makes the next deadline earlier; a stale firing finds nothing due).
        self._timer_checked: int | None = None
        self._open: dict[int, _Batch] = {}  # partition -> the batch still taking writes
        self._unsettled: dict[int, set[_Batch]] = {}  # partition -> batches not settled
        self._tasks: set[asyncio.Task] = set()
        self._deferred: collections.deque = collections.deque()  # answers for later turns
        self._answering = False
        self._stopped = False

    def now(self) -> int:
        return self.clock()

    # -- shards ------------------------------------------------------------------------

    def shard(self, partition: int) -> Shard:
        """The shard serving ``partition``, or one that refuses: loading, or not
        served."""
        shard = self.shards.get(partition)
        if shard is not None:
            return shard
        refusal = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS \
            if self.state.get(partition) is PartitionState.LOADING else ErrorCode.NOT_COORDINATOR
        refusing = self._refusing.get(refusal)
        if refusing is None:
            refusing = self._refusing[refusal] = self._new_shard(-1, None, self.now(), refusal)
        return refusing

    def active(self) -> list[tuple[int, Shard]]:
        return sorted(self.shards.items())

    @property
    def loading(self) -> bool:
        return any(s is PartitionState.LOADING for s in self.state.values())

    @property
    def failed(self) -> list[int]:
        return sorted(p for p, s in self.state.items() if s is PartitionState.FAILED)

    def _activate(self, partition: int, loaded: Any = None) -> None:
        if self._stopped:  # a load that ends after the unload: not served
            self.state[partition] = PartitionState.UNLOADED
            return
        now = self.now()
        shard = self._new_shard(partition, ShardTimers(self.deadlines, partition), now, None)
        self.shards[partition] = shard
        self.state[partition] = PartitionState.ACTIVE
        if loaded is not None:
            self.run(partition, shard.install(loaded, now))

    # -- operations: every request goes through one of these ----------------------------

    def write(self, partition: int, operation: Callable[..., Outcome], *args,
              **kwargs) -> asyncio.Future:
        """Run ``operation(shard, ticket, *args, now, **kwargs)``; the ticket (a
        future) holds its answer, often at once (nothing parked, nothing to
        write)."""
        ticket = self.loop.create_future()
        self.run(partition,
                 operation(self.shard(partition), ticket, *args, self.clock(), **kwargs))
        return ticket

    def read(self, partition: int, operation: Callable[..., Any], *args, **kwargs) -> Any:
        """``operation(shard, *args, **kwargs)``, answered at once."""
        return operation(self.shard(partition), *args, **kwargs)

    def run(self, partition: int, outcome: Outcome | None) -> None:
        if outcome is None:
            return
        self._answer(outcome.answers)
        for write in outcome.writes:
            self._append(partition, write)
        if outcome.effects and self._on_effects is not None:
            self._on_effects(partition, outcome.effects)
        self._arm_timer()

    # -- answers -----------------------------------------------------------------------

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

    # -- writes ------------------------------------------------------------------------

    def _append(self, partition: int, write: Write) -> None:
        if self.state.get(partition) is not PartitionState.ACTIVE:  # never past damage
            self._settle(partition, write, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        if write.producer is not None or write.marker is not None:
            # A transaction's records or marker: a batch of its own, after what
            # was issued before it.
            self.flush(partition)
            batch = _Batch()
            batch.writes.append(write)
            self._append_batch(partition, batch)
            return
        if self.linger_ms == 0 and partition not in self._open:
            # No linger: the write is its own batch, appended now.
            batch = _Batch()
            batch.writes.append(write)
            self._append_batch(partition, batch)
            return
        size = sum(len(k) + (len(v) if v is not None else 0) + RECORD_OVERHEAD
                   for k, v in write.records)
        batch = self._open.get(partition)
        if batch is not None:
            limit = self._batch_limit(partition)
            # The flush runs continuations, which may open the partition's next
            # batch themselves: that one is then the batch to add to.
            while batch is not None and batch.writes and batch.size + size > limit:
                self.flush(partition)
                batch = self._open.get(partition)
        if batch is None:
            batch = self._open[partition] = _Batch()
            self._unsettled.setdefault(partition, set()).add(batch)
            if self.linger_ms > 0:
                batch.handle = self.loop.call_later(self.linger_ms / 1000, self.flush, partition)
            elif self.linger_ms < 0:
                batch.handle = self.loop.call_soon(self.flush, partition)
        batch.writes.append(write)
        batch.size += size
        if self.linger_ms == 0:
            self.flush(partition)

    def _batch_limit(self, partition: int) -> int:
        plog = self.broker.logs.get(self.topic, partition)
        config = plog.config if plog is not None else self.broker.log_config(self.topic)
        if config is None:
            return MAX_BATCH_BYTES
        return min(MAX_BATCH_BYTES, config.max_message_bytes - BATCH_OVERHEAD,
                   config.segment_bytes - BATCH_OVERHEAD)

    def flush(self, partition: int) -> None:
        """Append the partition's open batch now."""
        batch = self._open.pop(partition, None)
        if batch is None:
            return
        if batch.handle is not None:
            batch.handle.cancel()
        self._append_batch(partition, batch)

    def _append_batch(self, partition: int, batch: _Batch) -> None:
        writes = batch.writes
        records = writes[0].records if len(writes) == 1 else \
            [record for write in writes for record in write.records]
        try:
            plog, rolled = self._append_records(partition, records, writes[0])
        except StorageError as exc:
            self.log.warning(f"{self.name}.write_failed", partition=partition,
                             error=exc.code.name, reason=str(exc))
            self._settle_batch(partition, batch, exc.code)
            return
        except OSError as exc:
            self.log.warning(f"{self.name}.write_failed", partition=partition, reason=str(exc))
            self._settle_batch(partition, batch, ErrorCode.KAFKA_STORAGE_ERROR)
            return
        except Exception:  # a bug: the batch's writes still get an answer
            self.log.exception(f"{self.name}.write_failed", partition=partition)
            self._settle_batch(partition, batch, ErrorCode.UNKNOWN_SERVER_ERROR)
            return
        if plog.flusher.durable_now(rolled):
            self._settle_batch(partition, batch, ErrorCode.NONE)  # the default policy
            return
        self._unsettled.setdefault(partition, set()).add(batch)
        task = self.loop.create_task(self._durable(plog, partition, batch, rolled))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _append_records(self, partition: int, records, first: Write):
        broker = self.broker
        plog = broker.logs.get(self.topic, partition)
        if plog is None:  # a partition's folder appears on its first write
            plog = broker.logs.get_or_create(self.topic, partition,
                                             broker.log_config(self.topic))
        segments = len(plog.segments)
        now = self.clock()
        if first.marker is not None:
            producer_id, epoch, commit, coordinator_epoch = first.marker
            plog.append_marker(producer_id, epoch, commit, coordinator_epoch=coordinator_epoch,
                               now_ms=now, leader_epoch=LEADER_EPOCH)
        elif first.producer is not None:
            producer_id, epoch = first.producer
            plog.append(build_batch([Record(i, now, key, value)
                                     for i, (key, value) in enumerate(records)],
                                    producer_id=producer_id, producer_epoch=epoch,
                                    transactional=True),
                        now_ms=now, leader_epoch=LEADER_EPOCH, origin=AppendOrigin.COORDINATOR,
                        owned=True)
        else:
            plog.append_own(records, now_ms=now, leader_epoch=LEADER_EPOCH)
        broker.fetch_waiters.notify((self.topic, partition))
        return plog, len(plog.segments) != segments

    async def _durable(self, plog, partition: int, batch: _Batch, rolled: bool) -> None:
        try:
            await plog.flusher.after_append(rolled=rolled)
        except StorageError as exc:
            self._settle_batch(partition, batch, exc.code)
            return
        except OSError:
            self._settle_batch(partition, batch, ErrorCode.KAFKA_STORAGE_ERROR)
            return
        self._settle_batch(partition, batch, ErrorCode.NONE)

    def _settle_batch(self, partition: int, batch: _Batch, error: ErrorCode) -> None:
        """Every write of the batch learns its fate, in the order issued; a
        failed append fails them all, as one batch is one append."""
        try:
            for write in batch.writes:
                try:
                    self._settle(partition, write, error)
                except Exception:  # one continuation's bug costs no other write its answer
                    self.log.exception(f"{self.name}.continuation_failed",
                                       partition=partition)
        finally:
            unsettled = self._unsettled.get(partition)
            if unsettled is not None:
                unsettled.discard(batch)
                if not unsettled:
                    del self._unsettled[partition]
            if batch.finished is not None:
                batch.finished.set_result(None)

    def _settle(self, partition: int, write: Write, error: ErrorCode) -> None:
        if write.done is not None:
            self.run(partition, write.done(error, self.clock()))

    def writes_in_flight(self, partitions) -> list[asyncio.Future]:
        """A future per batch of these partitions not yet settled (OffsetFetch with
        require_stable waits for them, so it sees the commits being written)."""
        waits = []
        for partition in set(partitions):
            for batch in self._unsettled.get(partition, ()):
                if batch.finished is None:
                    batch.finished = self.loop.create_future()
                waits.append(batch.finished)
        return waits

    # -- timers ------------------------------------------------------------------------

    def _arm_timer(self) -> None:
        mark = self.deadlines.mark()
        if self._stopped or mark == self._timer_checked:
            return
        self._timer_checked = mark
        due = self.deadlines.next_deadline()
        if due is None or (self._timer is not None and self._timer_at is not None
                           and self._timer_at <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        delay = max(due - self.now(), 0) / 1000
        self._timer_at = due
        self._timer = self.loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = self._timer_at = self._timer_checked = None
        now = self.now()
        # One at a time, earliest first: firing one may cancel another that is
        # also due.  A deadline armed meanwhile, even one already due (an
        # initial delay of 0 extended by 0 ms), waits for the next turn: the
        # requests that arrived in between come first, as in Kafka, whose
        # timers run as operations queued behind them.
        mark = self.deadlines.mark()
        while (due := self.deadlines.pop_next_due(now, mark)) is not None:
            (partition, key), payload = due
            shard = self.shards.get(partition)
            if shard is None:
                continue
            try:
                self.run(partition, shard.fire(key, payload, now))
            except Exception:
                self.log.exception(f"{self.name}.timer_failed", partition=partition,
                                   timer=str(key[0]))
        self._arm_timer()

    # -- loading and unloading -----------------------------------------------------------

    def start(self) -> None:
        """Serve every partition without data at once; replay the others in the
        background."""
        logs = self.broker.logs
        with_data = []
        for partition in range(self.partitions):
            plog = logs.get(self.topic, partition)
            if plog is not None and plog.log_end_offset > 0:
                with_data.append(partition)
                self.state[partition] = PartitionState.LOADING
            else:
                self._activate(partition)
        task = self.loop.create_task(self._load_all(with_data), name=f"kcoord-{self.name}-load")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._arm_timer()

    async def _load_all(self, partitions: list[int]) -> None:
        began = time.monotonic()
        totals: collections.Counter = collections.Counter()
        try:
            for partition in partitions:
                if self._stopped:  # the broker stops: the rest is not loaded
                    break
                plog = self.broker.logs.get(self.topic, partition)
                try:
                    loaded = await self.loop.run_in_executor(None, self._load, plog)
                    # A shard that cannot take over what was replayed fails its
                    # partition alone: the others still load.
                    self._activate(partition, loaded)
                except Exception as exc:
                    self._load_failed(partition, plog, exc)
                    continue
                totals.update(loaded.counts())
        finally:
            # What waits for the loads (transaction markers for this log, the
            # codecs' warm-up) goes on, whatever happened to them.
            self.loaded.set()
        if self.failed:
            self.log.error(f"{self.name}.partitions_not_served", partitions=self.failed,
                           reason="their logs could not be loaded: their requests are "
                                  "answered NOT_COORDINATOR and nothing is written to them")
        if partitions:
            self.log.info(f"{self.name}.loaded", partitions=len(partitions), **totals,
                          elapsed_ms=round((time.monotonic() - began) * 1000, 1))

    def _load_failed(self, partition: int, plog, exc: Exception) -> None:
        """A partition that cannot be loaded whole is not served, loudly (as Kafka's
        coordinator loader fails it): its newest records may lie past the
        damage, so serving the rest would answer from older state, and writes
        acknowledged after the damage would be cut by the next recovery."""
        if not self._stopped:
            self.state[partition] = PartitionState.FAILED
        self.shards.pop(partition, None)  # one that could not take over: its timers lapse
        if isinstance(exc, CorruptLogError):
            self.log.error(f"{self.name}.load_failed", partition=partition, offset=exc.offset,
                           segment=segment_name(exc.segment), position=exc.position,
                           bytes_after=exc.bytes_after, log_end_offset=plog.log_end_offset,
                           reason=f"{exc}; the partition is answered NOT_COORDINATOR "
                                  "until the damage is repaired and the broker restarted")
        else:
            self.log.error(f"{self.name}.load_failed", partition=partition, exc_info=exc,
                           reason="the partition is answered NOT_COORDINATOR")

    def unload(self) -> int:
        """The broker stops: every shard answers its parked requests (Kafka answers
        them NOT_COORDINATOR, so their clients look elsewhere), the writes
        issued before are appended, and the partitions are resigned, as Kafka's
        ``CoordinatorRuntime.scheduleUnloadOperation`` resigns them: their
        requests are refused NOT_COORDINATOR and their timers never fire again;
        a partition still loading is not served either.  How many parked
        requests were answered."""
        answered = 0
        for partition, shard in self.active():
            outcome = shard.unload()
            answered += len(outcome.answers)
            self.run(partition, outcome)
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = self._timer_at = None
        for partition in list(self.shards):
            del self.shards[partition]
        for partition, state in self.state.items():
            if state is not PartitionState.FAILED:
                self.state[partition] = PartitionState.UNLOADED
        # Appended now; what their continuations would write next is refused
        # (``_append`` writes to active partitions only).
        self.flush_all()
        return answered

    def flush_all(self) -> None:
        """Append every open batch now."""
        for partition in list(self._open):
            self.flush(partition)

    def append_marker(self, partition: int, producer_id: int, producer_epoch: int,
                      commit: bool, coordinator_epoch: int) -> asyncio.Future:
        """A transaction's end marker for a partition this runtime has resigned
        (the broker stops): appended all the same, since a marker is an append
        to the log, which Kafka writes without its coordinator; the next load
        replays it.  The ticket holds the append's error code."""
        ticket = self.loop.create_future()
        batch = _Batch()
        batch.writes.append(Write([], lambda error, now: Outcome().answer(ticket, error),
                                  marker=(producer_id, producer_epoch, commit,
                                          coordinator_epoch)))
        self._append_batch(partition, batch)
        return ticket

    async def stop(self) -> None:
        """Append the open batches, wait for the writes in flight, and fire no
        timer from now on."""
        self.flush_all()
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._tasks):
            if not task.done():
                try:
                    await asyncio.wait_for(asyncio.shield(task), 5)
                except (asyncio.TimeoutError, Exception):
                    task.cancel()
