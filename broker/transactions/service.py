"""The transaction coordinator's facade: every transaction handler calls one
of its methods, and each goes to the coordinator runtime (``broker.runtime``)
for the shard of the transactional id's ``__transaction_state`` partition,
placed as Kafka places it (``abs(hashCode) % partitions``).

It also does the one thing a shard cannot: writing the end markers of a
transaction to its partitions (Kafka's ``TransactionMarkerChannelManager``;
on one node the markers are appended here, each durable before the
transaction is marked complete).
"""

from __future__ import annotations

import asyncio

import structlog

from kcoord.broker.groups.coordinator import GroupCoordinator
from kcoord.broker.groups.loader import plain_records
from kcoord.broker.groups.placement import Placement
from kcoord.broker.runtime.runtime import ADAPTIVE_LINGER, CoordinatorRuntime
from kcoord.broker.topics.data import LEADER_EPOCH
from kcoord.broker.transactions.coordinator import (
    MarkerJob,
    TransactionShard,
    TxnConfig,
    replay,
)
from kcoord.broker.transactions.metadata import EXHAUSTED_EPOCH, NO_PRODUCER_ID
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.errors import StorageError
from kcoord.storage.layout import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

log = structlog.get_logger("kcoord.transactions")


def load_partition(plog):
    return replay(plain_records(plog))


