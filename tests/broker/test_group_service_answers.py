"""The coordinator's shell completes a handful of answers at once, and many (a
join phase ending for a group of 1,000 members) a slice per turn of the event
loop: each completed answer wakes its connection, which encodes and sends it,
so other clients' requests are served between the slices instead of after
all of them."""

from __future__ import annotations

import asyncio

from broker.groups.coordinator import GroupCoordinator, Outcome
from broker.groups.service import ANSWERS_PER_TURN, GroupService


async def _turns(tickets, turns: int) -> list[int]:
    done = []
    for _ in range(turns):
        done.append(sum(t.done() for t in tickets))
        await asyncio.sleep(0)
    return done


async def test_a_few_answers_are_given_at_once():
    service = GroupService(broker=None, core=GroupCoordinator())
    loop = asyncio.get_running_loop()
    tickets = [loop.create_future() for _ in range(ANSWERS_PER_TURN)]
    service.run(Outcome(answers=[(t, i) for i, t in enumerate(tickets)]))
    assert [t.result() for t in tickets] == list(range(ANSWERS_PER_TURN))


async def test_many_answers_are_given_a_slice_per_turn_in_order():
    service = GroupService(broker=None, core=GroupCoordinator())
    loop = asyncio.get_running_loop()
    many = [loop.create_future() for _ in range(3 * ANSWERS_PER_TURN + 8)]
    service.run(Outcome(answers=[(t, i) for i, t in enumerate(many)]))
    # A small outcome that comes meanwhile waits its turn behind them.
    later = [loop.create_future() for _ in range(2)]
    service.run(Outcome(answers=[(t, "later") for t in later]))
    assert not any(t.done() for t in later)
    assert await _turns(many, 6) == [0, 64, 128, 192, 200, 200]
    assert [t.result() for t in many] == list(range(len(many)))
    assert [t.result() for t in later] == ["later", "later"]
    # Once the queue is empty, a few answers are given at once again.
    again = loop.create_future()
    service.run(Outcome(answers=[(again, "now")]))
    assert again.result() == "now"


async def test_an_answer_already_given_is_left_alone():
    service = GroupService(broker=None, core=GroupCoordinator())
    loop = asyncio.get_running_loop()
    tickets = [loop.create_future() for _ in range(2 * ANSWERS_PER_TURN)]
    tickets[5].set_result("first")
    tickets[100].cancel()  # the connection went away
    service.run(Outcome(answers=[(t, "second") for t in tickets]))
    await _turns(tickets, 3)
    assert tickets[5].result() == "first"
    assert tickets[100].cancelled()
    assert all(t.result() == "second" for i, t in enumerate(tickets) if i not in (5, 100))
