"""The transaction coordinator's core (one ``__transaction_state`` shard) driven
with a manual clock: each state change is written before it takes effect,
ends ask for markers, timeouts abort with a fencing epoch, idle ids expire,
and replaying the records written gives the live state."""

from __future__ import annotations

import itertools
import logging

import pytest
import structlog
from structlog.testing import capture_logs

from kcoord.broker.runtime.outcome import Outcome
from kcoord.broker.runtime.timers import Deadlines, ManualClock, ShardTimers
from kcoord.broker.transactions.coordinator import (
    MarkerJob,
    TransactionShard,
    TxnConfig,
    replay,
)
from kcoord.broker.transactions.metadata import TxnState
from kcoord.protocol import txn_records
from kcoord.protocol.errors import ErrorCode as E

T0 = 1_700_000_000_000


class Harness:
    def __init__(self, **config):
        self.clock = ManualClock(T0)
        self.deadlines = Deadlines()
        self.config = TxnConfig(**config)
        self.shard = TransactionShard(self.config, now=T0, partition=3,
                                      timers=ShardTimers(self.deadlines, 3))
        self.answers: dict[int, list] = {}
        self.pending = []
        self.log: list[tuple[bytes, bytes | None]] = []
        self.jobs: list[MarkerJob] = []
        self._tickets = itertools.count()
        self._pids = itertools.count(1000)

    def _take(self, outcome: Outcome | None) -> None:
        if outcome is None:
            return
        for ticket, answer in outcome.answers:
            self.answers.setdefault(ticket, []).append(answer)
        self.pending.extend(outcome.writes)
        self.jobs.extend(outcome.effects)

    def call(self, op, *args, settle=True, **kwargs):
        ticket = next(self._tickets)
        self._take(op(self.shard, ticket, *args, self.clock.now, **kwargs))
        if settle:
            self.settle()
        got = self.answers.get(ticket)
        return None if got is None else got[-1]

    def settle(self, error=E.NONE) -> None:
        while self.pending:
            write = self.pending.pop(0)
            if error == E.NONE:
                self.log.extend(write.records)
            self._take(write.done(error, self.clock.now))

    def init(self, txn="t", timeout=60_000, pid=-1, epoch=-1):
        return self.call(TransactionShard.init_producer_id, txn, timeout, pid, epoch,
                         next(self._pids))

    def add(self, txn, pid, epoch, *partitions):
        return self.call(TransactionShard.add_partitions, txn, pid, epoch, list(partitions))

    def end(self, txn, pid, epoch, commit):
        return self.call(TransactionShard.end_txn, txn, pid, epoch, commit)

    def markers_done(self):
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            self.call(TransactionShard.markers_written, job.transactional_id, job.producer_id,
                      job.producer_epoch, job.commit)
        return jobs

    def fire_due(self) -> None:
        for (_partition, key), payload in self.deadlines.pop_due(self.clock.now):
            self._take(self.shard.fire(key, payload, self.clock.now))
        self.settle()

    def state(self, txn="t"):
        return self.shard.ids[txn]


def test_a_new_id_gets_a_producer_id_and_epoch_0_once_written():
    h = Harness()
    ticket_answer = h.call(TransactionShard.init_producer_id, "t", 60_000, -1, -1, 1000,
                           settle=False)
    assert ticket_answer is None  # not before its record is durable
    # pending meanwhile
    assert h.call(TransactionShard.add_partitions, "t", 1000, -1, [("a", 0)],
                  settle=False) == E.CONCURRENT_TRANSACTIONS
    h.settle()
    assert h.answers[0] == [(E.NONE, 1000, 0)]
    (key, value), = h.log
    assert txn_records.decode_key(key) == "t"
    assert txn_records.decode_value(value)["transaction_status"] == TxnState.EMPTY


def test_a_failed_first_write_forgets_the_id():
    h = Harness()
    h.call(TransactionShard.init_producer_id, "t", 60_000, -1, -1, 1000, settle=False)
    h.settle(E.NOT_LEADER_OR_FOLLOWER)
    assert h.answers[0] == [(E.NOT_COORDINATOR, -1, -1)]
    assert "t" not in h.shard.ids


