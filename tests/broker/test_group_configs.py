"""A group's own configs (resource type GROUP): kept across a restart and a
kill, applied to the consumer group of that id (its members' session timeout,
heartbeat interval and assignment interval, on the coordinator core with a
manual clock), clamped to the broker's bounds as Kafka clamps them.  What
Kafka answers for them is compared in
``tests/reference/test_differential_group_configs.py``."""

from __future__ import annotations

from broker.config import BrokerConfig
from broker.groups.group_configs import ConfigFile, check, effective
from protocol.client import WireClient
from protocol.errors import ErrorCode as E
from tests.broker.test_consumer_groups import group, harness
from tests.support import BrokerProcess, BrokerThread

GROUP = 32


def _alter(bootstrap: str, group_id: str, **configs) -> int:
    with WireClient.to(bootstrap) as client:
        answer = client.call(44, 1, {"resources": [{
            "resource_type": GROUP, "resource_name": group_id,
            "configs": [{"name": n.replace("_", "."), "config_operation": 0, "value": v}
                        for n, v in configs.items()]}], "validate_only": False})
    return answer["responses"][0]["error_code"]


def _own(bootstrap: str, group_id: str) -> dict[str, str]:
    with WireClient.to(bootstrap) as client:
        answer = client.call(32, 4, {"resources": [{
            "resource_type": GROUP, "resource_name": group_id, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    return {c["name"]: c["value"] for c in answer["results"][0]["configs"]
            if c["config_source"] == 8}


def test_a_group_s_configs_survive_a_restart(tmp_path):
    node = BrokerThread(tmp_path).start()
    try:
        assert _alter(node.bootstrap, "orders", consumer_session_timeout_ms="50000") == 0
        assert _alter(node.bootstrap, "gone", consumer_session_timeout_ms="50000") == 0
        with WireClient.to(node.bootstrap) as client:  # deleted: nothing left of it
            client.call(44, 1, {"resources": [{
                "resource_type": GROUP, "resource_name": "gone", "configs": [
                    {"name": "consumer.session.timeout.ms", "config_operation": 1,
                     "value": None}]}], "validate_only": False})
    finally:
        node.stop()
    again = BrokerThread(tmp_path).start()
    try:
        assert _own(again.bootstrap, "orders") == {"consumer.session.timeout.ms": "50000"}
        with WireClient.to(again.bootstrap) as client:
            listed = client.call(74, 1, {"resource_types": [GROUP]})["config_resources"]
        assert [r["resource_name"] for r in listed] == ["orders"]
        # what the members of that consumer group run with
        assert again.broker.groups.config.session_timeout_ms("orders") == 50_000
        assert again.broker.groups.config.session_timeout_ms("other") == 45_000
    finally:
        again.stop()


def test_an_acknowledged_group_config_survives_a_kill(tmp_path):
    process = BrokerProcess(tmp_path).start()
    try:
        assert _alter(process.bootstrap, "billing", consumer_heartbeat_interval_ms="7000") == 0
    finally:
        process.kill()  # SIGKILL
    assert ConfigFile(tmp_path).load() == {
        "billing": {"consumer.heartbeat.interval.ms": "7000"}}


def test_a_consumer_group_runs_with_its_own_session_timeout_and_heartbeat_interval():
    h = harness(consumer_session_timeout_ms=45_000, consumer_heartbeat_interval_ms=5_000,
                per_group={"g": {"consumer.session.timeout.ms": 60_000,
                                 "consumer.heartbeat.interval.ms": 9_000}})
    assert h.consumer_heartbeat(member="m1")["heartbeat_interval_ms"] == 9_000
    h.consumer_heartbeat(member="m2")
    h.advance(50_000)  # beyond the broker's 45 s, within the group's 60 s
    h.settle()
    assert set(group(h).members) == {"m1", "m2"}
    h.advance(11_000)
    h.settle()
    assert not group(h).members
    # another group keeps the broker's settings
    assert h.consumer_heartbeat(member="x1", group="other")["heartbeat_interval_ms"] == 5_000
    h.advance(46_000)
    h.settle()
    assert not group(h, "other").members
    assert h.consumer_heartbeat(member="m1", epoch=2)["error_code"] == E.UNKNOWN_MEMBER_ID


def test_a_group_s_assignment_interval_delays_its_next_assignment():
    h = harness(consumer_assignment_interval_ms=0,
                per_group={"g": {"consumer.assignment.interval.ms": 10_000}})
    h.consumer_heartbeat(member="m1")
    h.advance(1_000)
    second = h.consumer_heartbeat(member="m2")
    # a new member moves the group epoch; the target waits for the group's interval
    assert group(h).assignment_epoch < group(h).group_epoch
    assert group(h).state.value == "Assigning"
    h.advance(10_000)
    again = h.consumer_heartbeat(member="m2", epoch=second["member_epoch"], owned=[])
    assert again["error_code"] == E.NONE
    assert group(h).assignment_epoch == group(h).group_epoch
    # another group gets its target at once (the broker's interval: 0)
    h.consumer_heartbeat(group="other", member="x1")
    h.consumer_heartbeat(group="other", member="x2")
    assert group(h, "other").assignment_epoch == group(h, "other").group_epoch


def test_values_are_clamped_to_the_broker_s_current_bounds():
    config = BrokerConfig.build({"group.consumer.max.session.timeout.ms": "50000"})
    own = {"consumer.session.timeout.ms": "60000", "consumer.heartbeat.interval.ms": "400"}
    assert effective(config, own, "consumer.session.timeout.ms") == 50_000
    assert effective(config, own, "consumer.heartbeat.interval.ms") == 500  # the dev minimum
    assert effective(config, {}, "consumer.session.timeout.ms") == 45_000
    assert check(config, {"consumer.session.timeout.ms": "50000"}) == {
        "consumer.session.timeout.ms": 50_000}
