"""Work that follows answers (``Broker.defer``): run once the answers of the
turn are sent, or before the next request is served; work that defers more
work (a write retried after a failure) never holds the event loop."""

from __future__ import annotations

import asyncio

from kcoord.broker.app import Broker


def _broker() -> Broker:
    broker = Broker.__new__(Broker)  # only what deferring work uses
    broker.deferred = []
    broker._loop = asyncio.get_running_loop()
    return broker


async def test_deferred_work_runs_two_turns_later_or_when_asked():
    broker, runs = _broker(), []
    broker.defer(lambda: runs.append("a"))
    await asyncio.sleep(0)
    assert runs == []  # an answer given in this turn is sent in the next one first
    await asyncio.sleep(0)
    assert runs == ["a"]
    broker.defer(lambda: runs.append("b"))
    broker.run_deferred()  # a request about to be served
    assert runs == ["a", "b"]
    for _ in range(3):
        await asyncio.sleep(0)
    assert runs == ["a", "b"]  # nothing runs twice


async def test_work_deferred_by_deferred_work_waits_for_later_turns():
    broker, runs = _broker(), []

    def retry():  # as a write that keeps failing defers its retry
        runs.append(len(runs))
        if len(runs) < 10_000:
            broker.defer(retry)
    broker.defer(retry)
    broker.run_deferred()
    assert runs == [0]
    for _ in range(6):
        await asyncio.sleep(0)
    assert 1 < len(runs) <= 7  # at most a retry a turn: other clients are served between


async def test_deferred_work_that_fails_does_not_stop_the_rest():
    broker, runs = _broker(), []

    def fails():
        raise RuntimeError("a bug")
    broker.defer(fails)
    broker.defer(lambda: runs.append("after"))
    broker.run_deferred()
    assert runs == ["after"] and broker.deferred == []
