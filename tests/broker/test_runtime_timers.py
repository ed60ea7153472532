"""The coordinator's one heap of deadlines, driven by a manual clock."""

from __future__ import annotations

import random

import pytest

from kcoord.broker.runtime.timers import Deadlines, ManualClock, MonotonicClock, WallClock


def test_due_deadlines_come_out_earliest_first_and_once():
    clock = ManualClock(1_000)
    d = Deadlines()
    d.schedule(("session", "g", "m1"), clock() + 300, "m1")
    d.schedule(("session", "g", "m2"), clock() + 100, "m2")
    d.schedule(("rebalance", "g"), clock() + 200)
    assert d.next_deadline() == 1_100
    assert d.pop_due(clock.advance(99)) == []
    assert d.pop_due(clock.advance(1)) == [(("session", "g", "m2"), "m2")]
    assert d.pop_due(clock.advance(1_000)) == [(("rebalance", "g"), None),
                                               (("session", "g", "m1"), "m1")]
    assert d.pop_due(clock.advance(1_000)) == [] and len(d) == 0
    assert d.next_deadline() is None


def test_re_arming_replaces_and_cancelling_forgets():
    d = Deadlines()
    key = ("session", "g", "m")
    d.schedule(key, 100)
    d.schedule(key, 500)  # a heartbeat pushed the expiry back
    assert d.deadline(key) == 500 and d.next_deadline() == 500
    assert d.pop_due(499) == []
    assert d.pop_due(500) == [(key, None)]
    d.schedule(key, 600)
    assert d.cancel(key) and not d.cancel(key)
    assert key not in d and d.pop_due(10_000) == []


def test_a_deadline_armed_with_an_earlier_place_keeps_it_and_still_counts_as_new():
    """A timer standing for another's deadline (a group's sessions) is armed with
    that one's place: it comes before what was armed after it at the same
    instant, and ``mark`` still moves, so a check of the next deadline knows
    something was armed since."""
    d = Deadlines()
    place = d.next_seq()  # a member's session, armed first
    d.schedule(("join", "g"), 500)
    mark = d.mark()
    d.schedule(("sessions", "g"), 500, seq=place)
    assert d.mark() > mark
    assert d.peek() == (500, place)
    assert d.pop_due(500) == [(("sessions", "g"), None), (("join", "g"), None)]
    assert d.peek() is None


def test_many_re_arms_keep_the_heap_small_and_the_order_right():
    rng = random.Random(7)
    d = Deadlines()
    expected = {}
    for i in range(20_000):
        key = rng.randrange(50)
        when = rng.randrange(1_000_000)
        d.schedule(key, when, i)
        expected[key] = (when, i)
    assert len(d._heap) <= 2 * len(d) + 64 + 1
    due = d.pop_due(10**9)
    assert [k for k, _ in due] == sorted(expected, key=lambda k: expected[k])
    assert {k: p for k, p in due} == {k: i for k, (_w, i) in expected.items()}


def test_clocks():
    clock = ManualClock()
    with pytest.raises(ValueError):
        clock.advance(-1)
    real = MonotonicClock()
    assert real() <= real()


def test_the_wall_clock_is_never_ahead_of_the_time_of_day(monkeypatch):
    """A commit is stamped with this clock and a record by its producer with the
    time of day: a commit acknowledged before a record is produced must not be
    stamped after it (the pipeline's lag over time compares the two)."""
    import time as _time

    from kcoord.broker.runtime import timers
    now = {"wall": 1_000_000_000_000_000, "mono": 900_000}  # ns: 1,000,000 s and 0.9 ms
    monkeypatch.setattr(timers.time, "time_ns", lambda: now["wall"])
    monkeypatch.setattr(timers.time, "monotonic_ns", lambda: now["mono"])
    clock = timers.WallClock()
    for step in (100_000, 400_000, 1_000_000, 7_300_000):  # both clocks move on alike
        now["wall"] += step
        now["mono"] += step
        assert clock() == now["wall"] // 1_000_000
    monkeypatch.undo()
    real = WallClock()
    for _ in range(10_000):
        assert real() <= _time.time_ns() // 1_000_000
