"""kcoord's server-side assignors (``broker/groups/assignors.py``) against Apache
Kafka 4.4's own ``UniformAssignor`` and ``RangeAssignor``, scenario by scenario.

``java/AssignorHarness.java`` is compiled with ``javac`` against the Kafka jars
that ``tests.reference.kafka.resolve`` fetches, and runs once for the whole
module: each scenario is one JSON line in and one out.  It builds the group as
Kafka's coordinator does (see its header); both sides must then agree exactly,
member by member and partition by partition, or both refuse the scenario.

Covered: hand-made scenarios for the edges (empty groups, members subscribed to
nothing, topics nobody or everybody subscribes to, static members, forced
heterogeneous subscriptions, Java hash collisions between member ids, topic ids
and partitions, subscription and partition-set sizes where Java 17 and 19+
size a copied HashSet differently, UTF-16 ordering of member ids), then seeded
random sequences in which members join, leave and resubscribe, topics grow,
appear and are deleted, each step re-assigning from Kafka's previous answer,
and a group of 1,000 members over 2,000 partitions.

Without Java 17+, a JDK or the Kafka jars the tests skip, unless
``KCOORD_REQUIRE_REFERENCE=1``.  ``KCOORD_EXTRA_JDKS`` (JAVA_HOME folders,
separated by ``os.pathsep``) runs every test again on those JVMs too (Java 19+
sizes HashSet copies differently; ``assign(jdk=...)`` follows).
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from kcoord.broker.groups.assignors import MemberSpec, PartitionAssignorError, assign
from tests.reference import kafka
from tests.reference.fixtures import compiled_java

HARNESS = Path(__file__).with_name("java") / "AssignorHarness.java"
JDKS = ["java"] + [str(Path(home) / "bin" / "java")
                   for home in os.environ.get("KCOORD_EXTRA_JDKS", "").split(os.pathsep) if home]


class Reference:
    """One JVM running AssignorHarness: ``ask`` sends a scenario, returns Kafka's answer."""

    def __init__(self, java: str, classpath: str):
        self.jdk = kafka.java_major(java)
        self.proc = subprocess.Popen(
            [java, "-Xmx1G", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-cp", classpath, "AssignorHarness"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
        self.asked = 0

    def ask(self, scenario: dict) -> dict:
        self.proc.stdin.write(json.dumps(scenario) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"AssignorHarness exited with {self.proc.wait()}")
        self.asked += 1
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


@pytest.fixture(scope="module", params=JDKS)
def reference(request, tmp_path_factory):
    java = request.param
    javac = None if java == "java" else str(Path(java).with_name("javac"))
    ref = Reference(java, compiled_java(HARNESS, tmp_path_factory.mktemp("assignor-harness"),
                                        javac))
    yield ref
    ref.close()


# == scenarios ========================================================================

@dataclass
class Scenario:
    assignor: str
    topics: dict[uuid.UUID, tuple[str, int]]
    members: dict[str, MemberSpec]
    homogeneous: bool | None = None

    def to_json(self) -> dict:
        return {
            "assignor": self.assignor,
            "type": None if self.homogeneous is None
            else "HOMOGENEOUS" if self.homogeneous else "HETEROGENEOUS",
            "topics": [[str(t), name, count] for t, (name, count) in self.topics.items()],
            "members": [{"id": m, "instance": spec.instance_id, "rack": spec.rack_id,
                         "subscribed": sorted(str(t) for t in spec.subscribed),
                         "assigned": [[str(t), sorted(ps)] for t, ps in spec.assigned.items()]}
                        for m, spec in self.members.items()],
        }


def compare(reference: Reference, scenario: Scenario) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Kafka's answer, after checking that kcoord's is the same."""
    answer = reference.ask(scenario.to_json())
    try:
        ours = assign(scenario.assignor, scenario.members, scenario.topics,
                      homogeneous=scenario.homogeneous, jdk=reference.jdk)
    except PartitionAssignorError as exc:
        assert "error" in answer, f"kcoord refused ({exc}), Kafka assigned {answer}"
        return {}
    assert "error" not in answer, f"Kafka refused: {answer['error']}"
    theirs = {m: {uuid.UUID(t): frozenset(ps) for t, ps in topics.items()}
              for m, topics in answer["assignment"].items()}
    assert set(theirs) <= set(scenario.members)
    # Kafka leaves out the members of a group whose homogeneous subscription is empty.
    theirs = {m: theirs.get(m, {}) for m in scenario.members}
    if ours != theirs:
        diff = {m: (ours[m], theirs[m]) for m in ours if ours[m] != theirs[m]}
        pytest.fail(f"{scenario.assignor} differs for {len(diff)} members "
                    f"(kcoord, Kafka): {dict(list(diff.items())[:5])}\nscenario: "
                    f"{json.dumps(scenario.to_json())[:4000]}")
    return theirs


def topic_id(n: int) -> uuid.UUID:
    return uuid.UUID(int=n)


def kafka_member_id(rng: random.Random) -> str:
    """A member id as the Java consumer makes one (Uuid.randomUuid().toString())."""
    return base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")


def colliding_ids(count: int) -> list[str]:
    """Distinct strings of one Java hash code: "Aa" and "BB" hash alike."""
    out = []
    for n in range(count):
        bits = format(n, "010b")
        out.append("".join("Aa" if b == "0" else "BB" for b in bits))
    return out


def colliding_topic_ids(count: int) -> list[uuid.UUID]:
    """Distinct Kafka Uuids of one hash code (the same msb ^ lsb)."""
    return [uuid.UUID(int=((n + 1) << 64) | (n + 1) ^ 0x5A5A) for n in range(count)]


def fixed_scenarios() -> list[Scenario]:
    t = {topic_id(i): (f"t{i}", n) for i, n in [(1, 6), (2, 3), (3, 0), (4, 10)]}
    t1, t2, t3, t4 = list(t)
    sub = frozenset
    out: list[Scenario] = []
    for name in ("uniform", "range"):
        out += [
            Scenario(name, t, {}),
            Scenario(name, t, {"a": MemberSpec(sub())}),
            Scenario(name, t, {"a": MemberSpec(sub()), "b": MemberSpec(sub())}),
            Scenario(name, t, {"a": MemberSpec(sub({t1, t2})), "b": MemberSpec(sub({t1, t2})),
                               "c": MemberSpec(sub({t1, t2}))}),
            Scenario(name, t, {"a": MemberSpec(sub({t1})), "b": MemberSpec(sub({t1, t2})),
                               "c": MemberSpec(sub())}),
            Scenario(name, t, {"a": MemberSpec(sub({t3})), "b": MemberSpec(sub({t3}))}),
            Scenario(name, t, {"a": MemberSpec(sub({t1, t3})), "b": MemberSpec(sub({t4}))}),
            # identical subscriptions, but Kafka told they are heterogeneous
            Scenario(name, t, {"a": MemberSpec(sub({t1, t2})), "b": MemberSpec(sub({t1, t2}))},
                     homogeneous=False),
            # static members rank by instance id, before the dynamic ones
            Scenario(name, t, {"z": MemberSpec(sub({t4}), instance_id="i2"),
                               "y": MemberSpec(sub({t4}), instance_id="i1"),
                               "a": MemberSpec(sub({t4})), "b": MemberSpec(sub({t4}))}),
            # member ids ordered by UTF-16 code unit, not by code point
            Scenario(name, t, {"\U0001F600": MemberSpec(sub({t4})), "\uFB01": MemberSpec(sub({t4})),
                               "a": MemberSpec(sub({t4}))}),
            # a subscription to a topic that does not exist: both refuse
            Scenario(name, t, {"a": MemberSpec(sub({topic_id(99)}))}),
        ]
    # stickiness: a joins, b's surplus and the free partitions go to the newcomer
    out.append(Scenario("uniform", t, {
        "a": MemberSpec(sub({t1, t4}), {t1: sub(range(6)), t4: sub({0, 1, 2})}),
        "b": MemberSpec(sub({t1, t4}), {t4: sub({3, 4, 5, 6})}),
        "c": MemberSpec(sub({t1, t4}))}))
    # 4.4: a member already holding the higher quota keeps it
    out.append(Scenario("uniform", {t4: t[t4]}, {
        "a": MemberSpec(sub({t4}), {t4: sub({0, 1, 2})}),
        "b": MemberSpec(sub({t4}), {t4: sub({3, 4, 5, 6})}),
        "c": MemberSpec(sub({t4}), {t4: sub({7, 8, 9})})}))
    # deleted and unsubscribed topics in the current assignment
    out.append(Scenario("uniform", {t1: t[t1], t4: t[t4]}, {
        "a": MemberSpec(sub({t1}), {t1: sub({0, 1}), t2: sub({0, 1, 2}), t4: sub({5})}),
        "b": MemberSpec(sub({t1}), {t4: sub({1})})}))
    # colliding member ids: one HashMap bucket, then a tree bin (1,024 members)
    for count in (9, 12, 70, 1024):
        ids = colliding_ids(count)
        topics = {topic_id(7): ("big", 3 * count + 5)}
        members = {m: MemberSpec(sub(topics)) for m in ids}
        for name in ("uniform", "range"):
            out.append(Scenario(name, topics, members))
        out.append(Scenario("uniform", topics, members, homogeneous=False))
    # partitions 64 apart: a tree bin in the member's HashSet<Integer>
    big = {topic_id(8): ("stride", 768)}
    members = {"a": MemberSpec(sub(big), {topic_id(8): sub(range(0, 768, 64))})}
    members.update({f"m{i}": MemberSpec(sub(big)) for i in range(1, 256)})
    out.append(Scenario("uniform", big, members))
    for stride, held in ((16, 12), (32, 24), (64, 11), (128, 9), (256, 40)):
        topics = {topic_id(9): ("s", stride * held + 3)}
        members = {"a": MemberSpec(sub(topics), {topic_id(9): sub(range(0, stride * held, stride))}),
                   "b": MemberSpec(sub(topics), {topic_id(9): sub({1, 2})})}
        members.update({f"n{i}": MemberSpec(sub(topics)) for i in range(held)})
        out.append(Scenario("uniform", topics, members))
    # partition sets of 12 and 24 past 16: Java 17 and 19+ iterate them differently
    topics = {topic_id(10): ("p", 40)}
    out.append(Scenario("uniform", topics, {
        "a": MemberSpec(sub(topics), {topic_id(10): sub(range(10, 22))}),
        "b": MemberSpec(sub(topics), {topic_id(10): sub(range(22, 40))}),
        "c": MemberSpec(sub(topics)), "d": MemberSpec(sub(topics))}))
    # 12, 13 and 24 subscribed topics (HashSet copy sizes), colliding topic ids
    for count in (11, 12, 13, 24, 49):
        ids = colliding_topic_ids(count) if count != 24 else [topic_id(100 + i) for i in range(24)]
        topics = {tid: (f"topic-{i:02d}", 1 + i % 3) for i, tid in enumerate(ids)}
        members = {f"m{i}": MemberSpec(sub(topics)) for i in range(7)}
        out.append(Scenario("uniform", topics, members))
        members = {f"m{i}": MemberSpec(sub(topics), {tid: sub(range(1 + k % 3))
                                                   for k, tid in enumerate(ids) if k % 7 == i})
                   for i in range(5)}
        out.append(Scenario("uniform", topics, members))
    return out


def test_fixed_scenarios(reference):
    scenarios = fixed_scenarios()
    for scenario in scenarios:
        compare(reference, scenario)
    assert len(scenarios) >= 50


# == random sequences =================================================================

class Group:
    """The changing state behind a random sequence."""

    def __init__(self, rng: random.Random, assignor: str, max_members: int, max_topics: int,
                 max_partitions: int):
        self.rng = rng
        self.assignor = assignor
        self.max_partitions = max_partitions
        self.topics: dict[uuid.UUID, tuple[str, int]] = {}
        self.next_topic = 0
        for _ in range(rng.randint(1, max_topics)):
            self.create_topic()
        self.max_members = max_members
        self.subscriptions: dict[str, set[uuid.UUID]] = {}
        self.instances: dict[str, str | None] = {}
        self.shared = rng.random() < 0.5  # everyone subscribes to the same topics
        self.shared_topics = self.random_topics()
        for _ in range(rng.randint(1, max_members)):
            self.join()
        self.assignment: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        self.forced: bool | None = None

    def create_topic(self) -> uuid.UUID:
        rng = self.rng
        tid = uuid.UUID(int=rng.getrandbits(128))
        name = rng.choice([f"topic-{self.next_topic}", f"t{self.next_topic}",
                           kafka_member_id(rng)[:rng.randint(1, 12)] + str(self.next_topic)])
        self.next_topic += 1
        self.topics[tid] = (name, rng.choice([0, 1, 2, 3, 5, 8, 13, 16, 20, 32, 64,
                                              rng.randint(0, self.max_partitions)]))
        return tid

    def random_topics(self) -> set[uuid.UUID]:
        ids = list(self.topics)
        return set(self.rng.sample(ids, self.rng.randint(0, len(ids))))

    def member_id(self) -> str:
        rng = self.rng
        style = rng.random()
        if style < 0.6:
            return kafka_member_id(rng)
        if style < 0.8:
            return f"member-{rng.randint(0, 10**6)}"
        return rng.choice(colliding_ids(64))

    def join(self) -> None:
        member = self.member_id()
        if member in self.subscriptions:
            return
        self.subscriptions[member] = set(self.shared_topics) if self.shared else self.random_topics()
        self.instances[member] = f"instance-{self.rng.randint(0, 99)}" if self.rng.random() < 0.2 else None

    def step(self) -> None:
        """One to three random changes."""
        rng = self.rng
        for _ in range(rng.randint(1, 3)):
            change = rng.choice(["join", "join", "leave", "leave", "resubscribe", "grow",
                                 "create", "delete", "share", "force"])
            members = list(self.subscriptions)
            if change == "join":
                for _ in range(rng.randint(1, 3)):
                    if len(self.subscriptions) < self.max_members:
                        self.join()
            elif change == "leave" and members:
                for m in rng.sample(members, rng.randint(1, max(1, len(members) // 3))):
                    del self.subscriptions[m]
            elif change == "resubscribe" and members:
                for m in rng.sample(members, rng.randint(1, len(members))):
                    self.subscriptions[m] = self.random_topics()
                self.shared = False
            elif change == "grow" and self.topics:
                tid = rng.choice(list(self.topics))
                name, count = self.topics[tid]
                self.topics[tid] = (name, count + rng.randint(1, max(1, self.max_partitions // 4)))
            elif change == "create":
                tid = self.create_topic()
                for m in members:
                    if self.shared or rng.random() < 0.5:
                        self.subscriptions[m].add(tid)
                if self.shared:
                    self.shared_topics.add(tid)
            elif change == "delete" and self.topics:
                tid = rng.choice(list(self.topics))
                del self.topics[tid]
                self.shared_topics.discard(tid)
                for subscription in self.subscriptions.values():
                    subscription.discard(tid)
            elif change == "share":
                self.shared = True
                self.shared_topics = self.random_topics()
                for m in members:
                    self.subscriptions[m] = set(self.shared_topics)
            elif change == "force":
                self.forced = rng.choice([None, None, False, True]) if not self.shared else \
                    rng.choice([None, False])
        if self.forced is True and len({frozenset(s) for s in self.subscriptions.values()}) > 1:
            self.forced = None  # Kafka is only ever told "homogeneous" when it is

    def scenario(self) -> Scenario:
        members = {m: MemberSpec(frozenset(subs), self.assignment.get(m, {}),
                                 instance_id=self.instances[m])
                   for m, subs in self.subscriptions.items()}
        return Scenario(self.assignor, dict(self.topics), members, self.forced)


def run_sequence(reference: Reference, seed: int, assignor: str, steps: int, **sizes) -> int:
    rng = random.Random(seed)
    group = Group(rng, assignor, **sizes)
    for _ in range(steps):
        group.assignment = compare(reference, group.scenario())
        group.step()
    return steps


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_random_sequences(reference, assignor):
    compared = 0
    for seed in range(60):
        compared += run_sequence(reference, seed, assignor, steps=6, max_members=12,
                                 max_topics=6, max_partitions=40)
    for seed in range(60, 80):
        compared += run_sequence(reference, seed, assignor, steps=4, max_members=60,
                                 max_topics=20, max_partitions=200)
    assert compared == 440


def test_large_group(reference):
    """1,000 members over 2,000 partitions: a homogeneous group, then a
    heterogeneous one, each through members joining and leaving."""
    rng = random.Random(4242)
    topics = {uuid.UUID(int=rng.getrandbits(128)): (f"orders-{i}", 100) for i in range(20)}
    ids = [kafka_member_id(rng) for _ in range(1000)]
    everything = frozenset(topics)
    for assignor in ("uniform", "range"):
        subscriptions = {m: everything for m in ids}
        assignment: dict = {}
        for change in range(3):
            members = {m: MemberSpec(subscriptions[m], assignment.get(m, {})) for m in subscriptions}
            assignment = compare(reference, Scenario(assignor, topics, members))
            for m in rng.sample(sorted(subscriptions), 50):
                del subscriptions[m]
            for _ in range(30 + change):
                subscriptions[kafka_member_id(rng)] = everything
    topic_list = list(topics)
    subscriptions = {m: frozenset(rng.sample(topic_list, rng.randint(1, 6))) for m in ids}
    assignment = {}
    for change in range(3):
        members = {m: MemberSpec(subscriptions[m], assignment.get(m, {})) for m in subscriptions}
        assignment = compare(reference, Scenario("uniform", topics, members))
        for m in rng.sample(sorted(subscriptions), 40):
            del subscriptions[m]
        for _ in range(25):
            subscriptions[kafka_member_id(rng)] = frozenset(rng.sample(topic_list, 3))
