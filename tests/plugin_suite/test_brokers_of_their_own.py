"""Tests sharing the session's broker never see each other's names; a test may
ask for a broker of its own, in this process or as a ``kcoord serve`` child,
with kcoord's development defaults or with Kafka's."""

import pytest

INITIAL_DELAY = "group.initial.rebalance.delay.ms"


def _broker_config(kcoord, name):
    answer = kcoord.call(32, 4, {"resources": [
        {"resource_type": 4, "resource_name": "1", "configuration_keys": [name]}],
        "include_synonyms": False, "include_documentation": False})
    return answer["results"][0]["configs"][0]["value"]


@pytest.mark.parametrize("attempt", [1, 2])
def test_the_same_base_name_is_a_different_topic_in_each_test(kcoord, attempt):
    topic = kcoord.create_topic("orders")
    assert kcoord.produce(topic, [b"only this test's"]) == [0]
    assert kcoord.end_offsets(topic) == {(topic, 0): 1}


def test_mine_lists_this_test_s_topics_and_groups_alone(kcoord):
    from kcoord.broker.testing import Kcoord

    with Kcoord(kcoord.bootstrap, prefix="another-test") as other:
        theirs, mine = other.create_topic("orders"), kcoord.create_topic("orders")
        again = kcoord.create_topic("orders")
        for handle, topic in ((other, theirs), (kcoord, mine)):
            handle.call(8, 8, {"group_id": handle.group("readers"),
                               "generation_id_or_member_epoch": -1, "member_id": "",
                               "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                   {"partition_index": 0, "committed_offset": 0,
                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert kcoord.list_topics(mine=True) == sorted([mine, again])
        assert {theirs, mine, again} <= set(kcoord.list_topics())
        assert other.list_topics(mine=True) == [theirs]
        (group,) = kcoord.list_groups(mine=True)
        assert group.startswith(kcoord.prefix) and group in kcoord.list_groups()
        assert other.list_groups(mine=True) != [group]


def test_a_fresh_broker_as_a_child_process(kcoord_factory, kcoord):
    own = kcoord_factory(process=True, overrides={"num.partitions": 3})
    assert own.bootstrap != kcoord.bootstrap
    assert own.broker.proc.poll() is None
    topic = own.create_topic("defaults", partitions=2)
    assert own.produce(topic, ["a", "b"], partition=1) == [0, 1]
    assert _broker_config(own, "num.partitions") == "3"


def test_the_session_broker_has_the_defaults_the_option_chooses(kcoord, pytestconfig):
    """kcoord's development defaults, or Kafka's own under --kcoord-kafka-defaults."""
    kafka_defaults = pytestconfig.getoption("kcoord_kafka_defaults")
    assert _broker_config(kcoord, INITIAL_DELAY) == ("3000" if kafka_defaults else "0")


@pytest.mark.kcoord_kafka_defaults
def test_the_marker_gives_a_broker_with_kafka_s_defaults(kcoord):
    assert _broker_config(kcoord, INITIAL_DELAY) == "3000"
