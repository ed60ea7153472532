"""One ``__transaction_state`` partition's transaction coordinator: a shard of
the coordinator runtime (Kafka's ``TransactionCoordinator`` and
``TransactionStateManager`` for the transactional ids of one partition).

Pure and synchronous: every operation takes ``now`` and returns an
``Outcome``; each write's continuation is a named method given its inputs
(``functools.partial``), as in the group coordinator.  A change of state is
written first (the id's ``TransactionLogValue``) and takes effect once that
record is durable, as Kafka's ``prepareTransitionTo`` /
``completeTransitionTo``; meanwhile the id is *pending* and other requests for
it get CONCURRENT_TRANSACTIONS.  Timeouts and expiry are Kafka's two periodic
sweeps, on the runtime's deadline heap.

Ending a transaction: EndTxn writes PrepareCommit or PrepareAbort and is
answered once that is durable; the shard then asks its service (an effect:
``MarkerJob``) to write the end markers to every partition of the
transaction, and when they are written (``markers_written``) it writes
CompleteCommit or CompleteAbort.  A producer that calls InitProducerId while
its transaction is open, and a transaction past its timeout, are aborted the
same way with the epoch bumped, which fences the old producer.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import structlog

from kcoord.broker.runtime.outcome import Outcome, Write
from kcoord.broker.transactions.metadata import (
    COMPLETE,
    EXHAUSTED_EPOCH,
    NO_EPOCH,
    NO_PRODUCER_ID,
    PREPARING,
    TxnMetadata,
    TxnState,
)
from kcoord.protocol import txn_records
from kcoord.protocol.errors import ErrorCode

log = structlog.get_logger("kcoord.transactions")
_SWEEP_TIMEOUTS = ("sweep", "timeouts")
_SWEEP_EXPIRED = ("sweep", "expired")


def _invalid_end(meta: TxnMetadata, commit: bool) -> ErrorCode:
    """An EndTxn the state cannot take: logged as Kafka's coordinator logs it
    (TransactionCoordinator.logInvalidStateTransitionAndReturnError), a hint for
    an operator whose producer fails with INVALID_TXN_STATE."""
    log.warning("transaction.invalid_end", transactional_id=meta.transactional_id,
                state=meta.state.display, producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch, requested="COMMIT" if commit else "ABORT")
    return ErrorCode.INVALID_TXN_STATE


@dataclass
class TxnConfig:
    partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms (7 days)
    coordinator_epoch: int = 0  # the partition's leader epoch: markers carry it
    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    abort_interval_ms: int = 10_000
    # transaction.remove.expired.transaction.cleanup.interval.ms
    expire_interval_ms: int = 3_600_000


@dataclass(frozen=True)
class MarkerJob:
    """End markers to write for a transaction, then ``markers_written``."""
    partition: int  # of __transaction_state
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[tuple[str, int], ...]
    coordinator_epoch: int


@dataclass
class LoadedTransactions:
    ids: dict[str, TxnMetadata]
    records: int = 0

    def counts(self) -> dict[str, int]:
        return {"transactional_ids": len(self.ids), "records": self.records}


def replay(records) -> LoadedTransactions:
    """The ids a partition's records leave: the last record of an id wins, a
    tombstone removes it."""
    latest: dict[bytes, bytes | None] = {}
    count = 0
    for key, value in records:
        count += 1
        if key is not None:
            latest.pop(key, None)
            latest[key] = value
    ids = {}
    for key, value in latest.items():
        try:
            transactional_id = txn_records.decode_key(key)
            decoded = txn_records.decode_value(value) if value is not None else None
        except Exception:  # an undecodable record costs itself, not the partition
            continue
        if decoded is not None:
            ids[transactional_id] = TxnMetadata.from_record(transactional_id, decoded)
    return LoadedTransactions(ids, count)


class TransactionShard:
    def __init__(self, config: TxnConfig, *, now: int, partition: int, timers,
                 refusal: ErrorCode | None = None):
        self.config = config
        self.partition = partition
        self.timers = timers
        self.refusal = refusal
        self.ids: dict[str, TxnMetadata] = {}
        if timers is not None:
            # Kafka's two sweeps, each at its interval: transactions open past
            # their timeout are aborted, ids idle past their expiry forgotten.
            timers.schedule(_SWEEP_TIMEOUTS, now + config.abort_interval_ms)
            timers.schedule(_SWEEP_EXPIRED, now + config.expire_interval_ms)

    # -- the runtime's side ------------------------------------------------------------

    def install(self, loaded: LoadedTransactions, now: int) -> Outcome:
        """Take over a replayed partition; transactions left half ended are ended
        (Kafka's coordinator resends the markers of a Prepare state it loads)."""
        self.ids = loaded.ids
        out = Outcome()
        for meta in self.ids.values():
            if meta.state in PREPARING:
                meta.pending = True  # its markers are written again, then it completes
                out.effects.append(self._job(meta, meta.state is TxnState.PREPARE_COMMIT))
        return out

    def unload(self) -> Outcome:
        return Outcome()

    def fire(self, key, payload, now: int) -> Outcome | None:
        out = Outcome()
        if key == _SWEEP_TIMEOUTS:
            # TransactionCoordinator.abortTimedOutTransactions
            for meta in list(self.ids.values()):
                if meta.state is TxnState.ONGOING and not meta.pending and \
                        meta.start_ms + meta.timeout_ms < now:
                    out.merge(self._begin_abort(
                        meta, now, reason=f"timed out after {meta.timeout_ms} ms"))
            self.timers.schedule(_SWEEP_TIMEOUTS, now + self.config.abort_interval_ms)
        elif key == _SWEEP_EXPIRED:
            # TransactionStateManager.removeExpiredTransactionalIds
            for meta in list(self.ids.values()):
                if (meta.state is TxnState.EMPTY or meta.state in COMPLETE) and \
                        not meta.pending and \
                        meta.last_update_ms <= now - self.config.id_expiration_ms:
                    out.merge(self._expire(meta))
            self.timers.schedule(_SWEEP_EXPIRED, now + self.config.expire_interval_ms)
        return out

    def _job(self, meta: TxnMetadata, commit: bool) -> MarkerJob:
        return MarkerJob(self.partition, meta.transactional_id, meta.producer_id,
                         meta.producer_epoch, commit, tuple(sorted(meta.partitions)),
                         self.config.coordinator_epoch)

    # -- writing a new state -----------------------------------------------------------

    def _transition(self, meta: TxnMetadata, target: TxnMetadata, done,
                    reason: str, routine: bool = False) -> Outcome:
        """Write ``target`` as the id's state; ``done(error, now)`` once durable.
        ``routine``: a step of a transaction its producer runs (begin, add, end,
        markers written), logged at DEBUG as Kafka's coordinator logs those (a
        producer's transactions would otherwise log three lines each); a
        producer's start, fencing or timeout is logged at INFO."""
        meta.pending = True
        key = txn_records.encode_key(meta.transactional_id)
        value = txn_records.encode_value(target.record_fields())

        return Outcome(writes=[Write([(key, value)], functools.partial(
            self._settled, meta, target, done, reason, routine))])

    def _settled(self, meta: TxnMetadata, target: TxnMetadata, done, reason: str,
                 routine: bool, error: ErrorCode, now: int) -> Outcome:
        """A state's record is durable (the state takes effect) or failed."""
        meta.pending = False
        if error == ErrorCode.NONE:
            current = self.ids.get(meta.transactional_id)
            if current is meta:
                self.ids[meta.transactional_id] = target
                (log.debug if routine else log.info)(
                    "transaction.state", transactional_id=target.transactional_id,
                    state=target.state.display, producer_id=target.producer_id,
                    producer_epoch=target.producer_epoch, reason=reason,
                    partitions=len(target.partitions) or None)
        else:
            log.warning("transaction.state_not_written",
                        transactional_id=target.transactional_id,
                        state=target.state.display, error=error.name, reason=reason)
        return done(error, now)

    @staticmethod
    def _write_error(error: ErrorCode) -> ErrorCode:
        """What a client is told when the state's write failed
        (TransactionStateManager.appendTransactionToLog)."""
        if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                     ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
            return ErrorCode.NOT_COORDINATOR
        if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return error

    # -- InitProducerId ----------------------------------------------------------------

    def init_producer_id(self, ticket, transactional_id: str, timeout_ms: int,
                         expected_pid: int, expected_epoch: int, new_pid: int,
                         now: int) -> Outcome:
        """Answers ``(error, producer id, epoch)``.  ``new_pid`` is a fresh producer
        id, used if the id is new or its epochs are exhausted (-1: none was
        allocated, and the caller is told to ask again)."""
        out = Outcome()

        def refuse(code: ErrorCode) -> Outcome:
            return out.answer(ticket, (code, NO_PRODUCER_ID, NO_EPOCH))

        if self.refusal is not None:
            return refuse(self.refusal)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return refuse(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        meta = self.ids.get(transactional_id)
        if meta is None:
            if new_pid == NO_PRODUCER_ID:
                return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
            meta = self.ids[transactional_id] = TxnMetadata(
                transactional_id, new_pid, NO_EPOCH, timeout_ms, last_update_ms=now)
        if meta.pending:
            return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
        given = expected_pid != NO_PRODUCER_ID
        if given and not (meta.producer_epoch == NO_EPOCH or expected_pid == meta.producer_id or (
                expected_pid == meta.previous_producer_id and expected_epoch >= EXHAUSTED_EPOCH)):
            return refuse(ErrorCode.PRODUCER_FENCED)
        if meta.state in PREPARING:
            return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.ONGOING:
            # The open transaction is aborted under a bumped epoch, which fences
            # the producer that began it; the caller is told to ask again once
            # the abort is under way.
            return out.merge(self._begin_abort(meta, now, ticket=ticket))
        if meta.state is not TxnState.EMPTY and meta.state not in COMPLETE:
            return refuse(ErrorCode.UNKNOWN_SERVER_ERROR)  # Dead, fencing: never at rest
        # Empty or Complete*: the next epoch of the same producer id, or a new id.
        if meta.producer_epoch >= EXHAUSTED_EPOCH and (not given or
                                                       expected_epoch == meta.producer_epoch):
            if new_pid == NO_PRODUCER_ID:
                return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
            target = replace(meta, producer_id=new_pid, producer_epoch=0,
                             previous_producer_id=meta.producer_id,
                             last_producer_epoch=meta.producer_epoch if given else NO_EPOCH)
        elif not given:
            target = replace(meta, producer_epoch=meta.producer_epoch + 1,
                             previous_producer_id=meta.producer_id, last_producer_epoch=NO_EPOCH)
        elif meta.producer_epoch == NO_EPOCH or expected_epoch == meta.producer_epoch:
            target = replace(meta, producer_epoch=meta.producer_epoch + 1,
                             previous_producer_id=meta.producer_id,
                             last_producer_epoch=meta.producer_epoch)
        elif meta.last_producer_epoch != NO_EPOCH and expected_epoch == meta.last_producer_epoch:
            target = replace(meta, previous_producer_id=meta.producer_id)  # a retried bump
        else:
            return refuse(ErrorCode.PRODUCER_FENCED)
        target = replace(target, state=TxnState.EMPTY, partitions=set(), start_ms=-1,
                         last_update_ms=now, timeout_ms=timeout_ms, pending=False)

        reason = "a new producer" if meta.producer_epoch == NO_EPOCH else \
            "a new producer id: the epochs ran out" if target.producer_id != meta.producer_id \
            else "the producer initialized again: next epoch"
        return out.merge(self._transition(
            meta, target, functools.partial(self._initialized, ticket, meta, target), reason))

    def _initialized(self, ticket, meta: TxnMetadata, target: TxnMetadata, error: ErrorCode,
                     now: int) -> Outcome:
        if error != ErrorCode.NONE:
            if meta.producer_epoch == NO_EPOCH and \
                    self.ids.get(meta.transactional_id) is meta:
                del self.ids[meta.transactional_id]  # never written: forget it
            return Outcome().answer(ticket, (self._write_error(error), NO_PRODUCER_ID,
                                             NO_EPOCH))
        return Outcome().answer(ticket, (ErrorCode.NONE, target.producer_id,
                                         target.producer_epoch))

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------

    @staticmethod
    def _check_producer(meta: TxnMetadata | None, pid: int, epoch: int) -> ErrorCode:
        """The checks AddPartitionsToTxn and AddOffsetsToTxn make, in Kafka's order."""
        if meta is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.producer_id != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED
        if meta.state in PREPARING:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    def add_partitions(self, ticket, transactional_id: str, pid: int, epoch: int,
                       partitions, now: int, *, client_tv: int = 0) -> Outcome:
        """Answers one error code for every partition of the request.
        ``client_tv``: 2 when a transaction.version 2 client adds them (Produce
        v12+, TxnOffsetCommit v5+, AddPartitionsToTxn v4+), 0 before."""
        out = Outcome()
        if not transactional_id:
            return out.answer(ticket, ErrorCode.INVALID_REQUEST)
        if self.refusal is not None:
            return out.answer(ticket, self.refusal)
        meta = self.ids.get(transactional_id)
        error = self._check_producer(meta, pid, epoch)
        if error:
            return out.answer(ticket, error)
        if meta.state is TxnState.DEAD:
            return out.answer(ticket, ErrorCode.INVALID_TXN_STATE)
        wanted = set(partitions)
        if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
            return out.answer(ticket, ErrorCode.NONE)  # nothing new: nothing written
        start = meta.start_ms if meta.state is TxnState.ONGOING else now
        target = replace(meta, state=TxnState.ONGOING, partitions=meta.partitions | wanted,
                         start_ms=start, last_update_ms=now, pending=False,
                         previous_producer_id=meta.producer_id,
                         client_transaction_version=client_tv)

        return out.merge(self._transition(
            meta, target, functools.partial(self._added, ticket),
            "partitions added" if meta.state is TxnState.ONGOING else "a transaction began",
            routine=True))

    def _added(self, ticket, error: ErrorCode, now: int) -> Outcome:
        return Outcome().answer(ticket, self._write_error(error))

    def verify(self, transactional_id: str | None, pid: int, epoch: int,
               partitions) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn's verify_only (KIP-890): for each partition, NONE if
        the producer's transaction includes it, else TRANSACTION_ABORTABLE; the
        producer's own errors for all."""
        meta = self.ids.get(transactional_id) if transactional_id is not None else None
        if self.refusal is not None:
            code = self.refusal
        elif meta is None or meta.producer_id != pid:
            code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif meta.producer_epoch != epoch:
            code = ErrorCode.PRODUCER_FENCED
        elif meta.state in PREPARING:
            code = ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            return {tp: ErrorCode.NONE if meta.state is TxnState.ONGOING and tp in meta.partitions
                    else ErrorCode.TRANSACTION_ABORTABLE for tp in partitions}
        return {tp: code for tp in partitions}

    # -- EndTxn ------------------------------------------------------------------------

    def end_txn(self, ticket, transactional_id: str, pid: int, epoch: int, commit: bool,
                now: int, *, tv2: bool = False, new_pid: int = NO_PRODUCER_ID) -> Outcome:
        """EndTxn; answers an error code, or with ``tv2`` (EndTxn v5, KIP-890)
        ``(error, producer id, epoch)``: the id and epoch to go on with, as
        every end bumps the epoch (``new_pid``: a fresh id, if it overflows)."""
        if not transactional_id:
            code = ErrorCode.INVALID_REQUEST
            return Outcome().answer(ticket, (code, NO_PRODUCER_ID, NO_EPOCH) if tv2 else code)
        if tv2:
            return self._end_txn_v2(ticket, transactional_id, pid, epoch, commit, now, new_pid)
        out = Outcome()
        if self.refusal is not None:
            return out.answer(ticket, self.refusal)
        meta = self.ids.get(transactional_id)
        if meta is None or meta.producer_id != pid:
            return out.answer(ticket, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != epoch:
            return out.answer(ticket, ErrorCode.PRODUCER_FENCED)
        if meta.pending:
            return out.answer(ticket, ErrorCode.CONCURRENT_TRANSACTIONS)
        state = meta.state
        if state is TxnState.ONGOING:
            return out.merge(self._begin_end(meta, commit, now, ticket))
        if state is TxnState.COMPLETE_COMMIT and commit or \
                state is TxnState.COMPLETE_ABORT and not commit:
            return out.answer(ticket, ErrorCode.NONE)  # a retry
        if state is TxnState.PREPARE_COMMIT and commit or \
                state is TxnState.PREPARE_ABORT and not commit:
            return out.answer(ticket, ErrorCode.CONCURRENT_TRANSACTIONS)
        return out.answer(ticket, _invalid_end(meta, commit))  # also Empty, Dead, fencing

    def _end_txn_v2(self, ticket, transactional_id: str, pid: int, epoch: int, commit: bool,
                    now: int, new_pid: int) -> Outcome:
        """EndTxn v5 (transaction.version 2): the epoch is bumped at every end,
        and a retry of an end already made is recognised by the bump
        (TransactionCoordinator.endTransaction's TV2 path)."""
        out = Outcome()

        def refuse(code: ErrorCode) -> Outcome:
            return out.answer(ticket, (code, NO_PRODUCER_ID, NO_EPOCH))

        if self.refusal is not None:
            return refuse(self.refusal)
        meta = self.ids.get(transactional_id)
        if meta is None:
            return refuse(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.pending:
            return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = meta.state
        bumped = meta.producer_epoch == epoch + 1
        overflowed = meta.previous_producer_id == pid and epoch == EXHAUSTED_EPOCH and \
            meta.producer_epoch == 0
        if meta.producer_id != pid and not overflowed:
            return refuse(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if state in (TxnState.ONGOING, TxnState.EMPTY):
            valid = epoch == meta.producer_epoch
        elif state in PREPARING:
            valid = bumped
        else:
            valid = bumped or overflowed or epoch == meta.producer_epoch
        if not valid:
            return refuse(ErrorCode.PRODUCER_FENCED)
        retry = bumped or overflowed
        current = (ErrorCode.NONE, meta.producer_id, meta.producer_epoch)
        if state is TxnState.ONGOING:
            return out.merge(self._begin_end(meta, commit, now, ticket, tv2=True,
                                             new_pid=new_pid))
        if state is TxnState.PREPARE_COMMIT and commit or \
                state is TxnState.PREPARE_ABORT and not commit:
            return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state in PREPARING:
            return refuse(_invalid_end(meta, commit))
        if commit:
            if state is TxnState.COMPLETE_COMMIT and retry:
                return out.answer(ticket, current)
            return refuse(_invalid_end(meta, commit))
        if state is TxnState.COMPLETE_ABORT and retry:
            return out.answer(ticket, current)
        if state is TxnState.COMPLETE_COMMIT and retry:
            return refuse(_invalid_end(meta, commit))
        if state not in (TxnState.EMPTY,) and state not in COMPLETE:
            return refuse(_invalid_end(meta, commit))
        # an abort with no transaction open: an empty one, ended at once
        return out.merge(self._begin_end(meta, False, now, ticket, tv2=True, new_pid=new_pid,
                                         empty=True))

    def _begin_end(self, meta: TxnMetadata, commit: bool, now: int, ticket=None, *,
                   epoch: int | None = None, answer: ErrorCode = ErrorCode.NONE,
                   tv2: bool = False, new_pid: int = NO_PRODUCER_ID,
                   empty: bool = False, reason: str | None = None) -> Outcome:
        """Write the Prepare state; once durable, answer and have the markers
        written.  Under transaction.version 2 the epoch is bumped here (a new
        producer id waits in ``next_producer_id`` if it overflows) and the
        answer is the producer id and epoch to go on with."""
        next_pid = NO_PRODUCER_ID
        if tv2:
            if meta.producer_epoch >= EXHAUSTED_EPOCH:
                if new_pid == NO_PRODUCER_ID:
                    code = (ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_EPOCH)
                    return Outcome().answer(ticket, code)
                next_pid = new_pid
            epoch = meta.producer_epoch if meta.producer_epoch >= 32767 \
                else meta.producer_epoch + 1
        target = replace(meta, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                         last_update_ms=now, pending=False,
                         producer_epoch=meta.producer_epoch if epoch is None else epoch,
                         last_producer_epoch=meta.last_producer_epoch if epoch is None
                         else meta.producer_epoch,
                         previous_producer_id=meta.producer_id, next_producer_id=next_pid,
                         client_transaction_version=2 if tv2 else 0)
        if empty:
            target.partitions = set()
            target.start_ms = now
        if tv2:
            answer = (ErrorCode.NONE, next_pid, 0) if next_pid != NO_PRODUCER_ID else \
                (ErrorCode.NONE, target.producer_id, target.producer_epoch)

        return self._transition(
            meta, target, functools.partial(self._prepared, ticket, target, commit, answer),
            reason or ("the producer commits" if commit else "the producer aborts"),
            routine=reason is None)

    def _prepared(self, ticket, target: TxnMetadata, commit: bool, answer, error: ErrorCode,
                  now: int) -> Outcome:
        """The Prepare state is durable: answer, and have the markers written."""
        out = Outcome()
        if error != ErrorCode.NONE:
            code = self._write_error(error)
            return out.answer(ticket, (code, NO_PRODUCER_ID, NO_EPOCH)
                              if isinstance(answer, tuple) else code)
        # Until the markers are written and the transaction complete, the id
        # stays pending: its other requests are told CONCURRENT_TRANSACTIONS.
        target.pending = True
        out.effects.append(self._job(target, commit))
        return out.answer(ticket, answer)

    def _begin_abort(self, meta: TxnMetadata, now: int, ticket=None, *,
                     reason: str = "a new instance of the producer fenced this one") -> Outcome:
        """Abort an open transaction on the coordinator's own account, with the
        epoch bumped so that the producer that began it is fenced; an
        InitProducerId that caused it (``ticket``) is told CONCURRENT_TRANSACTIONS
        once the abort is durable."""
        epoch = meta.producer_epoch if meta.producer_epoch >= 32767 else meta.producer_epoch + 1
        return self._begin_end(meta, False, now, ticket, epoch=epoch, answer=(
            ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_EPOCH), reason=reason)

    def markers_written(self, ticket, transactional_id: str, pid: int, epoch: int,
                        commit: bool, now: int) -> Outcome:
        """Every end marker is written: the transaction is complete."""
        out = Outcome()
        meta = self.ids.get(transactional_id)
        wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if self.refusal is not None or meta is None or meta.state is not wanted or \
                meta.producer_id != pid or meta.producer_epoch != epoch:
            return out.answer(ticket, ErrorCode.INVALID_TXN_STATE)
        target = replace(meta, state=TxnState.COMPLETE_COMMIT if commit
                         else TxnState.COMPLETE_ABORT, partitions=set(), last_update_ms=now,
                         pending=False, previous_producer_id=meta.producer_id,
                         next_producer_id=NO_PRODUCER_ID)
        if meta.next_producer_id != NO_PRODUCER_ID:  # an epoch overflowed at the end (TV2)
            target.producer_id, target.producer_epoch = meta.next_producer_id, 0

        return out.merge(self._transition(
            meta, target, functools.partial(self._completed, ticket, meta, commit),
            "every marker written", routine=True))

    def _completed(self, ticket, meta: TxnMetadata, commit: bool, error: ErrorCode,
                   now: int) -> Outcome:
        out = Outcome().answer(ticket, error)
        if error != ErrorCode.NONE:
            # Kafka's coordinator keeps at it: the markers again, then this write
            meta.pending = True
            out.effects.append(self._job(meta, commit))
        return out

    # -- expiry ------------------------------------------------------------------------

    def _expire(self, meta: TxnMetadata) -> Outcome:
        """An id idle for transactional.id.expiration.ms is forgotten: a tombstone."""
        meta.pending = True
        key = txn_records.encode_key(meta.transactional_id)

        return Outcome(writes=[Write([(key, None)], functools.partial(self._expired, meta))])

    def _expired(self, meta: TxnMetadata, error: ErrorCode, now: int) -> Outcome:
        meta.pending = False
        if error == ErrorCode.NONE and self.ids.get(meta.transactional_id) is meta:
            del self.ids[meta.transactional_id]
            log.info("transaction.expired", transactional_id=meta.transactional_id,
                     producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                     reason=f"idle for {self.config.id_expiration_ms} ms "
                            "(transactional.id.expiration.ms)")
        return Outcome()

    # -- reads -------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        if self.refusal is not None:
            return self.refusal, None
        meta = self.ids.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, meta

    def listing(self) -> list[TxnMetadata]:
        return [m for m in self.ids.values() if m.state is not TxnState.DEAD]
