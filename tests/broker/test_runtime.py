"""The coordinator runtime (``broker.runtime``) with a real log underneath:
answers given a slice per turn of the loop, writes of a shard batched within
the linger and answered only once durable, a failed append failing every
write of its batch, refusals for partitions loading or not served, and one
heap of timers for every shard."""

from __future__ import annotations

import asyncio

import pytest

from kcoord.broker.groups.common import CoordinatorConfig, JoinRequest
from kcoord.broker.groups.offsets import OffsetAndMetadata
from kcoord.broker.groups.service import GroupService
from kcoord.broker.runtime.outcome import Outcome, Write
from kcoord.broker.runtime.runtime import ANSWERS_PER_TURN, CoordinatorRuntime, PartitionState
from kcoord.broker.topics.data import LEADER_EPOCH
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.records import batch_header
from kcoord.storage.config import LogConfig
from kcoord.storage.errors import KafkaStorageError, LogClosedError
from kcoord.storage.layout import OFFSETS_TOPIC
from kcoord.storage.manager import LogManager
from tests.broker.group_harness import subscription


class _Waiters:
    def __init__(self):
        self.notified = []

    def notify(self, key):
        self.notified.append(key)


class FakeBroker:
    """What the runtime asks of the broker: the logs, a topic's config and the
    fetch waiters it wakes after an append."""

    def __init__(self, path, flush_policy="never", **config):
        self.logs = LogManager(str(path), LogConfig(flush_policy=flush_policy, **config))
        self.fetch_waiters = _Waiters()

    def log_config(self, topic):
        return None

    def batches(self, partition: int) -> list[bytes]:
        plog = self.logs.get(OFFSETS_TOPIC, partition)
        return [] if plog is None else list(plog.verified_batches())


class Shard:
    """A shard that answers what it is told and records its timers firing."""

    def __init__(self, partition, timers, now, refusal):
        self.partition, self.timers, self.refusal = partition, timers, refusal
        self.fired = []
        self.settled = []

    def put(self, ticket, key: bytes, now):
        if self.refusal is not None:
            return Outcome().answer(ticket, self.refusal)

        def done(error, now, key=key):
            self.settled.append((key, error))
            return Outcome().answer(ticket, (key, error))
        return Outcome(writes=[Write([(key, b"v")], done)])

    def put_twice(self, ticket, key: bytes, now):
        """A write whose continuation writes again, as a group deletion does."""
        def then(error, now, key=key):
            return Outcome(writes=[Write([(key + b"-then", b"v")], lambda e, n: Outcome().answer(
                ticket, (key, e)))])
        return Outcome(writes=[Write([(key, b"v")], then)])

    def big(self, ticket, size: int, now):
        return Outcome(writes=[Write([(b"big", b"x" * size)], lambda e, n: Outcome().answer(
            ticket, (b"big", e)))])

    def fails_after(self, ticket, key: bytes, now):
        """A write whose continuation raises (a bug) after the write is durable."""
        def done(error, now):
            raise RuntimeError("a continuation that fails")
        return Outcome(writes=[Write([(key, b"v")], done)])

    def fire(self, key, payload, now):
        self.fired.append((key, payload, now))
        if key == ("boom",):
            raise RuntimeError("a timer that fails")
        if key == ("write",):
            return Outcome(writes=[Write([(b"from-timer", b"v")])])
        if key == ("again",):  # re-armed already due, as an initial delay of 0 extended
            self.timers.schedule(("again",), now)
        return None

    def install(self, loaded, now):
        return Outcome()

    def unload(self):
        return Outcome()


def _runtime(broker, linger_ms=-1, partitions=3):
    runtime = CoordinatorRuntime(broker, name="test", topic=OFFSETS_TOPIC,
                                 partitions=partitions, new_shard=Shard, load=lambda plog: None,
                                 linger_ms=linger_ms)
    runtime.start()
    return runtime


async def _turns(tickets, turns: int) -> list[int]:
    done = []
    for _ in range(turns):
        done.append(sum(t.done() for t in tickets))
        await asyncio.sleep(0)
    return done


# -- answers ---------------------------------------------------------------------------


async def test_a_few_answers_are_given_at_once(tmp_path):
    runtime = _runtime(FakeBroker(tmp_path))
    loop = asyncio.get_running_loop()
    tickets = [loop.create_future() for _ in range(ANSWERS_PER_TURN)]
    runtime.run(0, Outcome(answers=[(t, i) for i, t in enumerate(tickets)]))
    assert [t.result() for t in tickets] == list(range(ANSWERS_PER_TURN))


