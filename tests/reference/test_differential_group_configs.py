"""Group configs (resource type GROUP, Kafka 4.x): DescribeConfigs,
IncrementalAlterConfigs and AlterConfigs asked of kcoord and Kafka 4.4 with the
same bytes, answers compared field by field: every config with its source and
synonyms, a group's own values, each of Kafka's refusals with its message,
``validate_only``, ListConfigResources listing the groups that have configs; then
a consumer group (KIP-848) given its own heartbeat interval by
``kafka-configs --entity-type groups`` runs with it on both brokers."""

from __future__ import annotations

import itertools
import time

import pytest

from kcoord.protocol.client import WireClient
from tests.reference import kafka
from tests.reference.differential import Differential, differences

GROUP = 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_ids = itertools.count()


@pytest.fixture
def d(reference_pair) -> Differential:
    kcoord, ref = reference_pair("main")
    return Differential(kcoord.bootstrap, ref.bootstrap, f"Kafka {ref.version}")


def _group() -> str:
    return f"gc-{next(_ids)}"


def describe(d: Differential, group: str, keys=None, version: int = 4) -> dict:
    """Both answers, once Kafka's broker has seen its controller's last change
    (config changes reach it a moment after the controller answers)."""
    body = {"resources": [{"resource_type": GROUP, "resource_name": group,
                           "configuration_keys": keys}],
            "include_synonyms": True, "include_documentation": False}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and differences(*d.ask(32, version, body)):
        time.sleep(0.05)
    return d.same(32, version, body)["results"][0]


def alter(d: Differential, group: str, *ops, validate_only=False, version: int = 1) -> dict:
    body = {"resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only}
    return d.same(44, version, body)["responses"][0]


def _values(result: dict) -> dict[str, tuple[str, int]]:
    return {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_a_group_without_configs_is_described_as_kafka_describes_it(d, version):
    result = describe(d, _group(), version=version)
    assert result["error_code"] == 0
    values = _values(result)
    assert len(values) == 21
    assert values["consumer.session.timeout.ms"] == ("45000", 5)
    assert values["share.isolation.level"] == ("read_uncommitted", 5)
    describe(d, _group(), keys=["consumer.session.timeout.ms", "no.such.config"],
             version=version)


def test_set_describe_and_delete_a_group_s_configs(d):
    group = _group()
    assert alter(d, group, ("consumer.session.timeout.ms", SET, "50000"),
                 ("consumer.heartbeat.interval.ms", SET, "6000"),
                 ("share.isolation.level", SET, "read_committed"))["error_code"] == 0
    values = _values(describe(d, group))
    assert values["consumer.session.timeout.ms"] == ("50000", 8)  # DYNAMIC_GROUP_CONFIG
    assert values["share.isolation.level"] == ("read_committed", 8)
    # a list config is set whole: Kafka appends to and subtracts from none of a group's
    for op in (APPEND, SUBTRACT):
        assert alter(d, group, ("streams.rack.aware.assignment.tags", op, "zone"))["error_code"] \
            == 40
    alter(d, group, ("streams.rack.aware.assignment.tags", SET, "zone,rack"))
    assert _values(describe(d, group))["streams.rack.aware.assignment.tags"] == \
        ("zone,rack", 8)
    # deleted: back to the broker's value; deleting what is not set changes nothing
    alter(d, group, ("consumer.session.timeout.ms", DELETE, None),
          ("share.delivery.count.limit", DELETE, None))
    values = _values(describe(d, group))
    assert values["consumer.session.timeout.ms"] == ("45000", 5)
    assert values["consumer.heartbeat.interval.ms"] == ("6000", 8)


def test_validate_only_and_alter_configs_replacing_the_set(d):
    group = _group()
    alter(d, group, ("consumer.session.timeout.ms", SET, "55000"), validate_only=True)
    assert _values(describe(d, group))["consumer.session.timeout.ms"] == ("45000", 5)
    alter(d, group, ("consumer.session.timeout.ms", SET, "55000"),
          ("streams.num.standby.replicas", SET, "1"))
    body = {"resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
        {"name": "share.delivery.count.limit", "value": "7"}]}], "validate_only": False}
    for version in (0, 1, 2):
        assert d.same(33, version, body)["responses"][0]["error_code"] == 0
    values = _values(describe(d, group))
    assert values["share.delivery.count.limit"] == ("7", 8)
    assert values["consumer.session.timeout.ms"] == ("45000", 5)  # replaced: gone


