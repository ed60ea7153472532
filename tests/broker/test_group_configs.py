"""A group's own configs (resource type GROUP): kept across a restart and a
kill, applied to the consumer group of that id (its members' session timeout,
heartbeat interval and assignment interval, on the coordinator core with a
manual clock), clamped to the broker's bounds as Kafka clamps them.  What
Kafka answers for them is compared in
``tests/reference/test_differential_group_configs.py``."""

from __future__ import annotations

from kcoord.broker.config import BrokerConfig
import pytest

from kcoord.broker.groups.group_configs import ConfigFile, GroupConfigError, check, effective
from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode as E
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


@pytest.mark.parametrize("configs,message", [
    ({"nope": "1"}, "Unknown group config name: nope"),
    ({"consumer.session.timeout.ms": "x"},
     "Invalid value x for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ({"consumer.session.timeout.ms": "0"}, "Invalid value 0 for configuration "
                                           "consumer.session.timeout.ms: Value must be at least 1"),
    ({"consumer.session.timeout.ms": "44999"},
     "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ({"consumer.session.timeout.ms": "60001"},
     "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ({"streams.num.standby.replicas": "3"},
     "streams.num.standby.replicas must be less than or equal to 2"),
    ({"streams.assignor.name": "other"}, "streams.assignor.name 'other' is not a registered "
                                         "task assignor. Registered assignors are: [sticky]."),
    ({"streams.rack.aware.assignment.tags": "a,b,a"},
     "streams.rack.aware.assignment.tags must not contain duplicate tag keys."),
    ({"errors.deadletterqueue.topic.name": "__x"},
     "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"),
    ({"share.auto.offset.reset": "by_duration:-P1D"}, "Invalid value by_duration:-P1D for "
     "configuration share.auto.offset.reset: Invalid value `by_duration:-P1D` for configuration "
     "share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
     "'by_duration:<PnDTnHnMn.nS>'."),
])
def test_kafka_s_refusals_with_its_messages(configs, message):
    """The messages Kafka 4.4 answers (compared with it in the differential tests)."""
    with pytest.raises(GroupConfigError) as refused:
        check(BrokerConfig.build(), configs)
    assert str(refused.value) == message


def test_a_session_not_above_the_heartbeat_is_refused_where_the_bounds_allow_it():
    config = BrokerConfig.build({"group.consumer.max.heartbeat.interval.ms": "50000"})
    with pytest.raises(GroupConfigError, match="consumer.session.timeout.ms must be greater "
                                               "than consumer.heartbeat.interval.ms"):
        check(config, {"consumer.heartbeat.interval.ms": "45000"})
    assert check(config, {"consumer.heartbeat.interval.ms": "44999"})


@pytest.mark.parametrize("value,accepted", [
    ("earliest", True), ("latest", True), ("by_duration:PT0S", True),
    ("by_duration:P1DT2H3M4.5S", True), ("by_duration:pt1h", True), ("by_duration:PT-1S", False),
    ("by_duration:PT", False), ("by_duration:P", False), ("by_duration:1H", False),
    ("Latest", False), ("none", False),
    # java.time.Duration's sum of signed parts: negative only as a whole
    ("by_duration:PT1H-3599S", True), ("by_duration:PT1H-3601S", False),
    ("by_duration:P1DT-86401S", False), ("by_duration:P1DT-86399S", True),
    ("by_duration:PT1M-61S", False), ("by_duration:PT1M-59S", True),
    ("by_duration:PT-0.5S", False), ("by_duration:PT0.5S", True),
    ("by_duration:PT1S-1.5S", False), ("by_duration:-PT1S", False), ("by_duration:-PT-1S", True),
    ("by_duration:+PT1S", True), ("by_duration:-PT0S", True),
    ("by_duration:-PT0.000000001S", False),
])
def test_share_auto_offset_reset_as_kafka_parses_it(value, accepted):
    try:
        check(BrokerConfig.build(), {"share.auto.offset.reset": value})
    except GroupConfigError:
        assert not accepted
    else:
        assert accepted


def test_bounds_are_inclusive():
    config = BrokerConfig.build()
    for value in ("45000", "60000"):
        assert check(config, {"consumer.session.timeout.ms": value})
    assert check(config, {"streams.num.standby.replicas": "2"})


def test_the_session_is_checked_against_the_heartbeat_the_group_will_have():
    config = BrokerConfig.build({"group.consumer.session.timeout.ms": "50000",
                                 "group.consumer.max.heartbeat.interval.ms": "50000",
                                 "group.consumer.heartbeat.interval.ms": "46000"})
    # the group's session alone, against the broker's heartbeat interval
    with pytest.raises(GroupConfigError, match="must be greater than"):
        check(config, {"consumer.session.timeout.ms": "46000"})
    # both the group's own: the broker's session (50 s) plays no part
    assert check(config, {"consumer.session.timeout.ms": "55000",
                          "consumer.heartbeat.interval.ms": "50000"})


def test_settings_without_a_broker_property_fall_back_to_kafka_s_defaults(tmp_path):
    node = BrokerThread(tmp_path).start()
    try:
        with WireClient.to(node.bootstrap) as client:
            answer = client.call(32, 4, {"resources": [{
                "resource_type": GROUP, "resource_name": "any", "configuration_keys": [
                    "share.session.timeout.ms", "streams.rack.aware.assignment.tags"]}],
                "include_synonyms": True, "include_documentation": False})
    finally:
        node.stop()
    entries = {c["name"]: (c["value"], [(s["name"], s["value"], s["source"])
                                        for s in c["synonyms"]])
               for c in answer["results"][0]["configs"]}
    assert entries == {
        "share.session.timeout.ms": ("45000", [("group.share.session.timeout.ms", "45000", 5)]),
        "streams.rack.aware.assignment.tags": (
            "", [("group.streams.rack.aware.assignment.tags", "", 5)])}


def test_stored_configs_that_no_longer_parse_leave_the_broker_s_values(tmp_path):
    """A value a kcoord once kept that this one refuses (hand-edited, or a rule
    tightened since): the broker starts, and the static value applies."""
    from kcoord.broker.app import BROKER_CONFIG_FILE

    ConfigFile(tmp_path).save({"g": {"consumer.session.timeout.ms": "soon"}})
    ConfigFile(tmp_path, BROKER_CONFIG_FILE).save({
        "": {"log.retention.ms": "never", "min.insync.replicas": "1"},
        "broker": {"log.cleaner.delete.retention.ms": "3600000"}})
    node = BrokerThread(tmp_path).start()
    try:
        assert node.broker.groups.config.session_timeout_ms("g") == 45_000
        assert node.broker.config.retention_ms == 7 * 24 * 3_600_000
        assert node.broker.config["log.cleaner.delete.retention.ms"] == 3_600_000
    finally:
        node.stop()
