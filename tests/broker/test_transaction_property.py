"""Transactions against a model (issue #23): random sequences of begin, produce,
AddOffsetsToTxn + TxnOffsetCommit, commit, abort, a new producer instance,
a fenced (zombie) producer, clock advances past a short transaction timeout,
and crashes (SIGKILL, then ``kcoord serve`` again on the same data dir).

After every step the broker is read as clients read it and compared with the
model:

- a read_committed reader (Fetch with isolation_level 1 from offset 0, the
  aborted records dropped with the response's ``aborted_transactions`` as
  Kafka's consumer drops them) reads exactly the committed records, with their
  offsets, in order, up to the last stable offset, which is the first offset
  of the earliest open transaction of the partition (the high watermark when
  none is open); a read_uncommitted reader reads every acknowledged record;
- OffsetFetch answers the offsets of committed transactions only, and
  UNSTABLE_OFFSET_COMMIT (require_stable) while a transaction holding offsets
  for the partition is open;
- DescribeTransactions answers each id's state, producer id and epoch, and the
  partitions of its open transaction; every answer to the producer is the
  model's (a fenced producer: PRODUCER_FENCED at EndTxn and AddOffsetsToTxn,
  INVALID_PRODUCER_EPOCH at Produce).

Replay equals live: what was seen before a crash is seen again after it,
exactly (records, offsets, last stable offsets, high watermarks, aborted
transactions, group offsets, coordinator states), unless a transaction was
being resolved at the crash: an EndTxn answered just before the kill completes
after the start (its markers are written by the coordinator that loads the
PrepareCommit / PrepareAbort), an open transaction stays open (its producer
goes on with it: the next sequence numbers are accepted) until it ends it or
its timeout aborts it; then the view must be the model's.

At the end every transaction is ended, one more commits to every partition,
the broker is stopped cleanly and started again (the same is read), and
librdkafka's read_committed consumer reads exactly the committed records.

A "clock advance" waits (bounded) past the short transaction timeout given to
some producer instances, with the coordinator's timeout sweep set to 100 ms:
the open transaction is aborted with the epoch bumped, its producer fenced,
and it must initialize again.  Every step is guarded so that no short
transaction can time out in the middle of a step.

Seeded: the seed is printed on failure, ``KCOORD_TXN_SEED`` replays it.
``KCOORD_TXN_SHARED_OFFSETS=1`` lets every producer commit offsets for every
group partition (Kafka's rule when two transactions commit the same one: the
offset whose record is later in ``__consumer_offsets`` stays, whatever order
the transactions commit in; the first test after the property checks it).
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field

import pytest

from kcoord.broker.groups.placement import coordinator_partition
from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import CONTROL_ABORT, batch_header, decode_batch, iter_entries
from kcoord.protocol.records.build import decode_control_record
from tests.broker import txn_ops as T
from tests.broker.wire_ops import create_topic
from tests.support import BrokerProcess

E = ErrorCode

SEQUENCES = 4
STEPS = 40
MAX_CRASHES = 3
TOPICS = ("txp-a", "txp-b")
TPS = tuple((t, p) for t in TOPICS for p in range(2))
TXN_IDS = ("txp-0", "txp-1", "txp-2")
GROUPS = ("txp-g0", "txp-g1")
OFFSETS_TOPIC = "__consumer_offsets"
SWEEP_MS = 100  # transaction.abort.timed.out.transaction.cleanup.interval.ms
SHORT_MS = 1_000  # the short transaction timeout
LONG_MS = 60_000  # never reached in a sequence
GUARD_S = 0.5  # no step starts this close to a short transaction's timeout
SETTLE_S = 8.0  # a timed-out transaction is aborted within this (after a start too)
SHARED_OFFSETS = os.environ.get("KCOORD_TXN_SHARED_OFFSETS") == "1"
SLOTS = [(g, tp) for g in GROUPS for tp in TPS]
OWNER = {slot: TXN_IDS[i % len(TXN_IDS)] for i, slot in enumerate(SLOTS)}
BROKER_ARGS = ("--override",
               f"transaction.abort.timed.out.transaction.cleanup.interval.ms={SWEEP_MS}")


# == the model ==========================================================================

@dataclass(eq=False)
class Instance:
    """One producer instance: an id and epoch from InitProducerId."""
    tid: str
    pid: int
    epoch: int
    timeout_ms: int
    seqs: dict = field(default_factory=dict)  # (topic, partition) -> next sequence
    fenced: bool = False  # a newer epoch exists: the coordinator or a new instance fenced it


@dataclass(eq=False)
class Txn:
    """An open (then ended) transaction of one instance."""
    inst: Instance
    t_lo: float  # monotonic, before the request that began it was sent
    t_hi: float  # and once it was answered
    partitions: set = field(default_factory=set)  # incl. the groups' __consumer_offsets ones
    groups: set = field(default_factory=set)
    first: dict = field(default_factory=dict)  # tp -> its first record's offset
    pending: dict = field(default_factory=dict)  # (group, tp) -> (offset, write order)
    status: str = "open"  # open, committed, aborted

    @property
    def short(self) -> bool:
        return self.inst.timeout_ms == SHORT_MS


class Model:
    def __init__(self):
        self.records: dict = {tp: [] for tp in TPS}  # [(offset, value, txn)]
        self.offsets: dict = {}  # (group, tp) -> (offset, write order)
        self.order = 0  # acknowledged TxnOffsetCommits, in __consumer_offsets order
        # the coordinator's view of each id: [state, pid, epoch, timeout]
        self.coord: dict = {}
        self.open: dict = {}  # tid -> Txn

    def end(self, txn: Txn, commit: bool) -> None:
        assert txn.status == "open"
        txn.status = "committed" if commit else "aborted"
        if commit:
            for slot, (offset, order) in txn.pending.items():
                held = self.offsets.get(slot)
                # Kafka (OffsetMetadataManager.replayEndTransactionMarker): the
                # offset whose record is the later one in __consumer_offsets stays
                if held is None or order > held[1]:
                    self.offsets[slot] = (offset, order)
        del self.open[txn.inst.tid]
        self.coord[txn.inst.tid][0] = "CompleteCommit" if commit else "CompleteAbort"

    def lso_bound(self, tp) -> int | None:
        firsts = [t.first[tp] for t in self.open.values() if tp in t.first]
        return min(firsts) if firsts else None

    def expected_committed(self, tp) -> list:
        bound = self.lso_bound(tp)
        return [(o, v) for o, v, t in self.records[tp]
                if t.status == "committed" and (bound is None or o < bound)]

    def expected_all(self, tp) -> list:
        return [(o, v) for o, v, _t in self.records[tp]]

    def aborted(self, tp) -> set:
        found = {}
        for o, _v, t in self.records[tp]:
            if t.status == "aborted":
                found.setdefault(id(t), (t.inst.pid, o))
        return set(found.values())

    def expected_offsets(self, stable: bool) -> dict:
        unstable = {slot for t in self.open.values() for slot in t.pending}
        answer = {}
        for slot in SLOTS:
            if stable and slot in unstable:
                answer[slot] = (E.UNSTABLE_OFFSET_COMMIT, -1)
            else:
                answer[slot] = (E.NONE, self.offsets.get(slot, (-1, 0))[0])
        return answer

    def expected_txns(self) -> dict:
        answer = {}
        for tid in TXN_IDS:
            if tid not in self.coord:
                answer[tid] = (E.TRANSACTIONAL_ID_NOT_FOUND,)
                continue
            state, pid, epoch, timeout = self.coord[tid]
            txn = self.open.get(tid)
            parts = sorted(txn.partitions) if txn is not None else []
            answer[tid] = (E.NONE, state, pid, epoch, timeout, parts)
        return answer


# == reading the broker as clients do ===================================================

def read_partition(wire, tp, committed: bool):
    """Every record a consumer gets from offset 0 (read_committed: up to the last
    stable offset, the aborted ones dropped as Kafka's consumer drops them:
    CompletedFetch.nextFetchedRecord); with the last stable offset, the high
    watermark and the aborted transactions listed."""
    topic, partition = tp
    offset, out, aborted_listed = 0, [], set()
    aborted: list = []  # (first offset, pid), not yet reached
    aborting: set = set()
    while True:
        part = T.fetch(wire, topic, partition, committed=committed, offset=offset)
        assert part["error_code"] == E.NONE, part
        lso, hw = part["last_stable_offset"], part["high_watermark"]
        end = lso if committed else hw
        if committed:
            for a in part["aborted_transactions"] or []:
                key = (a["producer_id"], a["first_offset"])
                if key not in aborted_listed:
                    aborted_listed.add(key)
                    aborted.append((a["first_offset"], a["producer_id"]))
            aborted.sort()
        data = part["records"] or b""
        moved = False
        for pos, _size, _magic in iter_entries(data, partial_ok=True):
            header = batch_header(data, pos)
            if header.base_offset + header.last_offset_delta < offset:
                continue
            moved = True
            offset = header.base_offset + header.last_offset_delta + 1
            batch = decode_batch(data, pos)
            if committed and header.producer_id >= 0:
                while aborted and aborted[0][0] <= batch.last_offset:
                    aborting.add(aborted.pop(0)[1])
                if header.is_control:
                    kinds = [decode_control_record(r)[0] for r in batch.records]
                    if CONTROL_ABORT in kinds:
                        aborting.discard(header.producer_id)
                elif header.is_transactional and header.producer_id in aborting:
                    continue
            if header.is_control:
                continue
            out += [(r.offset, r.value) for r in batch.records]
        if offset >= end or not moved:
            assert offset >= end, (tp, offset, end, part)
            return out, lso, hw, aborted_listed


def _retry_loading(call, *, within_s: float = 15):
    deadline = time.monotonic() + within_s
    while True:
        answer, code = call()
        if code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                        E.NOT_COORDINATOR) or time.monotonic() > deadline:
            return answer
        time.sleep(0.02)


def fetch_offsets(wire, stable: bool) -> dict:
    def call():
        answer = wire.call(9, 8, {"require_stable": stable, "groups": [
            {"group_id": g, "topics": [{"name": t, "partition_indexes": [0, 1]}
                                       for t in TOPICS]} for g in GROUPS]})
        codes = [g["error_code"] for g in answer["groups"]]
        return answer, next((c for c in codes if c), E.NONE)

    answer = _retry_loading(call)
    got = {}
    for g in answer["groups"]:
        assert g["error_code"] == E.NONE, g
        for t in g["topics"]:
            for p in t["partitions"]:
                got[(g["group_id"], (t["name"], p["partition_index"]))] = (
                    p["error_code"], p["committed_offset"])
    return got


def describe_txns(wire) -> dict:
    def call():
        states = wire.call(65, 0, {"transactional_ids": list(TXN_IDS)})["transaction_states"]
        return states, next((s["error_code"] for s in states if s["error_code"] in (
            E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR)), E.NONE)

    got = {}
    for s in _retry_loading(call):
        if s["error_code"] != E.NONE:
            got[s["transactional_id"]] = (s["error_code"],)
            continue
        parts = sorted((t["topic"], p) for t in s["topics"] for p in t["partitions"])
        got[s["transactional_id"]] = (E.NONE, s["transaction_state"], s["producer_id"],
                                      s["producer_epoch"], s["transaction_timeout_ms"], parts)
    return got


def observe(wire) -> dict:
    seen = {"partitions": {}, "offsets": fetch_offsets(wire, stable=False),
            "stable": fetch_offsets(wire, stable=True), "txns": describe_txns(wire)}
    for tp in TPS:
        records, lso, hw, aborted = read_partition(wire, tp, committed=True)
        everything, _lso, hw_again, _a = read_partition(wire, tp, committed=False)
        seen["partitions"][tp] = {"committed": records, "lso": lso, "hw": hw,
                                  "aborted": aborted, "all": everything, "hw2": hw_again}
    return seen


# == one sequence =======================================================================

class Sequence:
    def __init__(self, seed: int, data_dir):
        self.seed = seed
        self.rng = random.Random(seed)
        self.data_dir = data_dir
        self.model = Model()
        self.instances: dict = {}  # tid -> the current Instance (maybe fenced)
        self.zombies: list = []  # instances a newer one fenced
        self.node: BrokerProcess | None = None
        self.wire: WireClient | None = None
        self.trace: list = []
        self.crashes = 0
        self.step_no = 0
        self.tallies: dict = {}

    # -- the broker --------------------------------------------------------------------

    def start(self) -> None:
        self.node = BrokerProcess(self.data_dir, *BROKER_ARGS).start()
        self.wire = WireClient.to(self.node.bootstrap, client_id="txn-property")

    def close(self) -> None:
        if self.wire is not None:
            self.wire.close()
        if self.node is not None:
            self.node.kill()

    def log(self, text: str) -> None:
        self.trace.append(f"{self.step_no:>3} {text}")

    def tally(self, name: str) -> None:
        self.tallies[name] = self.tallies.get(name, 0) + 1

    # -- checks ------------------------------------------------------------------------

    def check(self, seen: dict | None = None) -> dict:
        seen = seen or observe(self.wire)
        m = self.model
        for tp in TPS:
            part = seen["partitions"][tp]
            assert part["all"] == m.expected_all(tp), (tp, "read_uncommitted", part["all"])
            assert part["committed"] == m.expected_committed(tp), (
                tp, "read_committed", part["committed"], m.expected_committed(tp))
            bound = m.lso_bound(tp)
            assert part["lso"] == (part["hw"] if bound is None else bound), (tp, "lso", part)
            assert part["hw"] == part["hw2"], (tp, part)
            last = m.records[tp][-1][0] if m.records[tp] else -1
            assert part["hw"] > last, (tp, "high watermark", part["hw"], last)
            # the aborted transactions listed are the model's that begin below the
            # last stable offset (a read_committed read ends there), no more:
            # none for an abort marker of a transaction that wrote nothing here
            expected = {a for a in m.aborted(tp) if a[1] < part["lso"]}
            assert part["aborted"] == expected, (tp, "aborted", part["aborted"], expected)
        exp = {(g, tp): v for (g, tp), v in m.expected_offsets(stable=False).items()}
        assert seen["offsets"] == exp, ("offsets", seen["offsets"], exp)
        exp = {(g, tp): v for (g, tp), v in m.expected_offsets(stable=True).items()}
        assert seen["stable"] == exp, ("offsets, require_stable", seen["stable"], exp)
        assert seen["txns"] == m.expected_txns(), ("transactions", seen["txns"],
                                                   m.expected_txns())
        return seen

    # -- the clock: short transactions past their timeout ------------------------------

    def settle(self, margin_s: float = GUARD_S) -> bool:
        """Every short transaction within ``margin_s`` of its timeout (or past it):
        wait for the coordinator's sweep to abort it, check it did not before
        the timeout, and move the model.  True if one was."""
        moved = False
        for tid, txn in list(self.model.open.items()):
            if not txn.short or time.monotonic() < txn.t_lo + SHORT_MS / 1000 - margin_s:
                continue
            inst = txn.inst
            deadline = max(txn.t_hi + SHORT_MS / 1000, time.monotonic()) + SETTLE_S
            while True:
                state = describe_txns(self.wire)[tid]
                answered = time.monotonic()
                if state[:2] != (E.NONE, "Ongoing"):
                    break
                assert answered < deadline, (
                    f"{tid}: open {answered - txn.t_lo:.1f} s, past its {SHORT_MS} ms "
                    "timeout, and not aborted")
                time.sleep(0.02)
            # aborted by the sweep: not before its timeout (it was, by the time of
            # the answer), with the epoch bumped
            assert answered >= txn.t_lo + SHORT_MS / 1000 - 0.05, (
                tid, "aborted before its timeout", answered - txn.t_lo)
            while state[:2] == (E.NONE, "PrepareAbort") and time.monotonic() < deadline:
                time.sleep(0.02)
                state = describe_txns(self.wire)[tid]
            assert state == (E.NONE, "CompleteAbort", inst.pid, inst.epoch + 1, SHORT_MS, []), (
                tid, "after its timeout", state)
            self.model.end(txn, commit=False)
            self.model.coord[tid][2] = inst.epoch + 1
            inst.fenced = True
            self.log(f"{tid} timed out: aborted, epoch {inst.epoch} fenced")
            self.tally("timed out")
            moved = True
        return moved

    # -- a producer instance -----------------------------------------------------------

    def init(self, tid: str) -> Instance:
        timeout = SHORT_MS if self.rng.random() < 0.4 else LONG_MS
        old = self.instances.get(tid)
        txn = self.model.open.get(tid)
        answer = T.init_producer(self.wire, tid, timeout)
        assert answer["error_code"] == E.NONE, (tid, answer)
        coord = self.model.coord.get(tid)
        if coord is not None:
            # the open transaction is aborted under a bumped epoch, then the bump
            expected = coord[2] + (2 if txn is not None else 1)
            assert (answer["producer_id"], answer["producer_epoch"]) == (coord[1], expected), (
                tid, answer, coord)
        if txn is not None:
            self.model.end(txn, commit=False)
            self.tally("fenced by a new instance")
        if old is not None:
            old.fenced = True
            self.zombies.append(old)
        inst = Instance(tid, answer["producer_id"], answer["producer_epoch"], timeout)
        self.instances[tid] = inst
        self.model.coord[tid] = ["Empty", inst.pid, inst.epoch, timeout]
        self.log(f"{tid} init: pid {inst.pid} epoch {inst.epoch} timeout {timeout}"
                 + (" (aborting its open transaction)" if txn is not None else ""))
        return inst

    def live(self, tid: str) -> Instance:
        """The id's instance, a new one if it has none; a fenced one is told so
        at whatever the step does, then initializes again."""
        inst = self.instances.get(tid)
        if inst is None:
            return self.init(tid)
        if inst.fenced:
            self.zombie_calls(inst)
            return self.init(tid)
        return inst

    def zombie_calls(self, inst: Instance) -> None:
        tp = self.rng.choice(TPS)
        seq = inst.seqs.get(tp, 0)
        got = T.produce(self.wire, inst.tid, *tp, T.txn_batch(inst.pid, inst.epoch, seq,
                                                              [b"zombie"]))
        assert got["error_code"] == E.INVALID_PRODUCER_EPOCH, (inst, tp, got)
        assert T.end_txn(self.wire, inst.tid, inst.pid, inst.epoch,
                         self.rng.random() < 0.5) == E.PRODUCER_FENCED, inst
        answer = self.wire.call(25, 3, {"transactional_id": inst.tid, "producer_id": inst.pid,
                                        "producer_epoch": inst.epoch,
                                        "group_id": self.rng.choice(GROUPS)})
        assert answer["error_code"] == E.PRODUCER_FENCED, (inst, answer)
        self.log(f"{inst.tid} epoch {inst.epoch} fenced: 47 at Produce, 90 at EndTxn and "
                 "AddOffsetsToTxn")
        self.tally("fenced answers")

    def begin(self, inst: Instance, added) -> Txn:
        """The request that adds ``added`` (AddPartitionsToTxn or AddOffsetsToTxn)
        to the instance's transaction, beginning it if none is open."""
        txn = self.model.open.get(inst.tid)
        t_lo = time.monotonic()
        code = added()
        assert code == E.NONE, (inst, code)
        if txn is None:
            txn = Txn(inst, t_lo, time.monotonic())
            self.model.open[inst.tid] = txn
            self.model.coord[inst.tid][0] = "Ongoing"
        return txn

    # -- the steps ---------------------------------------------------------------------

    def step_produce(self, tid: str, tp=None) -> None:
        inst = self.live(tid)
        tp = tp or self.rng.choice(TPS)
        txn = self.model.open.get(tid)
        if txn is None or tp not in txn.partitions:
            txn = self.begin(inst, lambda: T.add_partitions(
                self.wire, tid, inst.pid, inst.epoch, [tp])[tp])
            txn.partitions.add(tp)
        values = [f"{self.seed}-{self.step_no}-{tid}-{i}".encode()
                  for i in range(self.rng.randint(1, 3))]
        seq = inst.seqs.get(tp, 0)
        got = T.produce(self.wire, tid, *tp, T.txn_batch(inst.pid, inst.epoch, seq, values))
        assert got["error_code"] == E.NONE, (tid, tp, got)
        inst.seqs[tp] = seq + len(values)
        base = got["base_offset"]
        txn.first.setdefault(tp, base)
        self.model.records[tp] += [(base + i, v, txn) for i, v in enumerate(values)]
        self.log(f"{tid} produce {tp} {len(values)} at {base} (seq {seq})")
        self.tally("produce")

    def step_offsets(self, tid: str) -> None:
        inst = self.live(tid)
        # shared: few, so that transactions meet on them
        slots = SLOTS[:2] if SHARED_OFFSETS else [s for s in SLOTS if OWNER[s] == tid]
        group, tp = self.rng.choice(slots)
        txn = self.model.open.get(tid)
        if txn is None or group not in txn.groups:
            txn = self.begin(inst, lambda: self.wire.call(25, 3, {
                "transactional_id": tid, "producer_id": inst.pid,
                "producer_epoch": inst.epoch, "group_id": group})["error_code"])
            txn.groups.add(group)
            txn.partitions.add((OFFSETS_TOPIC, coordinator_partition(group, 50)))
        offset = self.rng.randint(0, 10_000)
        answer = self.wire.call(28, 3, {
            "transactional_id": tid, "group_id": group, "producer_id": inst.pid,
            "producer_epoch": inst.epoch, "topics": [{"name": tp[0], "partitions": [
                {"partition_index": tp[1], "committed_offset": offset,
                 "committed_metadata": ""}]}]})
        assert answer["topics"][0]["partitions"][0]["error_code"] == E.NONE, (tid, answer)
        self.model.order += 1
        txn.pending[(group, tp)] = (offset, self.model.order)
        self.log(f"{tid} offsets {group} {tp} = {offset}")
        self.tally("offsets")

    def step_end(self, tid: str, commit: bool) -> None:
        inst = self.live(tid)
        txn = self.model.open.get(tid)
        if txn is None:
            # no transaction: the coordinator answers by the state it is in
            state = self.model.coord[tid][0]
            expected = E.NONE if (state, commit) in (("CompleteCommit", True),
                                                     ("CompleteAbort", False)) \
                else E.INVALID_TXN_STATE
            code = T.end_txn(self.wire, tid, inst.pid, inst.epoch, commit)
            assert code == expected, (tid, state, commit, code)
            self.log(f"{tid} {'commit' if commit else 'abort'} with none open ({state}): {code}")
            self.tally("end with none open")
            return
        code = T.end_txn_settled(self.wire, tid, inst.pid, inst.epoch, commit)
        assert code == E.NONE, (tid, commit, code)
        self.model.end(txn, commit)
        self.log(f"{tid} {'commit' if commit else 'abort'}")
        self.tally("commit" if commit else "abort")

    def step_reinit(self, tid: str) -> None:
        if self.instances.get(tid) is not None and self.instances[tid].fenced:
            self.zombie_calls(self.instances[tid])
        self.init(tid)
        self.tally("new instance")

    def step_zombie(self) -> None:
        if not self.zombies:
            return
        self.zombie_calls(self.rng.choice(self.zombies))

    def step_clock(self) -> None:
        """Time passes: up to a little past the short timeout."""
        shorts = [t for t in self.model.open.values() if t.short]
        if shorts:  # no further than it takes to pass the one closest to its timeout
            wait = self.rng.uniform(0, 1.3 * SHORT_MS / 1000)
            nearest = min(t.t_lo for t in shorts) + SHORT_MS / 1000 + 0.2 - time.monotonic()
            wait = min(wait, max(nearest, 0))
        else:
            wait = self.rng.uniform(0, 0.2)
        self.log(f"clock +{wait:.2f} s")
        time.sleep(wait)
        self.settle()
        self.tally("clock")

    def step_crash(self) -> None:
        before = self.check()
        resolving = None
        if self.model.open and self.rng.random() < 0.5:
            # EndTxn answered (its Prepare state durable), the broker killed at once:
            # the markers are the coordinator's to finish when it loads again
            tid = self.rng.choice(sorted(self.model.open))
            inst, commit = self.instances[tid], self.rng.random() < 0.5
            assert T.end_txn(self.wire, tid, inst.pid, inst.epoch, commit) == E.NONE
            resolving = (tid, commit)
        self.wire.close()
        self.node.kill()
        self.log("crash" + (f" right after {resolving[0]} "
                            f"{'commit' if resolving[1] else 'abort'} was answered"
                            if resolving else ""))
        self.crashes += 1
        self.tally("crash")
        self.start()
        if resolving:
            tid, commit = resolving
            self.model.end(self.model.open[tid], commit)
            want = "CompleteCommit" if commit else "CompleteAbort"
            deadline = time.monotonic() + SETTLE_S
            while describe_txns(self.wire)[tid][1:2] != (want,):
                assert time.monotonic() < deadline, (tid, describe_txns(self.wire)[tid])
                time.sleep(0.02)
            # a retried EndTxn of the producer: the same answer, it is complete
            inst = self.instances[tid]
            assert T.end_txn(self.wire, tid, inst.pid, inst.epoch, commit) == E.NONE
            self.tally("crash after EndTxn")
        timed_out = self.settle()
        after = self.check()
        if not resolving and not timed_out:
            # nothing was pending at the crash: replay shows exactly what live did
            assert after == before, ("replay differs from live", before, after)
        self.tally("replay == live checked" if not resolving and not timed_out
                   else "replay resolved checked")

    # -- the run -----------------------------------------------------------------------

    def run(self, steps: int = STEPS) -> None:
        self.start()
        for topic in TOPICS:
            create_topic(self.wire, topic, partitions=2)
        for tid in TXN_IDS:
            assert T.find_coordinator(self.wire, tid)[1]["error_code"] == E.NONE
        self.check()
        for self.step_no in range(steps):
            self.settle()  # no short transaction times out during the step
            tid = self.rng.choice(TXN_IDS)
            kind = self.rng.choices(
                ["produce", "offsets", "commit", "abort", "reinit", "zombie", "clock",
                 "crash"], [30, 12, 12, 6, 3, 4, 5, 4 if self.crashes < MAX_CRASHES else 0])[0]
            if kind == "produce":
                self.step_produce(tid)
            elif kind == "offsets":
                self.step_offsets(tid)
            elif kind in ("commit", "abort"):
                self.step_end(tid, kind == "commit")
            elif kind == "reinit":
                self.step_reinit(tid)
            elif kind == "zombie":
                self.step_zombie()
            elif kind == "clock":
                self.step_clock()
            elif kind == "crash":
                self.step_crash()
            if kind != "crash":
                self.check()
        # the end: every transaction ended by its producer, then one more that
        # writes to every partition and commits; nothing held
        self.step_no = steps
        self.settle()
        for tid in sorted(self.model.open):
            self.step_end(tid, self.rng.random() < 0.6)
        tid = self.rng.choice(TXN_IDS)
        for tp in TPS:
            self.step_produce(tid, tp)
        self.step_end(tid, True)
        seen = self.check()
        for tp in TPS:
            assert seen["partitions"][tp]["lso"] == seen["partitions"][tp]["hw"]
            assert self.model.expected_committed(tp), tp
        assert seen["stable"] == seen["offsets"]
        # a clean stop and start shows the same again
        self.wire.close()
        assert self.node.terminate() == 0
        self.log("clean restart")
        self.start()
        assert self.check() == seen, "a clean restart changed what is read"
        self.confluent_read_committed()

    def confluent_read_committed(self) -> None:
        """A real read_committed consumer (librdkafka) reads the same."""
        import confluent_kafka as confluent  # a test dependency: always installed
        consumer = confluent.Consumer({
            "bootstrap.servers": self.node.bootstrap, "group.id": "txp-reader",
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        try:
            consumer.assign([confluent.TopicPartition(t, p, 0) for t, p in TPS])
            got = {tp: [] for tp in TPS}
            at_end: set = set()
            deadline = time.monotonic() + 15
            while len(at_end) < len(TPS):
                assert time.monotonic() < deadline, ("confluent consumer", at_end, got)
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                tp = (msg.topic(), msg.partition())
                if msg.error():
                    assert msg.error().code() == confluent.KafkaError._PARTITION_EOF, msg.error()
                    at_end.add(tp)
                    continue
                got[tp].append((msg.offset(), msg.value()))
            for tp in TPS:
                assert got[tp] == self.model.expected_committed(tp), (tp, "confluent", got[tp])
        finally:
            consumer.close()


def _base_seed() -> int:
    return int(os.environ.get("KCOORD_TXN_SEED") or time.time_ns() % 1_000_000)


BASE_SEED = _base_seed()


@pytest.mark.parametrize("index", range(SEQUENCES))
def test_transactions_agree_with_the_model_through_crashes_and_timeouts(tmp_path, index):
    seed = BASE_SEED + index
    run = Sequence(seed, tmp_path / "data")
    try:
        run.run()
    except BaseException as error:
        trace = "\n".join(run.trace[-40:])
        error.add_note(f"KCOORD_TXN_SEED={BASE_SEED} (sequence {index}: seed {seed}), "
                       f"step {run.step_no}; the last steps:\n{trace}")
        print(f"KCOORD_TXN_SEED={BASE_SEED} sequence {index} seed {seed}")
        raise
    finally:
        run.close()
    print(f"seed {seed}: {run.tallies}")


def test_offsets_of_two_transactions_keep_the_later_record(make_broker):
    """Two transactions commit an offset for the same group partition; the one
    whose TxnOffsetCommit was written first commits last: Kafka keeps 20."""
    node = make_broker()
    with WireClient.to(node.bootstrap) as wire:
        create_topic(wire, "txp-order")
        ids = {}
        for tid in ("txp-order-a", "txp-order-b"):
            T.find_coordinator(wire, tid)
            answer = T.init_producer(wire, tid)
            ids[tid] = (answer["producer_id"], answer["producer_epoch"])

        def commit_offset(tid, offset):
            pid, epoch = ids[tid]
            assert wire.call(25, 3, {"transactional_id": tid, "producer_id": pid,
                                     "producer_epoch": epoch, "group_id": "txp-order-g"})[
                "error_code"] == E.NONE
            answer = wire.call(28, 3, {
                "transactional_id": tid, "group_id": "txp-order-g", "producer_id": pid,
                "producer_epoch": epoch, "topics": [{"name": "txp-order", "partitions": [
                    {"partition_index": 0, "committed_offset": offset,
                     "committed_metadata": ""}]}]})
            assert answer["topics"][0]["partitions"][0]["error_code"] == E.NONE

        commit_offset("txp-order-a", 10)
        commit_offset("txp-order-b", 20)
        assert T.end_txn_settled(wire, "txp-order-b", *ids["txp-order-b"], True) == E.NONE
        assert T.end_txn_settled(wire, "txp-order-a", *ids["txp-order-a"], True) == E.NONE
        answer = wire.call(9, 7, {"group_id": "txp-order-g", "require_stable": True,
                                  "topics": [{"name": "txp-order", "partition_indexes": [0]}]})
        part = answer["topics"][0]["partitions"][0]
        assert (part["error_code"], part["committed_offset"]) == (E.NONE, 20)


def test_an_abort_marker_without_data_lists_no_aborted_transaction(make_broker):
    """A partition added to a transaction that wrote nothing to it, then the
    abort: its marker is all the partition holds, and Kafka lists no aborted
    transaction for it (nor writes one to the .txnindex).  The same happens to
    a partition that gets an abort marker twice (a coordinator that loads a
    PrepareAbort whose markers were written before a crash)."""
    node = make_broker()
    with WireClient.to(node.bootstrap) as wire:
        create_topic(wire, "txp-empty", partitions=2)
        T.find_coordinator(wire, "txp-empty")
        answer = T.init_producer(wire, "txp-empty")
        pid, epoch = answer["producer_id"], answer["producer_epoch"]
        T.add_partitions(wire, "txp-empty", pid, epoch, [("txp-empty", 0), ("txp-empty", 1)])
        assert T.produce(wire, "txp-empty", "txp-empty", 0,
                         T.txn_batch(pid, epoch, 0, [b"x"]))["error_code"] == E.NONE
        assert T.end_txn_settled(wire, "txp-empty", pid, epoch, False) == E.NONE
        written = T.fetch(wire, "txp-empty", 0, committed=True)
        assert written["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]
        empty = T.fetch(wire, "txp-empty", 1, committed=True)
        assert empty["high_watermark"] == 1  # the marker
        assert empty["aborted_transactions"] == []