@pytest.mark.parametrize("ops", [
    [("no.such.config", SET, "1")],
    [("consumer.session.timeout.ms", SET, "abc")],
    [("consumer.session.timeout.ms", SET, "0")],
    [("consumer.session.timeout.ms", SET, "1000")],
    [("consumer.session.timeout.ms", SET, "70000")],
    [("consumer.heartbeat.interval.ms", SET, "60000")],
    [("consumer.heartbeat.interval.ms", SET, "499")],
    [("consumer.assignment.interval.ms", SET, "-1")],
    [("consumer.assignment.interval.ms", SET, "20000")],
    [("share.record.lock.duration.ms", SET, "500")],
    [("share.record.lock.duration.ms", SET, "14999")],
    [("share.delivery.count.limit", SET, "11")],
    [("share.partition.max.record.locks", SET, "5000")],
    [("share.isolation.level", SET, "serializable")],
    [("share.renew.acknowledge.enable", SET, "yes")],
    [("streams.num.standby.replicas", SET, "3")],
    [("streams.rack.aware.assignment.tags", SET, "a,a")],
    [("share.auto.offset.reset", SET, "sometimes")],
    [("share.auto.offset.reset", SET, "EARLIEST")],
    [("share.auto.offset.reset", SET, "by_duration:-PT1H")],
    [("share.auto.offset.reset", SET, "by_duration:xx")],
    [("share.auto.offset.reset", SET, "by_duration:")],
    [("share.auto.offset.reset", SET, "by_duration:PT")],
    [("share.isolation.level", SET, "READ_COMMITTED")],
    [("streams.assignor.name", SET, "")],
    [("streams.assignor.name", SET, "nope")],
    [("streams.session.timeout.ms", SET, "2147483648")],
    [("errors.deadletterqueue.topic.name", SET, "__dlq")],
    [("consumer.session.timeout.ms", APPEND, "1")],
    [("consumer.session.timeout.ms", SET, None)],
    [("consumer.session.timeout.ms", SET, "50000"), ("consumer.session.timeout.ms", SET, "1")],
    [("consumer.session.timeout.ms", 9, "50000")],
], ids=lambda ops: ",".join(f"{n}{o}={v}" for n, o, v in ops))
def test_refusals_as_kafka_4_4(d, ops):
    group = _group()
    result = alter(d, group, *ops)
    assert result["error_code"] != 0
    assert _values(describe(d, group))["consumer.session.timeout.ms"] == ("45000", 5)


def test_accepted_edge_values_as_kafka_4_4(d):
    group = _group()
    for ops in ([("consumer.session.timeout.ms", SET, "60000")],
                [("streams.assignor.name", SET, "sticky")],
                [("share.auto.offset.reset", SET, "earliest")],
                [("share.auto.offset.reset", SET, "by_duration:PT1H")],
                [("share.auto.offset.reset", SET, "by_duration:P1DT2H3M4.5S")],
                [("share.auto.offset.reset", SET, "by_duration:pt0s")],
                [("streams.rack.aware.assignment.tags", SET, "a, b")],
                [("streams.rack.aware.assignment.tags", SET, "")],
                [("errors.deadletterqueue.topic.name", SET, "dlq-topic")],
                [("errors.deadletterqueue.copy.record.enable", SET, "TRUE")],
                [("streams.initial.rebalance.delay.ms", SET, "0")]):
        assert alter(d, group, *ops)["error_code"] == 0, ops
    describe(d, group)


def test_list_config_resources_lists_the_groups_with_configs(d):
    with_configs, without = _group(), _group()
    alter(d, with_configs, ("consumer.session.timeout.ms", SET, "50000"))
    alter(d, without, ("consumer.session.timeout.ms", SET, "50000"),
          validate_only=True)
    for side in (d.kcoord, d.kafka):
        deadline = time.monotonic() + 15  # Kafka's broker learns of it a moment later
        while True:
            with WireClient.to(side.bootstrap) as client:
                listed = client.call(74, 1, {"resource_types": [GROUP]})["config_resources"]
            names = {r["resource_name"] for r in listed}
            if with_configs in names or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert with_configs in names and without not in names, side.name
        assert {r["resource_type"] for r in listed} == {GROUP}


def test_kafka_configs_sets_a_consumer_group_s_heartbeat_interval(d):
    """``kafka-configs --entity-type groups --alter``, then a consumer-protocol
    member of that group is told the group's interval on both brokers."""
    group = _group()
    for side in (d.kcoord, d.kafka):
        out = kafka.run_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server",
                             side.bootstrap, "--entity-type", "groups", "--entity-name", group,
                             "--alter", "--add-config", "consumer.heartbeat.interval.ms=7000")
        assert out.returncode == 0 and "Completed updating config" in out.stdout, out
        described = kafka.run_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server",
                                   side.bootstrap, "--entity-type", "groups",
                                   "--entity-name", group, "--describe")
        assert "consumer.heartbeat.interval.ms=7000" in described.stdout, described
    d.create_topics(f"{group}-t")
    answers = []
    for side in (d.kcoord, d.kafka):
        with WireClient.to(side.bootstrap) as client:
            answers.append(client.call(68, 1, {
                "group_id": group, "member_id": "AAAAAAAAAAAAAAAAAAAAAA", "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": [f"{group}-t"], "server_assignor": None,
                "topic_partitions": []}))
    assert [a["error_code"] for a in answers] == [0, 0]
    assert [a["heartbeat_interval_ms"] for a in answers] == [7000, 7000]


def test_an_empty_group_name_as_kafka_4_4(d):
    alter(d, "", ("consumer.session.timeout.ms", SET, "50000"), validate_only=True)
    describe(d, "", keys=["consumer.session.timeout.ms"])