async def test_many_answers_are_given_a_slice_per_turn_in_order(tmp_path):
    runtime = _runtime(FakeBroker(tmp_path))
    loop = asyncio.get_running_loop()
    many = [loop.create_future() for _ in range(3 * ANSWERS_PER_TURN + 8)]
    runtime.run(0, Outcome(answers=[(t, i) for i, t in enumerate(many)]))
    # A small outcome that comes meanwhile waits its turn behind them.
    later = [loop.create_future() for _ in range(2)]
    runtime.run(1, Outcome(answers=[(t, "later") for t in later]))
    assert not any(t.done() for t in later)
    n = ANSWERS_PER_TURN
    assert await _turns(many, 6) == [0, n, 2 * n, 3 * n, 3 * n + 8, 3 * n + 8]
    assert [t.result() for t in many] == list(range(len(many)))
    assert [t.result() for t in later] == ["later", "later"]
    # Once the queue is empty, a few answers are given at once again.
    again = loop.create_future()
    runtime.run(0, Outcome(answers=[(again, "now")]))
    assert again.result() == "now"


async def test_an_answer_already_given_is_left_alone(tmp_path):
    runtime = _runtime(FakeBroker(tmp_path))
    loop = asyncio.get_running_loop()
    tickets = [loop.create_future() for _ in range(2 * ANSWERS_PER_TURN)]
    tickets[5].set_result("first")
    tickets[ANSWERS_PER_TURN + 4].cancel()  # the connection went away
    runtime.run(0, Outcome(answers=[(t, "second") for t in tickets]))
    await _turns(tickets, 3)
    assert tickets[5].result() == "first"
    assert tickets[ANSWERS_PER_TURN + 4].cancelled()
    assert all(t.result() == "second" for i, t in enumerate(tickets)
               if i not in (5, ANSWERS_PER_TURN + 4))


# -- batched writes ----------------------------------------------------------------------


async def test_writes_issued_in_one_turn_are_one_batch_answered_after_it(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker)  # adaptive linger
    tickets = [runtime.write(1, Shard.put, b"k%d" % i) for i in range(5)]
    other = runtime.write(2, Shard.put, b"elsewhere")
    assert not any(t.done() for t in tickets)  # nothing is answered before its append
    assert runtime.writes_in_flight([1]) and not runtime.writes_in_flight([0])
    await asyncio.sleep(0)
    assert [t.result() for t in tickets] == [(b"k%d" % i, E.NONE) for i in range(5)]
    assert other.result() == (b"elsewhere", E.NONE)
    assert len(broker.batches(1)) == 1 and len(broker.batches(2)) == 1
    # Stamped with the partition's leader epoch, as every batch the broker writes
    # (DumpLogSegments shows it; a fetching client checks it).
    assert batch_header(broker.batches(1)[0], 0).partition_leader_epoch == LEADER_EPOCH
    assert broker.logs.get(OFFSETS_TOPIC, 1).log_end_offset == 5
    assert runtime.writes_in_flight([1, 2]) == []
    # The next turn's writes are the next batch.
    runtime.write(1, Shard.put, b"later")
    await asyncio.sleep(0)
    assert len(broker.batches(1)) == 2


async def test_with_no_linger_every_write_is_its_own_append(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker, linger_ms=0)
    tickets = [runtime.write(1, Shard.put, b"k%d" % i) for i in range(3)]
    assert all(t.done() for t in tickets)  # durable when written, under the default policy
    assert len(broker.batches(1)) == 3


async def test_with_no_linger_a_write_waiting_for_its_fsync_is_in_flight(tmp_path):
    # OffsetFetch with require_stable waits on what writes_in_flight lists: a
    # write appended at once but not yet fsynced must be among them.
    broker = FakeBroker(tmp_path, flush_policy="batch")
    runtime = _runtime(broker, linger_ms=0)
    ticket = runtime.write(1, Shard.put, b"k")
    assert len(broker.batches(1)) == 1 and not ticket.done()
    waits = runtime.writes_in_flight([1])
    assert len(waits) == 1
    await asyncio.wait_for(waits[0], 5)
    assert ticket.result() == (b"k", E.NONE)
    assert runtime.writes_in_flight([1]) == []


