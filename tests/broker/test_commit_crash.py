"""SIGKILL during a commit storm: every acknowledged offset commit is there after
the restart (as in Kafka, an OffsetCommit is answered only once
its record is durable), and the group that committed as a member comes back
with its generation.

Four connections commit for four groups (a simple consumer's commits and a
member's, several partitions per request, metadata of varying size) while the
broker, started as users start it, is killed at a random moment under the
default fsync policy (``never``: what a process crash must not lose).  The
seed is printed on failure; ``KCOORD_CRASH_SEED`` replays.
"""

from __future__ import annotations

import os
import random
import threading
import time

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.client import WireClient
from tests.support import BrokerProcess, create_topic_offline, kill_during

ROUNDS = 3
TOPIC = "committed"
PARTITIONS = 4
SUB = b"\x00\x00\x00\x00\x00\x01\x00\x09committed\xff\xff\xff\xff"


class Committer:
    """One connection committing ever larger offsets for one group."""

    def __init__(self, group: str, rng: random.Random, member: bool):
        self.group, self.rng, self.member = group, rng, member
        self.acked: dict[int, tuple[int, str]] = {}  # partition -> (offset, metadata)
        self.offset = 0
        self.generation, self.member_id = -1, ""

    def _join(self, client: WireClient) -> None:
        body = {"group_id": self.group, "session_timeout_ms": 30_000,
                "rebalance_timeout_ms": 30_000, "member_id": "", "group_instance_id": None,
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": SUB}],
                "reason": None}
        first = client.call(11, 9, body)
        body["member_id"] = first["member_id"] if first["error_code"] == 79 else ""
        joined = client.call(11, 9, body)
        assert joined["error_code"] == 0, joined
        self.generation, self.member_id = joined["generation_id"], joined["member_id"]
        synced = client.call(14, 5, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": self.member_id, "assignment": b"x"}]})
        assert synced["error_code"] == 0, synced

    def run(self, port: int, stop: threading.Event) -> None:
        try:
            client = WireClient("127.0.0.1", port, timeout=10)
            if self.member:
                self._join(client)
            for _ in range(50_000):
                if stop.is_set():
                    return
                self.offset += self.rng.randint(1, 100)
                partitions = self.rng.sample(range(PARTITIONS), self.rng.randint(1, PARTITIONS))
                meta = "m" * self.rng.randint(0, 200) + str(self.offset)
                answer = client.call(8, 9, {
                    "group_id": self.group, "generation_id_or_member_epoch": self.generation,
                    "member_id": self.member_id, "group_instance_id": None, "topics": [
                        {"name": TOPIC, "partitions": [
                            {"partition_index": p, "committed_offset": self.offset,
                             "committed_leader_epoch": -1, "committed_metadata": meta}
                            for p in partitions]}]})
                codes = [p["error_code"] for p in answer["topics"][0]["partitions"]]
                assert codes == [ErrorCode.NONE] * len(partitions), answer
                for p in partitions:
                    self.acked[p] = (self.offset, meta)
        except (OSError, EOFError, ConnectionError):
            pass  # the broker was killed


def _committed(client: WireClient, group: str) -> dict[int, tuple[int, str]]:
    answer = client.call(9, 8, {"require_stable": True, "groups": [
        {"group_id": group, "topics": None}]})
    [g] = answer["groups"]
    assert g["error_code"] == 0, g
    return {p["partition_index"]: (p["committed_offset"], p["metadata"])
            for t in g["topics"] for p in t["partitions"]}


def _loaded(port: int, groups, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with WireClient("127.0.0.1", port) as client:
        while True:
            answer = client.call(9, 8, {"require_stable": False, "groups": [
                {"group_id": g, "topics": []} for g in groups]})
            if all(g["error_code"] == 0 for g in answer["groups"]):
                return
            assert time.monotonic() < deadline, answer
            time.sleep(0.02)


def test_acknowledged_commits_survive_sigkill_during_a_commit_storm(tmp_path):
    seed = int(os.environ.get("KCOORD_CRASH_SEED") or time.time_ns() % 1_000_000)
    rng = random.Random(seed)
    data = tmp_path / "data"
    create_topic_offline(data, TOPIC, PARTITIONS)
    for round_ in range(ROUNDS):
        context = f"seed {seed}, round {round_}"
        committers = [Committer(f"storm-{round_}-{i}", random.Random(rng.random()),
                                member=i % 2 == 1) for i in range(4)]
        kill_during(data, committers, rng, context)

        again = BrokerProcess(data).start()
        try:
            _loaded(again.port, [c.group for c in committers])
            with WireClient("127.0.0.1", again.port) as client:
                for c in committers:
                    stored = _committed(client, c.group)
                    for partition, (offset, meta) in c.acked.items():
                        # A commit written but not yet answered may have landed too:
                        # never less than the last acknowledged one.
                        assert partition in stored, (context, c.group, partition)
                        assert stored[partition][0] >= offset, (context, c.group, partition)
                        if stored[partition][0] == offset:
                            assert stored[partition][1] == meta, context
                    if c.member and c.acked:
                        described = client.call(15, 5, {"groups": [c.group],
                                                        "include_authorized_operations": False})
                        group = described["groups"][0]
                        assert (group["group_state"], len(group["members"])) == \
                            ("Stable", 1), (context, group)
                        beat = client.call(12, 4, {"group_id": c.group,
                                                   "generation_id": c.generation,
                                                   "member_id": c.member_id,
                                                   "group_instance_id": None})
                        assert beat["error_code"] == 0, (context, beat)
        finally:
            assert again.terminate() == 0, context
    assert any(c.acked for c in committers), f"seed {seed}: nothing was acknowledged"
