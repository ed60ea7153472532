"""AlterConfigs and IncrementalAlterConfigs on the raw wire, against kcoord and
Apache Kafka 4.4 at once, answers compared field by field: a topic's configs
set, deleted, appended to and subtracted from, replaced whole, validated only,
and every error branch a request can reach; DescribeConfigs then shows the
same values and sources on both."""

from __future__ import annotations

import itertools

import pytest

from tests.reference.differential import Differential

_names = itertools.count()
KEYS = ["retention.ms", "cleanup.policy", "segment.ms", "max.message.bytes"]


@pytest.fixture
def d(diff) -> Differential:
    return diff("main")


def _topics(d: Differential, *names: str) -> None:
    d.create_topics(*names)


def res(name, *configs, rtype=2):
    return {"resource_type": rtype, "resource_name": name,
            "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in configs]}


def inc(*resources, validate_only=False):
    return {"resources": list(resources), "validate_only": validate_only}


def alter(*resources, validate_only=False):
    return {"resources": [{"resource_type": r["resource_type"],
                           "resource_name": r["resource_name"],
                           "configs": [{"name": c["name"], "value": c["value"]}
                                       for c in r["configs"]]} for r in resources],
            "validate_only": validate_only}


def describe(d: Differential, *names: str) -> dict:
    """DescribeConfigs of the topics on both; Kafka's brokers learn of a change
    through the metadata log, a little after it is answered (kcoord's answer is
    the one right after its change)."""
    return d.same(32, 4, {"resources": [
        {"resource_type": 2, "resource_name": n, "configuration_keys": KEYS} for n in names],
        "include_synonyms": True, "include_documentation": False}, settle_s=10)


def _values(described: dict) -> dict:
    return {r["resource_name"]: {c["name"]: (c["value"], c["config_source"]) for c in r["configs"]}
            for r in described["results"]}


def test_a_list_value_given_twice_is_kept_once(d):
    """Kafka's ConfigDef keeps each value of a list once, in the order first
    given, at creation and at a change (what it was sent is echoed back)."""
    n = next(_names)
    given = {f"dup-{n}-{i}": value for i, value in enumerate(
        ["compact,delete,compact", "delete,delete", " delete , compact , delete "])}
    for name, value in given.items():
        created = d.same(19, 5, {"topics": [{"name": name, "num_partitions": 1,
                                             "replication_factor": 1, "assignments": [],
                                             "configs": [{"name": "cleanup.policy",
                                                          "value": value}]}],
                                 "timeout_ms": 10000, "validate_only": False})
        assert created["topics"][0]["error_code"] == 0
    values = _values(describe(d, *given))
    assert [values[name]["cleanup.policy"] for name in given] == [
        ("compact,delete", 1), ("delete", 1), ("delete,compact", 1)]
    t = f"dup-{n}-set"
    _topics(d, t)
    d.same(44, 1, inc(res(t, ("cleanup.policy", 0, "delete,compact,delete"))))
    assert _values(describe(d, t))[t]["cleanup.policy"] == ("delete,compact", 1)


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs_changes_a_topic_as_on_kafka(d, version):
    n = next(_names)
    t = f"iac-{version}-{n}"
    _topics(d, t)
    ok = d.same(44, version, inc(res(t, ("retention.ms", 0, "123456"),
                                     ("max.message.bytes", 0, "2000000"))))
    assert ok["responses"][0]["error_code"] == 0
    assert _values(describe(d, t))[t]["retention.ms"] == ("123456", 1)
    # validate_only changes nothing
    d.same(44, version, inc(res(t, ("retention.ms", 0, "999")), validate_only=True))
    assert _values(describe(d, t))[t]["retention.ms"] == ("123456", 1)
    # a list config: appended to from its default, then subtracted from
    d.same(44, version, inc(res(t, ("cleanup.policy", 2, "compact"))))
    assert _values(describe(d, t))[t]["cleanup.policy"] == ("delete,compact", 1)
    # a value already in the list is not appended twice
    d.same(44, version, inc(res(t, ("cleanup.policy", 2, "compact"))))
    assert _values(describe(d, t))[t]["cleanup.policy"] == ("delete,compact", 1)
    d.same(44, version, inc(res(t, ("cleanup.policy", 3, "delete"))))
    assert _values(describe(d, t))[t]["cleanup.policy"] == ("compact", 1)
    # deleted: back to the broker's default
    d.same(44, version, inc(res(t, ("retention.ms", 1, None), ("no.such.config", 1, None))))
    assert _values(describe(d, t))[t]["retention.ms"][1] != 1


def test_incremental_alter_configs_refuses_as_kafka_does(d):
    n = next(_names)
    t, other = f"iacx-{n}", f"iacy-{n}"
    _topics(d, t, other)
    for body in (
        inc(res("no-such-topic", ("retention.ms", 0, "1000"))),
        inc(res("bad/name", ("retention.ms", 0, "1000"))),
        inc(res(t, ("foo.bar", 0, "1"))),
        inc(res(t, ("retention.ms", 0, "abc"))),
        inc(res(t, ("retention.ms", 0, None))),
        inc(res(t, ("retention.ms", 0, "1"), ("retention.ms", 0, "2"))),
        inc(res(t, ("retention.ms", 2, "1"))),
        inc(res(t, ("retention.ms", 3, "1"))),
        inc(res(t, ("retention.ms", 7, "1"))),
        inc(res(t, ("cleanup.policy", 0, "sideways"))),
        inc(res(t, ("min.insync.replicas", 0, "0"))),
        inc(res(t, ("remote.storage.enable", 0, "true"))),
        inc(res(other, ("retention.ms", 0, "5")), res(other, ("retention.ms", 0, "6"))),
        inc(res("7", ("log.retention.ms", 0, "1000"), rtype=4)),
        inc(res("x", ("a", 0, "1"), rtype=9)),
        # one resource refused, the other changed
        inc(res(t, ("foo.bar", 0, "1")), res(other, ("retention.ms", 0, "4242"))),
    ):
        d.same(44, 1, body)
    values = _values(describe(d, t, other))
    assert values[other]["retention.ms"] == ("4242", 1)
    assert values[t]["retention.ms"][1] != 1


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_a_topic_s_configs_as_on_kafka(d, version):
    n = next(_names)
    t = f"ac-{version}-{n}"
    _topics(d, t)
    d.same(33, version, alter(res(t, ("retention.ms", 0, "7000"), ("cleanup.policy", 0, "compact"))))
    first = _values(describe(d, t))[t]
    assert first["retention.ms"] == ("7000", 1) and first["cleanup.policy"] == ("compact", 1)
    d.same(33, version, alter(res(t, ("segment.ms", 0, "100000"))))
    second = _values(describe(d, t))[t]
    assert second["segment.ms"] == ("100000", 1)
    assert second["retention.ms"][1] != 1 and second["cleanup.policy"][1] != 1
    for body in (alter(res(t, ("foo", 0, "7"))),
                 alter(res(t, ("retention.ms", 0, "7"), ("retention.ms", 0, "8"))),
                 alter(res(t, ("retention.ms", 0, None))),
                 alter(res("no-such-topic", ("retention.ms", 0, "7"))),
                 alter(res(t, ("retention.ms", 0, "1")), validate_only=True)):
        d.same(33, version, body)
    assert _values(describe(d, t))[t] == second