async def test_a_linger_holds_the_batch_open_that_long(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker, linger_ms=50)
    first = runtime.write(1, Shard.put, b"a")
    await asyncio.sleep(0.01)
    second = runtime.write(1, Shard.put, b"b")
    assert not first.done()
    await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert len(broker.batches(1)) == 1


@pytest.mark.parametrize("value, cost", [(b"v" * 30, 94), (None, 64)])
async def test_a_batch_closes_before_it_outgrows_its_size(tmp_path, monkeypatch, value, cost):
    import kcoord.broker.runtime.runtime as rt
    monkeypatch.setattr(rt, "MAX_BATCH_BYTES", 2 * cost)  # a key of 40 bytes, 24 of overhead
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker)
    loop = asyncio.get_running_loop()
    tickets = [loop.create_future() for _ in range(5)]
    for ticket in tickets:
        runtime.run(1, Outcome(writes=[Write([(b"k" * 40, value)], lambda e, n, t=ticket:
                                             Outcome().answer(t, e))]))
    await asyncio.sleep(0)
    assert [t.result() for t in tickets] == [E.NONE] * 5
    assert len(broker.batches(1)) == 3  # two writes fit exactly, a third does not
    assert broker.logs.get(OFFSETS_TOPIC, 1).log_end_offset == 5


async def test_a_continuation_s_writes_go_to_the_same_partition(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker)
    ticket = runtime.write(2, Shard.put_twice, b"k")
    two = runtime.write(2, Shard.put, b"second")  # two writes in one batch: both appended
    while not ticket.done():
        await asyncio.sleep(0)
    assert ticket.result() == (b"k", E.NONE) and two.result() == (b"second", E.NONE)
    assert broker.logs.get(OFFSETS_TOPIC, 2).log_end_offset == 3
    assert broker.batches(0) == broker.batches(1) == []
    assert broker.fetch_waiters.notified == [(OFFSETS_TOPIC, 2)] * 2  # long polls wake


async def test_a_linger_of_one_millisecond_flushes(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker, linger_ms=1)
    ticket = runtime.write(1, Shard.put, b"k")
    assert (await asyncio.wait_for(ticket, 5)) == (b"k", E.NONE)


async def test_under_fsync_batch_the_answers_wait_for_the_fsync(tmp_path):
    broker = FakeBroker(tmp_path, flush_policy="batch")
    runtime = _runtime(broker)
    tickets = [runtime.write(1, Shard.put, b"k%d" % i) for i in range(3)]
    await asyncio.wait_for(asyncio.gather(*tickets), 5)
    assert [t.result()[1] for t in tickets] == [E.NONE] * 3
    assert len(broker.batches(1)) == 1


async def test_a_failed_append_fails_every_write_of_its_batch(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker)
    runtime.write(1, Shard.put, b"first")  # creates the partition's log
    await asyncio.sleep(0)
    broker.logs.get(OFFSETS_TOPIC, 1).close()
    tickets = [runtime.write(1, Shard.put, b"k%d" % i) for i in range(3)]
    await asyncio.sleep(0)
    errors = [t.result()[1] for t in tickets]
    assert errors == [LogClosedError.code] * 3  # the log was closed (its topic deleted)
    assert runtime.writes_in_flight([1]) == []


async def test_an_append_the_disk_refuses_fails_every_write_of_its_batch(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker)
    runtime.write(1, Shard.put, b"first")
    await asyncio.sleep(0)
    plog = broker.logs.get(OFFSETS_TOPIC, 1)

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")
    plog.append_own = no_space
    tickets = [runtime.write(1, Shard.put, b"k%d" % i) for i in range(3)]
    await asyncio.wait_for(asyncio.gather(*tickets), 5)
    assert [t.result() for t in tickets] == [(b"k%d" % i, E.KAFKA_STORAGE_ERROR)
                                             for i in range(3)]
    assert runtime.writes_in_flight([1]) == []
    assert plog.log_end_offset == 1  # only the first write
    runtime.write(0, Shard.put, b"other")  # another partition still takes writes
    await asyncio.sleep(0)
    assert broker.logs.get(OFFSETS_TOPIC, 0).log_end_offset == 1


@pytest.mark.parametrize("failure, code", [(OSError("disk gone"), E.KAFKA_STORAGE_ERROR),
                                           (None, None)])
