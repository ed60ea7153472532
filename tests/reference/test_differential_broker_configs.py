"""Dynamic broker configs: IncrementalAlterConfigs and AlterConfigs of this
broker (its id) and of the cluster-wide default (""), asked of kcoord and of a
Kafka 4.4 of its own (the scratch reference: these change a broker for every
test after), answers compared field by field: DescribeConfigs of the broker, of
the default and of a topic showing each level as a synonym, Kafka's refusals
with their messages, ``validate_only``; then ``kafka-configs --entity-type
brokers`` prints the same on both. Every change is undone at the end."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.reference import kafka
from tests.reference.differential import Differential, differences

BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# Dynamic on Kafka and harmless to the tests that share the reference broker.
KEYS = ["log.cleaner.delete.retention.ms", "producer.id.expiration.ms", "min.insync.replicas", "log.cleanup.policy", "log.retention.ms",
        "log.index.interval.bytes"]

# Names no broker knows: custom configs, kept and listed without their values.
CUSTOM = ["no.such", "my.custom.both", "my.custom.default"]


@pytest.fixture
def d(scratch_kafka, make_broker):
    kcoord = make_broker(overrides=dict(kafka.KCOORD_STATIC_PROPERTIES))
    differential = Differential(kcoord.bootstrap, scratch_kafka.bootstrap, "Kafka 4.4")
    yield differential
    for name in ("1", ""):  # undo every change of the test on Kafka
        differential.ask(44, 1, _body(name, *[(k, DELETE, None) for k in KEYS + CUSTOM
                                              if k != "min.insync.replicas"]))


def _body(name, *ops, validate_only=False):
    return {"resources": [{"resource_type": BROKER, "resource_name": name, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only}


def alter(d: Differential, name: str, *ops, validate_only=False) -> dict:
    return d.same(44, 1, _body(name, *ops, validate_only=validate_only))["responses"][0]


def describe(d: Differential, resources, version: int = 4) -> list[dict]:
    """Both answers, once Kafka's broker has seen its controller's last change."""
    body = {"resources": [{"resource_type": t, "resource_name": n, "configuration_keys": keys}
                          for t, n, keys in resources],
            "include_synonyms": True, "include_documentation": False}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and differences(*d.ask(32, version, body)):
        time.sleep(0.05)
    return d.same(32, version, body)["results"]


def _values(result: dict) -> dict[str, tuple[str, int]]:
    return {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


def test_dynamic_values_per_broker_and_cluster_wide_as_kafka_4_4(d):
    d.create_topics("dyn-topic")
    assert alter(d, "", ("log.cleaner.delete.retention.ms", SET, "3600000"),
                 ("log.retention.ms", SET, "700000000"),
                 ("log.cleanup.policy", APPEND, "compact"))["error_code"] == 0
    assert alter(d, "1", ("log.retention.ms", SET, "800000000"),
                 ("producer.id.expiration.ms", SET, "90000000"))["error_code"] == 0
    topic_keys = ["retention.ms", "delete.retention.ms", "cleanup.policy", "segment.bytes"]
    broker, default, topic = describe(d, [(BROKER, "1", KEYS), (BROKER, "", KEYS),
                                          (2, "dyn-topic", topic_keys)])
    assert _values(broker)["log.retention.ms"] == ("800000000", 2)  # DYNAMIC_BROKER_CONFIG
    assert _values(broker)["log.cleaner.delete.retention.ms"] == ("3600000", 3)
    assert _values(default)["log.cleanup.policy"] == ("delete,compact", 3)
    assert _values(topic)["retention.ms"] == ("800000000", 2)
    for version in (1, 2, 3):
        describe(d, [(BROKER, "1", KEYS), (BROKER, "", KEYS)], version=version)
    # deleted: the levels below come back
    alter(d, "1", ("log.retention.ms", DELETE, None))
    broker, topic = describe(d, [(BROKER, "1", KEYS), (2, "dyn-topic", topic_keys)])
    assert _values(topic)["retention.ms"] == ("700000000", 3)
    # AlterConfigs replaces a level's whole set; the cluster's min.insync.replicas
    # cannot go (eligible leader replicas)
    body = {"resources": [{"resource_type": BROKER, "resource_name": "", "configs": [
        {"name": "log.index.interval.bytes", "value": "8192"}]}], "validate_only": False}
    assert d.same(33, 2, body)["responses"][0]["error_code"] == 40
    body["resources"][0]["configs"].append({"name": "min.insync.replicas", "value": "1"})
    assert d.same(33, 2, body)["responses"][0]["error_code"] == 0
    (default,) = describe(d, [(BROKER, "", KEYS)])
    assert _values(default) == {"log.index.interval.bytes": ("8192", 3),
                                "min.insync.replicas": ("1", 3)}


@pytest.mark.parametrize("name", ["1", ""])
@pytest.mark.parametrize("ops", [
    [("node.id", SET, "3")],
    [("log.dirs", SET, "/elsewhere")],
    [("auto.create.topics.enable", SET, "false")],
    [("log.retention.ms", SET, "abc")],
    [("log.segment.bytes", SET, "100")],
    [("log.cleaner.min.cleanable.ratio", SET, "x")],
    [("log.cleanup.policy", SET, "sometimes")],
    [("log.retention.ms", SET, None)],
    [("log.retention.ms", APPEND, "1")],
    [("log.retention.ms", SUBTRACT, "1")],
    [("log.retention.ms", SET, "1"), ("log.retention.ms", SET, "2")],
    [("min.insync.replicas", DELETE, None)],
], ids=lambda ops: ",".join(f"{n}{o}={v}" for n, o, v in ops) if isinstance(ops, list) else ops)
def test_refusals_as_kafka_4_4(d, name, ops):
    assert alter(d, name, *ops)["error_code"] != 0


def test_other_changes_as_kafka_4_4(d):
    alter(d, "2", ("log.retention.ms", SET, "1000"))  # another broker id
    alter(d, "1", ("no.such", SET, "1"))  # a custom config: kept
    alter(d, "", ("log.retention.ms", SET, "900000000"), validate_only=True)
    alter(d, "1", ("log.segment.bytes", SET, "1048576"), validate_only=True)
    alter(d, "1", ("log.retention.ms", DELETE, None))  # nothing to delete
    alter(d, "1", ("min.insync.replicas", SET, "1"))  # refused per broker (ELR)
    alter(d, "", ("min.insync.replicas", SET, "1"))
    describe(d, [(BROKER, "", KEYS), (BROKER, "1", KEYS)])


def test_custom_configs_are_listed_without_their_values_as_kafka_4_4(d):
    alter(d, "1", ("no.such", SET, "secret"), ("my.custom.both", SET, "a"))
    alter(d, "", ("my.custom.both", SET, "b"), ("my.custom.default", SET, "c"))
    # asked by name: the same answers, synonyms included
    broker, default = describe(d, [(BROKER, "1", CUSTOM), (BROKER, "", CUSTOM)])
    assert [(c["name"], c["value"], c["config_source"], c["is_sensitive"], c["read_only"])
            for c in broker["configs"]] == [("my.custom.both", None, 2, True, True),
                                            ("my.custom.default", None, 3, True, True),
                                            ("no.such", None, 2, True, True)]
    assert [c["name"] for c in default["configs"]] == ["my.custom.both", "my.custom.default"]
    # in the whole listing of each level (whose other entries are kcoord's
    # own: docs/deviations.md), the same entries
    ours, theirs = d.ask(32, 4, {"resources": [
        {"resource_type": BROKER, "resource_name": n, "configuration_keys": None}
        for n in ("1", "")], "include_synonyms": True, "include_documentation": False})
    for side in (ours, theirs):
        assert [[c for c in r["configs"] if c["name"] in CUSTOM] for r in side["results"]] == [
            broker["configs"], default["configs"]]


@pytest.mark.parametrize("name", ["01", "+1", "x", " 1", "-1", "+7", "007", "2147483648"])
def test_broker_ids_read_as_kafka_reads_them(d, name):
    """A broker id as Integer.parseInt reads it (01 and +1 are this broker), after
    the duplicate keys and null values, before the operations; another id is
    named as it was written."""
    alter(d, name, ("log.retention.ms", SET, "1000"), validate_only=True)
    alter(d, name, ("log.retention.ms", SET, None), ("log.flush.ms", SET, None),
          validate_only=True)
    alter(d, name, ("log.retention.ms", 9, "1"), validate_only=True)
    alter(d, name, ("log.retention.ms", 9, "1"), ("log.flush.ms", SET, None),
          validate_only=True)
    alter(d, name, ("log.retention.ms", SET, None), ("log.retention.ms", SET, None),
          validate_only=True)


def test_a_broker_written_otherwise_changes_nothing_as_on_kafka(d):
    """01 is this broker to the checks, but Kafka's controller keeps the change
    under "01", which no broker applies: accepted, broker 1 unchanged."""
    try:
        assert alter(d, "01", ("log.retention.ms", SET, "1234567"))["error_code"] == 0
        time.sleep(1)  # what Kafka's broker would have seen of it by now
        (broker,) = describe(d, [(BROKER, "1", KEYS)])
        assert _values(broker)["log.retention.ms"][1] == 5  # DEFAULT_CONFIG
    finally:
        d.ask(44, 1, _body("01", ("log.retention.ms", DELETE, None)))


@pytest.mark.parametrize("api", [33, 44])
@pytest.mark.parametrize("kind", [8, 99])
def test_duplicates_and_nulls_before_the_resource_type_as_kafka_4_4(d, api, kind):
    for configs in ([("root", SET, None)], [("root", SET, "1"), ("root", SET, "1")]):
        body = {"resources": [{"resource_type": kind, "resource_name": "1", "configs": [
            {"name": n, "value": v, **({"config_operation": op} if api == 44 else {})}
            for n, op, v in configs]}], "validate_only": True}
        assert d.same(api, 1, body)["responses"][0]["error_code"] == 42


@pytest.mark.parametrize("resource", [(2, "ops-topic"), (8, "1"), (8, "x"), (BROKER, "")])
@pytest.mark.parametrize("ops", [
    [("retention.ms", SET, None), ("segment.ms", SET, None)],
    [("retention.ms", 9, None), ("segment.ms", 9, None)],
    [("retention.ms", DELETE, None), ("segment.ms", 9, None)],
    [("retention.ms", 9, "1")],
    [("retention.ms", 4, "1"), ("segment.ms", SET, "1")],
    [("retention.ms", -1, "1")],
], ids=lambda ops: ",".join(f"{n}{o}={v}" for n, o, v in ops) if isinstance(ops, list) else ops)
def test_null_values_and_unknown_operations_as_kafka_4_4(d, resource, ops):
    """Every null value named at once; an unknown operation refused in each
    resource type's words (a topic's by the controller, without a message)."""
    kind, name = resource
    if kind == 2:
        name = f"{name}-{uuid.uuid4().hex[:8]}"
        d.create_topics(name)
    if kind == 8:
        ops = [("root" if n == "retention.ms" else "kafka", o, v) for n, o, v in ops]
    body = {"resources": [{"resource_type": kind, "resource_name": name, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": True}
    assert d.same(44, 1, body)["responses"][0]["error_code"] != 0


def test_kafka_configs_alters_the_brokers_as_on_kafka(d):
    """``kafka-configs --entity-type brokers`` (a broker and ``--entity-default``):
    the same output on both, the change applied."""
    def session(bootstrap: str) -> list[str]:
        out = []
        for entity in (["--entity-default"], ["--entity-name", "1"]):
            for action in (["--alter", "--add-config",
                            "log.cleaner.delete.retention.ms=7200000"],
                           ["--describe"],
                           ["--alter", "--delete-config", "log.cleaner.delete.retention.ms"],
                           ["--alter", "--add-config", "node.id=5"]):
                run = kafka.run_tool("org.apache.kafka.tools.ConfigCommand",
                                     "--bootstrap-server", bootstrap, "--entity-type",
                                     "brokers", *entity, *action)
                # (a moment for Kafka's broker to learn of its controller's change)
                time.sleep(1 if action[0] == "--alter" else 0)
                out.append((run.returncode, run.stdout.strip(),
                            run.stderr.replace(bootstrap, "<bootstrap>").strip().splitlines()[:1]))
        return out
    ours, theirs = session(d.kcoord.bootstrap), session(d.kafka.bootstrap)
    assert "log.cleaner.delete.retention.ms=7200000" in ours[1][1]
    assert ours == theirs
