"""CreatePartitions (key 37) next to Kafka 4.4 and 3.9, at every version: a
topic grows, and every refusal (not an increase, unknown topic, a topic named
twice, assignments of the wrong count, an unknown or repeated broker, an
empty replica list) is answered with Kafka's code and message; validate_only
changes nothing; Metadata then lists the new partitions on both brokers."""

from __future__ import annotations

import time

import pytest

from tests.reference.differential import Differential, differences

REFERENCES = [("main", v) for v in range(4)] + [("legacy", v) for v in range(4)]


def _by_name(answer: dict) -> dict:
    """Kafka answers in an order of its own after the duplicates: compared by name."""
    return {**answer, "results": sorted(answer["results"], key=lambda r: r["name"])}


def _grow(name, count, assignments=None):
    return {"name": name, "count": count, "assignments": assignments}


def _partitions(d: Differential, names, expected: dict) -> None:
    """Both brokers list ``expected`` partition counts (Kafka's metadata cache
    learns of new partitions a little after CreatePartitions answers)."""
    body = {"topics": [{"topic_id": None, "name": n} for n in names],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    deadline = time.monotonic() + 30
    while True:
        ours, theirs = d.ask(3, 12, body)
        counts = [{t["name"]: len(t["partitions"]) for t in a["topics"]} for a in (ours, theirs)]
        if counts[1] == expected or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert counts == [expected, expected]  # kcoord's at once


@pytest.mark.parametrize("which, version", REFERENCES)
def test_create_partitions_answers_as_kafka_does(diff, which, version):
    d = diff(which)
    tag = f"cp-{which}-v{version}"
    names = {k: f"{tag}-{k}" for k in ("grow", "same", "shrink", "dup", "dry", "few",
                                       "ok", "unknown-broker", "twice", "empty")}
    d.create_topics(*names.values(), partitions=2)
    body = {"topics": [
        _grow(names["grow"], 4),
        _grow(names["same"], 2),
        _grow(names["shrink"], 1),
        _grow(f"{tag}-missing", 3),
        _grow(names["dup"], 3), _grow(names["dup"], 4),
        _grow(names["few"], 4, [{"broker_ids": [1]}]),
        _grow(names["ok"], 4, [{"broker_ids": [1]}, {"broker_ids": [1]}]),
        _grow(names["unknown-broker"], 3, [{"broker_ids": [2]}]),
        _grow(names["twice"], 3, [{"broker_ids": [1, 1]}]),
        _grow(names["empty"], 3, [{"broker_ids": []}]),
    ], "timeout_ms": 10000, "validate_only": False}
    ours, theirs = d.ask(37, version, body)
    assert not differences(_by_name(ours), _by_name(theirs))
    assert ours["results"][0]["name"] == theirs["results"][0]["name"] == names["dup"]
    codes = {r["name"]: r["error_code"] for r in ours["results"]}
    assert codes[names["grow"]] == codes[names["ok"]] == 0
    dry = d.same(37, version, {"topics": [_grow(names["dry"], 5)], "timeout_ms": 10000,
                               "validate_only": True})
    assert dry["results"][0]["error_code"] == 0
    _partitions(d, [names["grow"], names["ok"], names["dry"]],
                {names["grow"]: 4, names["ok"]: 4, names["dry"]: 2})


@pytest.mark.parametrize("which, version", [("main", 3), ("main", 0)])  # 3.9 answered -1
def test_too_many_added_partitions_are_refused_as_kafka_refuses_them(diff, which, version):
    """More than 10,000 partitions added by one request: POLICY_VIOLATION for
    each of its topics, validate-only or not, and nothing made; exactly
    10,000 is fine."""
    d = diff(which)
    tag = f"cp-limit-{which}-v{version}"
    names = [f"{tag}-{k}" for k in ("huge", "max", "a", "b", "edge")]
    d.create_topics(*names, partitions=1)
    huge, top, a, b, edge = names
    for validate_only in (True, False):
        for topics in ([_grow(huge, 1_000_000)], [_grow(top, 2**31 - 1)],
                       [_grow(a, 6000), _grow(b, 6000)]):
            answer = d.same(37, version, {"topics": topics, "timeout_ms": 10000,
                                          "validate_only": validate_only})
            assert {r["error_code"] for r in answer["results"]} == {44}
    assert d.same(37, version, {"topics": [_grow(edge, 10_001)], "timeout_ms": 30000,
                                "validate_only": True})["results"][0]["error_code"] == 0
    _partitions(d, [huge, top, a, b], {huge: 1, top: 1, a: 1, b: 1})