async def test_a_failed_fsync_fails_every_write_it_covered(tmp_path, failure, code):
    if failure is None:
        failure = KafkaStorageError("log dir offline")
        code = E.KAFKA_STORAGE_ERROR
    broker = FakeBroker(tmp_path, flush_policy="batch")
    runtime = _runtime(broker)
    runtime.write(1, Shard.put, b"first")
    await asyncio.sleep(0.05)
    plog = broker.logs.get(OFFSETS_TOPIC, 1)

    async def fails(rolled):
        raise failure
    plog.flusher.after_append = fails
    tickets = [runtime.write(1, Shard.put, b"k%d" % i) for i in range(3)]
    await asyncio.wait_for(asyncio.gather(*tickets), 5)
    assert [t.result()[1] for t in tickets] == [code] * 3
    assert runtime.writes_in_flight([1]) == []  # none left waiting for that fsync


async def test_a_write_for_a_partition_not_served_fails_and_is_not_appended(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker)
    runtime.state[1] = PartitionState.FAILED
    del runtime.shards[1]
    loop = asyncio.get_running_loop()
    ticket = loop.create_future()
    runtime.run(1, Outcome(writes=[Write([(b"k", b"v")], lambda e, n: Outcome().answer(
        ticket, e))]))
    assert ticket.result() == E.NOT_LEADER_OR_FOLLOWER
    await asyncio.sleep(0)
    assert broker.batches(1) == []


async def test_a_continuation_writing_while_its_batch_is_closed_early_is_not_lost(
        tmp_path, monkeypatch):
    import kcoord.broker.runtime.runtime as rt
    monkeypatch.setattr(rt, "MAX_BATCH_BYTES", 200)
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker)
    chained = runtime.write(0, Shard.put_twice, b"a")
    big = runtime.write(0, Shard.big, 300)  # too big to join: the open batch goes first
    for _ in range(10):
        await asyncio.sleep(0)
    assert chained.result() == (b"a", E.NONE) and big.result() == (b"big", E.NONE)
    assert broker.logs.get(OFFSETS_TOPIC, 0).log_end_offset == 3
    assert runtime.writes_in_flight([0]) == []


async def test_batches_fit_the_partition_s_max_message_bytes(tmp_path):
    broker = FakeBroker(tmp_path, max_message_bytes=8000)
    runtime = _runtime(broker)
    runtime.write(0, Shard.put, b"first")  # the partition's log, with its config
    await asyncio.sleep(0)
    tickets = [runtime.write(0, Shard.big, 1000) for _ in range(10)]
    await asyncio.wait_for(asyncio.gather(*tickets), 5)
    assert [t.result()[1] for t in tickets] == [E.NONE] * 10  # as each alone would be
    assert len(broker.batches(0)) == 1 + 2  # seven of about 1,030 bytes fit in 8,000


async def test_a_bug_in_an_append_or_a_continuation_costs_no_other_write_its_answer(
        tmp_path, monkeypatch):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker)
    runtime.write(0, Shard.fails_after, b"a")
    after = runtime.write(0, Shard.put, b"b")  # same batch, after the failing continuation
    await asyncio.sleep(0)
    assert after.result() == (b"b", E.NONE)

    def boom(partition, records):
        raise RuntimeError("a bug in the append path")
    monkeypatch.setattr(runtime, "_append_records", boom)
    tickets = [runtime.write(0, Shard.put, b"k%d" % i) for i in range(2)]
    await asyncio.sleep(0)
    assert [t.result() for t in tickets] == [(b"k0", E.UNKNOWN_SERVER_ERROR),
                                             (b"k1", E.UNKNOWN_SERVER_ERROR)]
    assert runtime.writes_in_flight([0]) == []


async def test_after_stop_no_timer_fires(tmp_path):
    runtime = _runtime(FakeBroker(tmp_path), linger_ms=60_000)
    runtime.shards[1].timers.schedule(("a",), runtime.now() + 20)
    ticket = runtime.write(1, Shard.put, b"k")  # arms the loop timer
    assert runtime._timer is not None
    await runtime.stop()
    assert ticket.result() == (b"k", E.NONE)
    runtime.shards[2].timers.schedule(("b",), runtime.now())  # a deadline armed after stop
    runtime.run(2, Outcome())
    await asyncio.sleep(0.1)
    assert runtime._timer is None
    assert runtime.shards[1].fired == [] and runtime.shards[2].fired == []


