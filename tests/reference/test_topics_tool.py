"""``kcoord topics`` next to Kafka 4.4's own ``kafka-topics.sh``
(``TopicCommand``), both pointed at the same broker: the same lines, errors
and exit status (topics that Kafka's tool describes in hash order are compared
as a set of blocks)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.reference import kafka
from tests.support import REPO

TOOL = "org.apache.kafka.tools.TopicCommand"


@pytest.fixture(scope="module")
def broker_for_tools(_reference_pool, tmp_path_factory):
    _reference_pool.get(kafka.MAIN_VERSION)
    from tests.support import BrokerThread
    node = BrokerThread(tmp_path_factory.mktemp("topics-tool")).start()
    yield node
    node.stop()


def _run(bootstrap: str, ours: bool, *args: str) -> subprocess.CompletedProcess:
    if ours:
        return subprocess.run([sys.executable, "-m", "kcoord.broker.cli", "topics",
                               "--bootstrap-server", bootstrap, *args],
                              capture_output=True, text=True, cwd=REPO, timeout=60)
    return kafka.run_tool(TOOL, "--bootstrap-server", bootstrap, *args)


def _blocks(text: str) -> list[str]:
    """The topics a listing or description names, each with its partition lines."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if not line.startswith("\t") or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    return sorted(_configs_sorted("\n".join(b)) for b in blocks)


def _configs_sorted(block: str) -> str:
    """Kafka's tool lists a topic's configs in hash order, kcoord's in the broker's."""
    import re
    return re.sub(r"Configs: (\S*)", lambda m: "Configs: " + ",".join(
        sorted(m.group(1).split(","))), block)


@pytest.mark.parametrize("name, args", [
    ("{t}", ("--partitions", "3", "--replication-factor", "1", "--config",
             "cleanup.policy=compact", "--config", "retention.ms=1000")),
    ("{t}_with.dot", ()),
    ("{t}", ("--partitions", "0")),
    ("{t}", ("--replication-factor", "0")),
], ids=["configs", "metric-name-warning", "no-partitions", "bad-replication-factor"])
def test_creating_and_describing_as_kafka_s_tool_does(broker_for_tools, name, args, request):
    b = broker_for_tools.bootstrap
    results = {}
    for ours in (False, True):
        topic = name.format(t=f"{request.node.callspec.id}-{'ours' if ours else 'kafka'}")
        created = _run(b, ours, "--create", "--topic", topic, *args)
        described = _run(b, ours, "--describe", "--topic", topic)
        again = _run(b, ours, "--create", "--topic", topic)
        deleted = _run(b, ours, "--delete", "--topic", topic)
        gone = _run(b, ours, "--describe", "--topic", topic)
        results[ours] = [(r.returncode, r.stdout.replace(topic, "TOPIC"))
                         for r in (created, again, deleted, gone)] + \
            [(described.returncode,
              _configs_sorted(_without_ids(described.stdout.replace(topic, "TOPIC"))))]
    assert results[True] == results[False]


def _without_ids(text: str) -> str:
    import re
    return re.sub(r"TopicId: \S+", "TopicId: ID", text)


def test_listing_and_describing_every_topic_as_kafka_s_tool_does(broker_for_tools):
    b = broker_for_tools.bootstrap
    _run(b, True, "--create", "--topic", "listed-a", "--partitions", "2")
    _run(b, True, "--create", "--topic", "listed-b")
    for args in (("--list",), ("--list", "--exclude-internal"),
                 ("--describe",), ("--describe", "--exclude-internal")):
        theirs, ours = _run(b, False, *args), _run(b, True, *args)
        assert ours.returncode == theirs.returncode == 0
        assert _blocks(ours.stdout) == _blocks(theirs.stdout), args
        assert "listed-a" in ours.stdout and "listed-b" in ours.stdout


@pytest.mark.parametrize("count", ["4", "2", "1"], ids=["grow", "same", "shrink"])
def test_altering_the_partition_count_as_kafka_s_tool_does(broker_for_tools, count):
    b = broker_for_tools.bootstrap
    results = {}
    for ours in (False, True):
        topic = f"alter-{count}-{'ours' if ours else 'kafka'}"
        _run(b, ours, "--create", "--topic", topic, "--partitions", "2")
        altered = _run(b, ours, "--alter", "--topic", topic, "--partitions", count)
        described = _run(b, ours, "--describe", "--topic", topic)
        results[ours] = (altered.returncode, altered.stdout.replace(topic, "TOPIC"),
                         _without_ids(described.stdout.replace(topic, "TOPIC")))
    assert results[True] == results[False]
    missing = [_run(b, ours, "--alter", "--topic", "alter-missing", "--partitions", "3")
               for ours in (False, True)]
    assert (missing[1].returncode, missing[1].stdout) == \
        (missing[0].returncode, missing[0].stdout)
