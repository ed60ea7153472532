"""OffsetFetch with ``require_stable`` (v7+) while an OffsetCommit is being written.

Under ``kcoord.fsync.policy=batch`` a commit is durable, and answered, only once
the fsync of its ``__consumer_offsets`` segment has returned.  The new group
coordinator makes a ``require_stable`` fetch wait for the group's writes in
flight (as Kafka 4.x's coordinator does), so it shows the commit once durable; a fetch
without it answers at once with what is durable.  ``os.fsync`` is held by the
gate of the durability tests (the broker runs in this process); every wait is
bounded.
"""

from __future__ import annotations

import pytest

from tests.broker.test_produce_durability import (  # noqa: F401 (gated is a fixture)
    TOPIC, _assert_unanswered, _commit_error, _ready_group, _send_commit, _start, gated)
from kcoord.protocol.client import WireClient

GROUP = "durable-group"  # the group of the durability tests' helpers


def _fetch_body(version: int, require_stable: bool) -> dict:
    topics = [{"name": TOPIC, "partition_indexes": [0]}]
    if version >= 8:
        return {"require_stable": require_stable,
                "groups": [{"group_id": GROUP, "topics": topics}]}
    return {"group_id": GROUP, "topics": topics, "require_stable": require_stable}


def _committed(answer: dict, version: int) -> int:
    if version >= 8:
        [group] = answer["groups"]
        assert group["error_code"] == 0, group
        topics = group["topics"]
    else:
        assert answer["error_code"] == 0, answer
        topics = answer["topics"]
    [topic] = topics
    [partition] = topic["partitions"]
    assert partition["error_code"] == 0, partition
    return partition["committed_offset"]


def _offsets_segment(path: str) -> bool:
    return "/__consumer_offsets-" in path and path.endswith(".log")


@pytest.mark.parametrize("version", [7, 8, 9])
def test_a_stable_fetch_waits_for_the_commit_being_written(make_broker, gated, version):
    node = _start(make_broker, "batch")
    with WireClient.to(node.bootstrap) as committer, \
            WireClient.to(node.bootstrap) as stable, \
            WireClient.to(node.bootstrap) as other:
        _ready_group(other)
        # Nothing in flight: a stable fetch is answered at once.
        assert _committed(stable.call(9, version, _fetch_body(version, True)), version) == -1
        gate = gated(_offsets_segment)
        _send_commit(committer, 42)
        gate.wait_started(1)  # the commit's bytes are written, their fsync is held
        stable.send(9, version, _fetch_body(version, True))
        # Without require_stable: answered at once, without the commit in flight.
        assert _committed(other.call(9, version, _fetch_body(version, False)), version) == -1
        _assert_unanswered(stable, other)
        _assert_unanswered(committer, other)
        gate.release()
        assert _commit_error(committer) == 0
        gate.note("commit answered")
        answer = stable.receive(9, version)
        gate.note("stable fetch answered")
    assert _committed(answer, version) == 42
    assert gate.events[:4] == ["fsync started", "fsync returned", "commit answered",
                               "stable fetch answered"]