async def test_stop_waits_for_the_writes_waiting_on_their_fsync(tmp_path):
    broker = FakeBroker(tmp_path, flush_policy="batch")
    runtime = _runtime(broker)
    runtime.write(1, Shard.put, b"first")
    await asyncio.sleep(0.05)
    plog = broker.logs.get(OFFSETS_TOPIC, 1)
    real = plog.flusher.after_append

    async def slow(rolled):
        await asyncio.sleep(0.2)
        await real(rolled=rolled)
    plog.flusher.after_append = slow
    ticket = runtime.write(1, Shard.put, b"k")
    await asyncio.sleep(0)  # appended; its fsync under way
    assert runtime.writes_in_flight([1]) and not ticket.done()
    await runtime.stop()
    assert ticket.result() == (b"k", E.NONE)  # answered before stop returned


async def test_stop_appends_the_open_batch_before_it_returns(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker, linger_ms=60_000)
    ticket = runtime.write(1, Shard.put, b"k")
    await runtime.stop()
    assert ticket.result() == (b"k", E.NONE)


async def test_unload_resigns_every_partition_after_appending_what_was_written(tmp_path):
    """The broker stops, and the runtime resigns its partitions as Kafka's does:
    what was written before is appended and answered, what its continuations
    would write next is refused, later requests are answered NOT_COORDINATOR,
    no timer fires (no member expires while the broker stops), and a load that
    ends afterwards is not served."""
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker, linger_ms=60_000)
    runtime.shards[1].timers.schedule(("a",), runtime.now() + 20)
    before = runtime.write(1, Shard.put, b"before")  # in the open batch
    chained = runtime.write(2, Shard.put_twice, b"chain")  # its continuation writes again
    unloaded = runtime.shards[1]
    runtime.state[0] = PartitionState.LOADING
    del runtime.shards[0]
    assert runtime._timer is not None
    assert runtime.unload() == 0
    assert runtime._timer is None  # cancelled, not left to fire
    assert before.result() == (b"before", E.NONE)
    assert chained.result() == (b"chain", E.NOT_LEADER_OR_FOLLOWER)
    assert len(broker.batches(1)) == len(broker.batches(2)) == 1
    assert runtime.write(1, Shard.put, b"after").result() == E.NOT_COORDINATOR
    assert runtime.state[1] is PartitionState.UNLOADED and runtime.active() == []
    # one still loading is refused as not served, and stays so once loaded
    assert runtime.write(0, Shard.put, b"k").result() == E.NOT_COORDINATOR
    runtime._activate(0)
    assert runtime.state[0] is PartitionState.UNLOADED and 0 not in runtime.shards
    await asyncio.sleep(0.1)
    assert unloaded.fired == [] and runtime._timer is None
    assert len(broker.batches(1)) == len(broker.batches(2)) == 1  # nothing written since
    # A transaction's marker is still appended: a marker is an append to the
    # log, which Kafka writes without the coordinator.
    assert await runtime.append_marker(1, 5, 0, True, 0) == E.NONE
    marker = batch_header(broker.batches(1)[-1], 0)
    assert marker.is_control and marker.producer_id == 5
    await runtime.stop()


# -- refusals and timers --------------------------------------------------------------------


async def test_partitions_loading_or_failed_are_refused_and_never_written(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker)
    runtime.state[1] = PartitionState.LOADING
    del runtime.shards[1]
    runtime.state[2] = PartitionState.FAILED
    del runtime.shards[2]
    assert runtime.write(1, Shard.put, b"k").result() == E.COORDINATOR_LOAD_IN_PROGRESS
    assert runtime.write(2, Shard.put, b"k").result() == E.NOT_COORDINATOR
    assert runtime.write(7, Shard.put, b"k").result() == E.NOT_COORDINATOR  # not this broker's
    assert runtime.loading and runtime.failed == [2]
    await asyncio.sleep(0)
    assert broker.batches(1) == broker.batches(2) == []


async def test_one_heap_fires_every_shard_s_timers_on_its_own_shard(tmp_path):
    runtime = _runtime(FakeBroker(tmp_path))
    now = runtime.now()
    runtime.shards[0].timers.schedule(("a",), now + 20)
    runtime.shards[2].timers.schedule(("a",), now + 10)
    runtime.shards[2].timers.schedule(("b",), now + 60_000)
    runtime.run(0, Outcome())  # arms the loop timer
    assert ("a",) in runtime.shards[0].timers and ("a",) in runtime.shards[2].timers
    assert len(runtime.deadlines) == 3
    await asyncio.sleep(0.1)
    assert [k for k, _p, _n in runtime.shards[0].fired] == [("a",)]
    assert [k for k, _p, _n in runtime.shards[2].fired] == [("a",)]
    assert runtime.shards[1].fired == []
    assert runtime.shards[2].timers.deadline(("b",)) == now + 60_000


