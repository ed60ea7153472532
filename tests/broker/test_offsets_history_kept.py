"""Under the development defaults ``__consumer_offsets`` is created with a day of
``min.compaction.lag.ms``: the cleaner leaves superseded offset commits alone
until they are a day old, so ``kcoord pipeline history`` shows a working day of
commits on a laptop broker, however busy; then compaction removes them as
usual.  With ``--kafka-defaults`` the topic is created as Kafka creates it."""

from __future__ import annotations

import time

import pytest

from kcoord.broker.groups.loader import offsets_records
from kcoord.broker.testing import Kcoord
from kcoord.protocol.group_records import offset_commit_key
from tests.support import BrokerThread

DAY_MS = 86_400_000
COMMITS = 300


def _commit_storm(node: BrokerThread) -> tuple[str, str, int]:
    """COMMITS commits of one key by a simple group; the group, the topic and the
    group's ``__consumer_offsets`` partition."""
    with Kcoord(node.bootstrap) as k:
        topic = k.create_topic("history")
        group = k.group("history")
        for n in range(COMMITS):
            answer = k.call(8, 8, {"group_id": group, "generation_id_or_member_epoch": -1,
                                   "member_id": "", "group_instance_id": None, "topics": [
                                       {"name": topic, "partitions": [
                                           {"partition_index": 0, "committed_offset": n,
                                            "committed_leader_epoch": -1,
                                            "committed_metadata": "m" * 40}]}]})
            assert answer["topics"][0]["partitions"][0]["error_code"] == 0
    return group, topic, node.broker.groups.partition_for(group)


def _commits_in_store(node: BrokerThread, group: str, topic: str, partition: int) -> int:
    """How many commits of the group's one key ``__consumer_offsets`` holds."""
    key = offset_commit_key(group, topic, 0)

    def count():
        plog = node.broker.logs.get("__consumer_offsets", partition)
        return sum(1 for record in offsets_records(plog)
                   if isinstance(record, tuple) and record[0] == key)
    return node.call(count)


def _clean(node: BrokerThread, now_ms: int) -> None:
    node.call(lambda: node.broker.logs.run_cleaner(now_ms))


@pytest.mark.parametrize("overrides, kept_now", [
    ({}, True),  # the development default: a day
    ({"kcoord.offsets.topic.min.compaction.lag.ms": "0"}, False),  # as Kafka creates it
])
def test_superseded_commits_stay_until_they_are_a_day_old(tmp_path, overrides, kept_now):
    node = BrokerThread(tmp_path, overrides={
        "offsets.topic.segment.bytes": "8192",  # segments of a few dozen commits
        "log.cleaner.backoff.ms": "3600000",  # the test runs the cleaner itself
        **overrides}).start()
    try:
        group, topic, partition = _commit_storm(node)
        stored = _commits_in_store(node, group, topic, partition)
        assert stored >= COMMITS  # every commit was written
        now = int(time.time() * 1000)
        _clean(node, now)
        if kept_now:
            assert _commits_in_store(node, group, topic, partition) == stored
        else:
            assert _commits_in_store(node, group, topic, partition) < stored / 2
        _clean(node, now + DAY_MS + 60_000)  # a day later the cleaner compacts them
        assert _commits_in_store(node, group, topic, partition) < stored / 2
        with Kcoord(node.bootstrap) as k:
            assert list(k.committed(group).values()) == [COMMITS - 1]
    finally:
        node.stop()


def test_the_lag_is_a_topic_config_kafka_s_tools_show_and_change(tmp_path):
    def lag(node):
        with Kcoord(node.bootstrap) as k:
            answer = k.call(32, 4, {"resources": [
                {"resource_type": 2, "resource_name": "__consumer_offsets",
                 "configuration_keys": ["min.compaction.lag.ms"]}],
                "include_synonyms": False, "include_documentation": False})
        (entry,) = answer["results"][0]["configs"]
        return entry["value"], entry["config_source"]

    dev = BrokerThread(tmp_path / "dev").start()
    try:
        assert lag(dev) == (str(DAY_MS), 1)  # DYNAMIC_TOPIC_CONFIG: the topic's own
    finally:
        dev.stop()
    kafka = BrokerThread(tmp_path / "kafka", kafka_defaults=True).start()
    try:
        assert lag(kafka)[0] == "0"
    finally:
        kafka.stop()
