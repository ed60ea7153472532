"""The fetch session cache: ids, epochs, and what happens when it is full."""

from __future__ import annotations

import random

from kcoord.broker.runtime.timers import ManualClock
from kcoord.broker.topics.fetch_sessions import INT32_MAX, FetchSessionCache, next_epoch


def test_epochs_start_at_one_and_wrap_to_one():
    assert next_epoch(0) == 1 and next_epoch(1) == 2
    assert next_epoch(INT32_MAX) == 1


def test_a_full_cache_evicts_only_sessions_idle_long_enough():
    clock = ManualClock(0)  # the cache counts in seconds
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000, clock=clock, rng=random.Random(1))
    first = cache.create(False)
    second = cache.create(False)
    assert first.session_id != second.session_id and 0 < first.session_id <= INT32_MAX
    assert first.epoch == 1
    clock.now = 0.9
    assert cache.create(False) is None  # both still in use: no session, full fetches go on
    cache.touch(first)  # first is now the most recently used
    clock.now = 1.5
    third = cache.create(True)
    assert third is not None and third.uses_topic_ids
    assert cache.get(second.session_id) is None  # the least recently used one went
    assert cache.get(first.session_id) is first and len(cache) == 2


def test_no_sessions_when_the_cache_has_no_slots():
    assert FetchSessionCache(max_slots=0).create(False) is None