def test_a_transaction_from_begin_to_commit():
    h = Harness()
    _e, pid, epoch = h.init()
    assert h.add("t", pid, epoch, ("a", 0), ("b", 1)) == E.NONE
    assert h.state().state is TxnState.ONGOING and h.state().start_ms == T0
    writes = len(h.log)
    assert h.add("t", pid, epoch, ("a", 0)) == E.NONE
    assert len(h.log) == writes  # nothing new: nothing written
    assert h.end("t", pid, epoch, True) == E.NONE
    assert h.state().state is TxnState.PREPARE_COMMIT
    # until the markers are written, the id is busy
    assert h.add("t", pid, epoch, ("a", 0)) == E.CONCURRENT_TRANSACTIONS
    assert h.init()[0] == E.CONCURRENT_TRANSACTIONS
    (job,) = h.markers_done()
    assert (job.producer_id, job.producer_epoch, job.commit, job.partitions) == (
        pid, epoch, True, (("a", 0), ("b", 1)))
    assert h.state().state is TxnState.COMPLETE_COMMIT and h.state().partitions == set()
    assert h.end("t", pid, epoch, True) == E.NONE  # a retry
    assert h.end("t", pid, epoch, False) == E.INVALID_TXN_STATE


def test_a_producer_s_own_steps_log_at_debug_its_start_and_timeout_at_info():
    """Begin, end and markers written log at DEBUG, as Kafka's coordinator logs
    them (three lines a transaction otherwise); a producer's start and a
    transaction aborted at its timeout at INFO."""
    h = Harness(abort_interval_ms=1_000)
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as events:
            _steps(h)
    finally:
        structlog.configure(**saved)
    states = [(e["log_level"], e["state"], e["reason"]) for e in events
              if e["event"] == "transaction.state"]
    assert states == [
        ("info", "Empty", "a new producer"),
        ("debug", "Ongoing", "a transaction began"),
        ("debug", "PrepareCommit", "the producer commits"),
        ("debug", "CompleteCommit", "every marker written"),
        ("debug", "Ongoing", "a transaction began"),
        ("info", "PrepareAbort", "timed out after 1500 ms"),
        ("debug", "CompleteAbort", "every marker written")]


def _steps(h) -> None:
    """A producer starts, commits one transaction, leaves the next past its timeout."""
    _e, pid, epoch = h.init(timeout=1_500)
    h.add("t", pid, epoch, ("a", 0))
    h.end("t", pid, epoch, True)
    h.markers_done()
    h.add("t", pid, epoch, ("a", 0))
    h.clock.advance(2_000)
    h.fire_due()
    h.markers_done()


def test_init_of_an_open_transaction_aborts_it_under_a_fencing_epoch():
    h = Harness()
    _e, pid, epoch = h.init()
    h.add("t", pid, epoch, ("a", 0))
    assert h.init() == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    (job,) = h.markers_done()
    assert (job.commit, job.producer_epoch) == (False, epoch + 1)
    assert h.init() == (E.NONE, pid, epoch + 2)
    assert h.end("t", pid, epoch, True) == E.PRODUCER_FENCED


def test_an_exhausted_epoch_takes_a_new_producer_id():
    h = Harness()
    _e, pid, _epoch = h.init()
    h.state().producer_epoch = 32766
    code, new_pid, epoch = h.init()
    assert (code, epoch) == (E.NONE, 0) and new_pid != pid
    assert h.state().previous_producer_id == pid


def test_kip_360_bumps_and_their_retries():
    h = Harness()
    _e, pid, epoch = h.init()
    assert h.init(pid=pid, epoch=epoch) == (E.NONE, pid, epoch + 1)
    assert h.init(pid=pid, epoch=epoch) == (E.NONE, pid, epoch + 1)  # the same bump again
    assert h.init(pid=pid + 7, epoch=epoch)[0] == E.PRODUCER_FENCED
    assert h.init(pid=pid, epoch=epoch + 5)[0] == E.PRODUCER_FENCED