class TransactionService:
    def __init__(self, broker, config: TxnConfig | None = None, clock=None, *,
                 linger_ms: int = ADAPTIVE_LINGER):
        self.config = config or TxnConfig()
        self._broker = broker
        self.runtime = CoordinatorRuntime(
            broker, name="transactions", topic=TRANSACTION_STATE_TOPIC,
            partitions=self.config.partitions, new_shard=self._new_shard, load=load_partition,
            clock=clock, linger_ms=linger_ms, on_effects=self._effects)
        self._placement = Placement(self.config.partitions)
        self._tasks: set[asyncio.Task] = set()
        self._answered: list[MarkerJob] = []  # markers to write once their answers are sent

    def _new_shard(self, partition: int, timers, now: int, refusal) -> TransactionShard:
        return TransactionShard(self.config, now=now, partition=partition, timers=timers,
                                refusal=refusal)

    def partition_for(self, transactional_id: str) -> int:
        return self._placement(transactional_id)

    def shard_for(self, transactional_id: str) -> TransactionShard:
        return self.runtime.shard(self.partition_for(transactional_id))

    # -- the producer's requests ---------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> tuple[ErrorCode, int, int]:
        meta = self.shard_for(transactional_id).ids.get(transactional_id)
        new_pid = NO_PRODUCER_ID
        if meta is None or meta.producer_epoch >= EXHAUSTED_EPOCH - 1:
            new_pid = await self._broker.producer_ids.allocate()
        return await self.runtime.write(self.partition_for(transactional_id),
                                        TransactionShard.init_producer_id, transactional_id,
                                        timeout_ms, producer_id, producer_epoch, new_pid)

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions, *, client_tv: int = 0) -> asyncio.Future:
        return self.runtime.write(self.partition_for(transactional_id),
                                  TransactionShard.add_partitions, transactional_id,
                                  producer_id, producer_epoch, list(partitions),
                                  client_tv=client_tv)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool, *, tv2: bool = False) -> asyncio.Future:
        """EndTxn's ticket: an error code, or with ``tv2`` (v5) ``(error, producer
        id, epoch)``."""
        if tv2:
            meta = self.shard_for(transactional_id).ids.get(transactional_id)
            if meta is not None and meta.producer_epoch >= EXHAUSTED_EPOCH:
                # the epoch is spent: a new producer id first
                task = asyncio.ensure_future(self._end_txn_with_new_id(
                    transactional_id, producer_id, producer_epoch, commit))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                return task
        return self.runtime.write(self.partition_for(transactional_id), TransactionShard.end_txn,
                                  transactional_id, producer_id, producer_epoch, commit,
                                  tv2=tv2, new_pid=NO_PRODUCER_ID)

    async def _end_txn_with_new_id(self, transactional_id: str, producer_id: int,
                                   producer_epoch: int, commit: bool):
        new_pid = await self._broker.producer_ids.allocate()
        return await self.runtime.write(self.partition_for(transactional_id),
                                        TransactionShard.end_txn, transactional_id,
                                        producer_id, producer_epoch, commit, tv2=True,
                                        new_pid=new_pid)

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions) -> dict[tuple[str, int], ErrorCode]:
        """For each partition, whether the producer's transaction includes it
        (AddPartitionsToTxn's verify_only)."""
        return self.runtime.read(self.partition_for(transactional_id), TransactionShard.verify,
                                 transactional_id, producer_id, producer_epoch, list(partitions))

    # -- what the tools read --------------------------------------------------------------

    def describe(self, transactional_id: str):
        """``(error, metadata or None)`` of one transactional id."""
        return self.runtime.read(self.partition_for(transactional_id),
                                 TransactionShard.describe, transactional_id)

    def listing(self):
        """``(error, [metadata])`` of every transactional id held."""
        if self.runtime.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        return ErrorCode.NONE, [meta for _p, shard in self.runtime.active()
                                for meta in shard.listing()]

    def now(self) -> int:
        return self.runtime.now()

    # -- the end markers -----------------------------------------------------------------

    def _effects(self, partition: int, effects: list) -> None:
        """An outcome's marker jobs are taken up once its answers are sent (the
        EndTxn answer leaves as soon as the Prepare state is durable, as Kafka's
        coordinator answers before its markers are written) and before the
        broker serves another request: the producer's next request, or a
        consumer's, finds the transaction complete, as before."""
        jobs = [job for job in effects if isinstance(job, MarkerJob)]
        if jobs:
            if not self._answered:
                self._broker.defer(self._write_answered)
            self._answered.extend(jobs)

    def _write_answered(self) -> None:
        jobs, self._answered = self._answered, []
        for job in jobs:
            self._write_answered_job(job)
        # The Complete states written now, not at the linger's end: a
        # DescribeTransactions served next shows them (as before the answer
        # went first).
        for partition in {job.partition for job in jobs}:
            self.runtime.flush(partition)

    def _write_answered_job(self, job: MarkerJob) -> None:
        try:
            if self._write_markers_now(job):
                return
        except Exception:  # a bug: the markers go the slow way, each one checked
            log.exception("transactions.markers_failed", transactional_id=job.transactional_id)
        task = self.runtime.loop.create_task(self._write_markers(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _write_markers_now(self, job: MarkerJob) -> bool:
        """Write the markers and complete the transaction in this turn of the
        loop, when nothing has to be waited for (every log's producer state
        loaded, no fsync asked for before an acknowledgement): the producer's
        next transaction then never finds this one still completing.  False
        when the markers need the asynchronous path (``_write_markers``)."""
        broker = self._broker
        logs = []
        for topic, index in job.partitions:
            plog = broker.logs.get(topic, index)
            if plog is None:
                if topic == OFFSETS_TOPIC:
                    return False  # its folder appears on its first write: the slow path
                continue  # the topic was deleted
            if not plog.producers_loaded or plog.config.flush_policy != "never":
                return False
            if topic == OFFSETS_TOPIC and index not in broker.groups.runtime.shards:
                return False  # its group coordinator is still loading: the slow path waits
            logs.append((topic, index, plog))
        waiting = []
        unflushed = []
        for topic, index, plog in logs:
            if topic == OFFSETS_TOPIC:
                waiting.append((index, broker.groups.runtime.write(
                    index, GroupCoordinator.complete_txn, job.producer_id, job.producer_epoch,
                    job.commit, job.coordinator_epoch)))
                continue
            if not self._append_marker(job, topic, index, plog):
                unflushed.append((topic, index, plog))
        if unflushed or any(not ticket.done() for _i, ticket in waiting):
            task = self.runtime.loop.create_task(self._complete_after(job, waiting, unflushed))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return True
        self._markers_logged(job, waiting)
        self.runtime.write(job.partition, TransactionShard.markers_written,
                           job.transactional_id, job.producer_id, job.producer_epoch, job.commit)
        return True

    async def _complete_after(self, job: MarkerJob, waiting, unflushed=()) -> None:
        """The transaction completes once its markers are durable: the group
        coordinators' written, and those a topic's ``flush.messages`` or
        ``flush.ms`` asks an fsync of fsynced (a Complete state must never be on
        disk without its markers: the next start would write none again)."""
        for topic, index, plog in unflushed:
            try:
                await plog.flusher.flush_async()
            except StorageError as exc:
                log.warning("transactions.marker_failed", transactional_id=job.transactional_id,
                            topic=topic, partition=index, error=exc.code.name, reason=str(exc))
                continue
            self._broker.fetch_waiters.notify((topic, index))
        for _index, ticket in waiting:
            await ticket
        self._markers_logged(job, waiting)
        self.runtime.write(job.partition, TransactionShard.markers_written,
                           job.transactional_id, job.producer_id, job.producer_epoch, job.commit)

    def _append_marker(self, job: MarkerJob, topic: str, index: int, plog) -> bool:
        """Append one marker; False when the log's flush settings ask for an
        fsync before it counts (its readers are woken after that fsync)."""
        try:
            segments = len(plog.segments)
            plog.append_marker(job.producer_id, job.producer_epoch, job.commit,
                               coordinator_epoch=job.coordinator_epoch,
                               leader_epoch=LEADER_EPOCH)
            # (a rolled segment is fsynced in the background)
            if not plog.flusher.durable_now(len(plog.segments) != segments):
                return False
        except StorageError as exc:
            log.warning("transactions.marker_failed", transactional_id=job.transactional_id,
                        topic=topic, partition=index, error=exc.code.name, reason=str(exc))
            return True
        self._broker.fetch_waiters.notify((topic, index))
        return True

    @staticmethod
    def _markers_logged(job: MarkerJob, waiting) -> None:
        for index, ticket in waiting:
            code = ticket.result()
            if code != ErrorCode.NONE:
                log.warning("transactions.marker_failed", transactional_id=job.transactional_id,
                            topic=OFFSETS_TOPIC, partition=index, error=code.name)

    async def _write_markers(self, job: MarkerJob) -> None:
        for topic, index in job.partitions:
            # One still loading its __consumer_offsets partition gets it once
            # loaded (Kafka sends a marker again until it is written).
            code, reason = await self.write_marker(
                topic, index, job.producer_id, job.producer_epoch, job.commit,
                job.coordinator_epoch, wait_for_load=True)
            if code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                # (a deleted topic gets no marker, as Kafka drops it)
                log.warning("transactions.marker_failed", transactional_id=job.transactional_id,
                            topic=topic, partition=index, error=code.name, reason=reason)
        self.runtime.write(job.partition, TransactionShard.markers_written,
                           job.transactional_id, job.producer_id, job.producer_epoch, job.commit)

    async def write_marker(self, topic: str, index: int, producer_id: int,
                           producer_epoch: int, commit: bool, coordinator_epoch: int, *,
                           wait_for_load: bool = False) -> tuple[ErrorCode, str | None]:
        """Append one end marker, durable before this returns: ``(error, reason)``.
        A ``__consumer_offsets`` partition's group coordinator writes it and makes
        the transaction's offsets count or not (``wait_for_load``: once loaded,
        else COORDINATOR_LOAD_IN_PROGRESS); a partition that is not there:
        UNKNOWN_TOPIC_OR_PARTITION."""
        broker = self._broker
        if topic == OFFSETS_TOPIC:
            while True:
                try:
                    code = await broker.groups.complete_transaction(
                        index, producer_id, producer_epoch, commit, coordinator_epoch)
                except StorageError as exc:  # its producer state could not be read
                    return exc.code, str(exc)
                if code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or not wait_for_load \
                        or broker.groups.loaded.is_set():
                    # (loads ended with the partition still loading: a stop
                    # cancelled them; asking again would only spin)
                    return code, None
                await broker.groups.loaded.wait()
        plog = broker.logs.get(topic, index)
        if plog is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        try:
            await plog.load_producer_state()
            segments = len(plog.segments)
            plog.append_marker(producer_id, producer_epoch, commit,
                               coordinator_epoch=coordinator_epoch, leader_epoch=LEADER_EPOCH)
            await plog.flusher.after_append(rolled=len(plog.segments) != segments)
        except StorageError as exc:
            return exc.code, str(exc)
        broker.fetch_waiters.notify((topic, index))
        return ErrorCode.NONE, None

    # -- the runtime's life ------------------------------------------------------------

    @property
    def loaded(self) -> asyncio.Event:
        return self.runtime.loaded

    def start(self) -> None:
        self.runtime.start()

    async def settle(self, timeout: float) -> None:
        """The broker stops: the transactions already answered, or being ended,
        get their markers and their Complete states (up to ``timeout``) while
        this coordinator and the group coordinator still serve, so that a clean
        stop leaves none to complete at the next start.  The Prepare states
        still in an open batch are appended first (their EndTxn answered)."""
        loop = self.runtime.loop
        deadline = loop.time() + timeout
        while True:
            self.runtime.flush_all()
            self._write_answered()
            pending = [t for t in self._tasks if not t.done()]
            pending += self.runtime.writes_in_flight(range(self.runtime.partitions))
            if not pending or loop.time() >= deadline:
                return
            await asyncio.wait(pending, timeout=deadline - loop.time())
            await asyncio.sleep(0)  # what they deferred (the markers after a Prepare)
            self._broker.run_deferred()

    def unload(self) -> None:
        # What is still open or answered after ``settle`` is written, what
        # follows it is refused (the next start completes it).
        self.runtime.flush_all()
        self._write_answered()
        self.runtime.unload()

    async def stop(self) -> None:
        for task in list(self._tasks):
            try:
                await asyncio.wait_for(asyncio.shield(task), 5)
            except (asyncio.TimeoutError, Exception):
                task.cancel()
        await self.runtime.stop()