async def test_a_timer_re_armed_already_due_waits_for_the_next_turn(tmp_path):
    """Firing a timer that arms itself again at ``now`` does not fire it again in
    the same pass (which would never end): the requests that arrived meanwhile
    come first, as in Kafka."""
    runtime = _runtime(FakeBroker(tmp_path))
    now = runtime.now()
    runtime.shards[1].timers.schedule(("again",), now)
    runtime._fire()
    assert [k for k, _p, _n in runtime.shards[1].fired] == [("again",)]
    assert ("again",) in runtime.shards[1].timers  # armed for the next turn
    await asyncio.sleep(0.05)
    assert len(runtime.shards[1].fired) >= 2  # and it fires then
    runtime.shards[1].timers.cancel(("again",))


async def test_a_failing_timer_is_logged_and_the_others_still_fire(tmp_path):
    broker = FakeBroker(tmp_path)
    runtime = _runtime(broker)
    now = runtime.now()
    runtime.shards[0].timers.schedule(("boom",), now)
    runtime.shards[1].timers.schedule(("write",), now + 1, payload="p")
    runtime.deadlines.schedule((9, ("orphan",)), now)  # a partition with no shard
    runtime.shards[2].timers.schedule(("late",), now + 60_000)
    runtime.run(0, Outcome())
    runtime.shards[2].timers.schedule(("early",), now + 2)  # re-arms the loop timer earlier
    runtime.run(2, Outcome())
    await asyncio.sleep(0.1)
    assert [k for k, _p, _n in runtime.shards[0].fired] == [("boom",)]
    assert runtime.shards[1].fired[0][:2] == (("write",), "p")
    assert [k for k, _p, _n in runtime.shards[2].fired] == [("early",)]
    await asyncio.sleep(0)
    assert broker.logs.get(OFFSETS_TOPIC, 1).log_end_offset == 1  # the timer's write


# -- the group coordinator on it ----------------------------------------------------------


async def test_groups_of_different_partitions_live_in_different_shards(tmp_path):
    groups = GroupService(FakeBroker(tmp_path), CoordinatorConfig(partitions=5))
    groups.start()
    names = ["g0", "g1", "g2", "g3", "g4", "g5"]
    partitions = {groups.partition_for(n) for n in names}
    assert len(partitions) > 1
    for name in names:
        ticket = groups.join(JoinRequest(name, "", "consumer", [("range", subscription("t"))],
                                         10_000, 30_000))
        assert ticket.result()["error_code"] == E.MEMBER_ID_REQUIRED
    await asyncio.sleep(0)
    for name in names:
        shard = groups.runtime.shards[groups.partition_for(name)]
        assert name in shard.groups and groups.group(name) is shard.groups[name]
    code, listed = groups.list_groups([], [])
    assert code == E.NONE and sorted(g["group_id"] for g in listed) == names
    answer = await groups.delete_groups(["g0", "g3", "nope"])
    assert answer == {"g0": E.NONE, "g3": E.NONE, "nope": E.GROUP_ID_NOT_FOUND}
    groups.runtime.state[0] = PartitionState.LOADING
    assert groups.list_groups([], []) == (E.COORDINATOR_LOAD_IN_PROGRESS, [])
    await groups.stop()


@pytest.mark.parametrize("partitions", [1, 3])
async def test_delete_groups_answers_once_every_shard_has(tmp_path, partitions):
    groups = GroupService(FakeBroker(tmp_path), CoordinatorConfig(partitions=partitions))
    groups.start()
    names = [f"simple-{i}" for i in range(6)]
    offsets = {("t", 0): OffsetAndMetadata(1, -1, "")}
    for name in names:
        assert (await groups.commit(name, -1, "", None, offsets, version=8,
                                    retention_ms=-1)) == {("t", 0): E.NONE}
    ticket = groups.delete_groups(names)
    assert not ticket.done()  # the tombstones are not written yet
    assert await ticket == {name: E.NONE for name in names}
    assert all(groups.group(name) is None for name in names)