def test_timeouts_bounds_and_unknown_ids():
    h = Harness(max_timeout_ms=1000)
    assert h.init(timeout=1001)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init(timeout=0)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert h.add("nobody", 1, 0, ("a", 0)) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end("nobody", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING


def test_a_transaction_past_its_timeout_is_aborted_at_the_next_sweep_and_fenced():
    h = Harness(abort_interval_ms=1_000)
    _e, pid, epoch = h.init(timeout=2_500)
    h.add("t", pid, epoch, ("a", 0))  # begins at T0
    h.clock.advance(2_000)
    h.fire_due()  # sweeps at +1 s and +2 s: not yet past its timeout
    assert h.state().state is TxnState.ONGOING and h.jobs == []
    h.clock.advance(500)
    h.fire_due()  # no sweep due at +2.5 s
    assert h.state().state is TxnState.ONGOING
    h.clock.advance(500)
    h.fire_due()  # the sweep at +3 s finds it past its timeout
    assert h.state().state is TxnState.PREPARE_ABORT
    (job,) = h.markers_done()
    assert (job.commit, job.producer_epoch) == (False, epoch + 1)
    assert h.state().state is TxnState.COMPLETE_ABORT
    assert h.add("t", pid, epoch, ("a", 0)) == E.PRODUCER_FENCED
    assert h.end("t", pid, epoch, False) == E.PRODUCER_FENCED


def test_an_idle_id_expires_at_the_sweep_after_its_expiry_with_a_tombstone():
    h = Harness(id_expiration_ms=60_000, expire_interval_ms=50_000)
    h.init()
    h.clock.advance(50_000)
    h.fire_due()
    assert "t" in h.shard.ids
    h.clock.advance(50_000)
    h.fire_due()
    assert "t" not in h.shard.ids
    assert h.log[-1] == (txn_records.encode_key("t"), None)
    assert h.init()[1:] == (1001, 0)  # a new producer id from scratch


def test_an_open_or_busy_id_does_not_expire():
    h = Harness(id_expiration_ms=1_000, expire_interval_ms=5_000, abort_interval_ms=10**9)
    _e, pid, epoch = h.init("open")
    h.add("open", pid, epoch, ("a", 0))
    h.clock.advance(5_000)
    h.fire_due()
    assert h.state("open").state is TxnState.ONGOING


def test_verify_says_which_partitions_the_transaction_has():
    h = Harness()
    _e, pid, epoch = h.init()
    h.add("t", pid, epoch, ("a", 0))
    assert h.shard.verify("t", pid, epoch, [("a", 0), ("a", 1)]) == {
        ("a", 0): E.NONE, ("a", 1): E.TRANSACTION_ABORTABLE}
    assert h.shard.verify("t", pid, epoch + 1, [("a", 0)]) == {("a", 0): E.PRODUCER_FENCED}
    assert h.shard.verify("t", pid + 1, epoch, [("a", 0)]) == {
        ("a", 0): E.INVALID_PRODUCER_ID_MAPPING}


@pytest.mark.parametrize("stop_at", ["empty", "ongoing", "prepare", "complete"])
def test_replaying_the_records_gives_the_live_state(stop_at):
    h = Harness()
    _e, pid, epoch = h.init()
    if stop_at != "empty":
        h.add("t", pid, epoch, ("a", 0), ("b", 2))
    if stop_at in ("prepare", "complete"):
        h.end("t", pid, epoch, True)
    if stop_at == "complete":
        h.markers_done()
    live = h.state()
    loaded = replay(h.log)
    again = loaded.ids["t"]
    for field in ("producer_id", "producer_epoch", "timeout_ms", "state", "partitions",
                  "start_ms", "last_update_ms"):
        assert getattr(again, field) == getattr(live, field), field
    # a partition loaded in a Prepare state writes its markers again, then completes
    fresh = Harness()
    outcome = fresh.shard.install(loaded, T0)
    if stop_at == "prepare":
        (job,) = outcome.effects
        assert job.commit and job.partitions == (("a", 0), ("b", 2))
    else:
        assert outcome.effects == []


def _end_v2(h, txn, pid, epoch, commit, new_pid=-1):
    return h.call(TransactionShard.end_txn, txn, pid, epoch, commit, tv2=True, new_pid=new_pid)


def test_transaction_version_2_bumps_the_epoch_at_every_end_and_knows_its_retries():
    h = Harness()
    _e, pid, epoch = h.init()
    h.call(TransactionShard.add_partitions, "t", pid, epoch, [("a", 0)], client_tv=2)
    assert h.state().client_transaction_version == 2
    assert _end_v2(h, "t", pid, epoch, True) == (E.NONE, pid, epoch + 1)
    (job,) = h.markers_done()
    assert (job.producer_epoch, job.commit) == (epoch + 1, True)  # markers carry the bump
    assert h.state().state is TxnState.COMPLETE_COMMIT
    # a retry with the old epoch gets the same answer; an abort of it does not
    assert _end_v2(h, "t", pid, epoch, True) == (E.NONE, pid, epoch + 1)
    assert _end_v2(h, "t", pid, epoch, False) == (E.INVALID_TXN_STATE, -1, -1)
    assert _end_v2(h, "t", pid, epoch - 1, True) == (E.PRODUCER_FENCED, -1, -1)
    assert _end_v2(h, "t", pid + 1, epoch + 1, True)[0] == E.INVALID_PRODUCER_ID_MAPPING
    # committing again with the new epoch: nothing is open
    assert _end_v2(h, "t", pid, epoch + 1, True) == (E.INVALID_TXN_STATE, -1, -1)


def test_transaction_version_2_aborts_with_nothing_open_as_an_empty_transaction():
    h = Harness()
    _e, pid, epoch = h.init()
    assert _end_v2(h, "t", pid, epoch, False) == (E.NONE, pid, epoch + 1)
    (job,) = h.markers_done()
    assert job.partitions == ()  # no marker to write
    assert h.state().state is TxnState.COMPLETE_ABORT
    assert _end_v2(h, "t", pid, epoch, False) == (E.NONE, pid, epoch + 1)  # a retry
    assert _end_v2(h, "t", pid, epoch + 1, True) == (E.INVALID_TXN_STATE, -1, -1)


def test_transaction_version_2_takes_a_new_producer_id_when_the_epoch_overflows():
    h = Harness()
    _e, pid, _epoch = h.init()
    h.state().producer_epoch = 32766
    h.call(TransactionShard.add_partitions, "t", pid, 32766, [("a", 0)], client_tv=2)
    assert _end_v2(h, "t", pid, 32766, True, new_pid=4242) == (E.NONE, 4242, 0)
    (job,) = h.markers_done()
    assert (job.producer_id, job.producer_epoch) == (pid, 32767)  # the old id's last epoch
    assert (h.state().producer_id, h.state().producer_epoch) == (4242, 0)
    # the retry of the end, from the old id at its overflowed epoch
    assert _end_v2(h, "t", pid, 32766, True) == (E.NONE, 4242, 0)


def test_a_partition_not_served_refuses_every_request_with_its_reason():
    shard = TransactionShard(TxnConfig(), now=T0, partition=-1, timers=None,
                             refusal=E.COORDINATOR_LOAD_IN_PROGRESS)
    out = shard.init_producer_id("t1", "t", 60_000, -1, -1, 7, T0)
    assert out.answers == [("t1", (E.COORDINATOR_LOAD_IN_PROGRESS, -1, -1))] and not out.writes
    assert shard.add_partitions("t2", "t", 1, 0, [("a", 0)], T0).answers == [
        ("t2", E.COORDINATOR_LOAD_IN_PROGRESS)]
    assert shard.end_txn("t3", "t", 1, 0, True, T0).answers == [
        ("t3", E.COORDINATOR_LOAD_IN_PROGRESS)]
    assert shard.end_txn("t4", "t", 1, 0, True, T0, tv2=True).answers == [
        ("t4", (E.COORDINATOR_LOAD_IN_PROGRESS, -1, -1))]
    assert shard.verify("t", 1, 0, [("a", 0)]) == {("a", 0): E.COORDINATOR_LOAD_IN_PROGRESS}
    assert shard.describe("t") == (E.COORDINATOR_LOAD_IN_PROGRESS, None)


def test_end_txn_answers_each_state_as_kafka():
    h = Harness()
    _e, pid, epoch = h.init()
    h.add("t", pid, epoch, ("a", 0))
    # while the PrepareCommit record is being written
    h.call(TransactionShard.end_txn, "t", pid, epoch, True, settle=False)
    assert h.call(TransactionShard.end_txn, "t", pid, epoch, False,
                  settle=False) == E.CONCURRENT_TRANSACTIONS
    h.settle()
    # a Prepare state whose markers are not being written (their write failed)
    h.jobs.clear()
    h.state().pending = False
    assert h.end("t", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert h.end("t", pid, epoch, False) == E.INVALID_TXN_STATE
    h.call(TransactionShard.markers_written, "t", pid, epoch, True)
    h.add("t", pid, epoch, ("a", 0))
    h.end("t", pid, epoch, False)
    h.state().pending = False
    assert h.end("t", pid, epoch, False) == E.CONCURRENT_TRANSACTIONS
    assert h.end("t", pid, epoch, True) == E.INVALID_TXN_STATE
    h.call(TransactionShard.markers_written, "t", pid, epoch, False)
    assert h.state().state is TxnState.COMPLETE_ABORT
    assert h.end("t", pid, epoch, False) == E.NONE  # a retry
    with capture_logs() as events:
        assert h.end("t", pid, epoch, True) == E.INVALID_TXN_STATE
    # warned, as Kafka's coordinator warns of an end the state cannot take
    assert [(e["log_level"], e["event"], e["state"], e["requested"]) for e in events] == [
        ("warning", "transaction.invalid_end", "CompleteAbort", "COMMIT")]
    # markers reported for another end are refused
    assert h.call(TransactionShard.markers_written, "t", pid, epoch, True) == \
        E.INVALID_TXN_STATE


def test_the_sweeps_use_kafkas_bounds():
    h = Harness(abort_interval_ms=1_000, id_expiration_ms=2_000, expire_interval_ms=1_000)
    _e, pid, epoch = h.init("open", timeout=1_000)
    h.add("open", pid, epoch, ("a", 0))  # begins at T0: times out once start + 1 s < now
    h.init("idle")                       # last updated at T0: expires once <= now - 2 s
    h.clock.advance(1_000)
    h.fire_due()
    assert h.state("open").state is TxnState.ONGOING  # start + timeout == now: not yet
    h.clock.advance(1_000)
    h.fire_due()
    assert h.state("open").state is TxnState.PREPARE_ABORT
    assert "idle" not in h.shard.ids  # exactly at its expiry


def test_replay_keeps_the_last_record_of_each_id_and_drops_tombstones():
    h = Harness()
    _e, pid, epoch = h.init("kept")
    h.init("gone")
    h.add("kept", pid, epoch, ("a", 0))
    records = list(h.log) + [(txn_records.encode_key("gone"), None),
                             (b"\x00\x07unknown", b"x")]  # another record type: skipped
    loaded = replay(records)
    assert set(loaded.ids) == {"kept"}
    assert loaded.ids["kept"].state is TxnState.ONGOING
    assert loaded.ids["kept"].transactional_id == "kept"
    assert loaded.counts() == {"transactional_ids": 1, "records": len(records)}
    # an id written again after its tombstone is back
    again = replay(records + [(txn_records.encode_key("gone"), h.log[1][1])])
    assert set(again.ids) == {"kept", "gone"}
