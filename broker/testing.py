"""What a test asks of a running broker, over the wire: create a topic, produce,
wait for a group to settle, read its assignment, committed offsets and lag.

``Kcoord`` talks to any single-node Kafka broker (kcoord or Apache Kafka) through
the project's own codecs; the pytest plugin (``broker.pytest_plugin``) hands one
to every test.  Names it makes are unique to it (``create_topic("orders")``
returns its prefix, the plugin's being the test's name, then ``orders`` and a
suffix: ``test_names-orders-fc6098``), so tests sharing one broker never use
each other's topics or groups; ``list_topics(mine=True)`` and
``list_groups(mine=True)`` leave the others' out.  Every wait is on a
condition, with a timeout, never a fixed sleep::

    kafka = Kcoord("127.0.0.1:9092")
    topic = kafka.create_topic("orders", partitions=3)
    kafka.produce(topic, [b"a", b"b"])
    kafka.wait_for_group(group, members=2)
    kafka.lag(group)  # {("orders-3f2a", 0): 2, ...}
"""

from __future__ import annotations

import itertools
import re
import threading
import time
import uuid

from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.group_records import consumer_assignment
from kcoord.protocol.records import Record, build_batch

DEFAULT_TIMEOUT_S = 10.0
# What a partition's leader answers a write while it is not ready for it yet.
_NOT_LEADER_YET = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE)
# What a group's coordinator answers while it is not ready yet: asked again.
_NOT_YET = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_COORDINATOR)
_POLL_S = 0.01
_NAME_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class KafkaError(Exception):
    """The broker answered with an error code."""

    def __init__(self, what: str, code: int):
        self.code = ErrorCode(code)
        super().__init__(f"{what}: {self.code.name}")


class Kcoord:
    def __init__(self, bootstrap: str, *, prefix: str = "", broker=None,
                 timeout: float = DEFAULT_TIMEOUT_S):
        """``prefix`` starts every name this handle makes; ``broker`` is the
        ``EmbeddedBroker`` behind ``bootstrap``, if any; ``timeout`` bounds every
        wait."""
        self.bootstrap = bootstrap
        self.broker = broker
        self.timeout = timeout
        # A topic name has at most 249 characters of [a-zA-Z0-9._-].
        self.prefix = _NAME_SAFE.sub("-", prefix).strip("-")[-120:].lstrip("-.")
        self._suffix = uuid.uuid4().hex[:6]
        self._counter = itertools.count()
        self._client: WireClient | None = None
        self._lock = threading.Lock()  # one request at a time on the connection
        self._serves_consumer_protocol: bool | None = None

    # -- names ---------------------------------------------------------------------------

    def unique(self, base: str) -> str:
        """A name no other handle makes: ``base``, this handle's prefix and a suffix."""
        parts = [p for p in (self.prefix, base, self._suffix) if p]
        name = "-".join(parts)
        n = next(self._counter)
        return name if n == 0 else f"{name}-{n}"

    def group(self, base: str = "group") -> str:
        """A group id of this handle's own."""
        return self.unique(base)

    # -- the connection ----------------------------------------------------------------

    def call(self, api_key: int, version: int, body: dict) -> dict:
        """One request to the bootstrap broker; its decoded answer."""
        with self._lock:
            if self._client is None:
                self._client = WireClient.to(self.bootstrap, timeout=self.timeout,
                                             client_id="kcoord-testing")
            try:
                return self._client.call(api_key, version, body)
            except OSError:
                self._client.close()
                self._client = None
                raise

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> "Kcoord":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- topics and records --------------------------------------------------------------

    def create_topic(self, base: str = "topic", partitions: int = 1,
                     config: dict | None = None) -> str:
        """Create a topic of this handle's own (``unique(base)``); its name."""
        name = self.unique(base)
        answer = self.call(19, 5, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": 1,
            "assignments": [],
            "configs": [{"name": k, "value": str(v)} for k, v in (config or {}).items()]}],
            "timeout_ms": int(self.timeout * 1000), "validate_only": False})
        _check(f"CreateTopics {name}", answer["topics"][0]["error_code"])
        self._wait_for_leaders(name, partitions)
        return name

    def _wait_for_leaders(self, topic: str, partitions: int) -> None:
        """Until Metadata gives every partition of a topic just created a leader:
        at once on kcoord, a moment later on Apache Kafka, which answers the
        creation before its broker has applied it."""
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self.call(3, 12, {"topics": [{"topic_id": None, "name": topic}],
                                       "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
            found = answer["topics"][0]
            if found["error_code"] == ErrorCode.NONE and \
                    len(found["partitions"]) == partitions and \
                    all(p["leader_id"] >= 0 for p in found["partitions"]):
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"topic {topic} has no leader for every partition")
            time.sleep(_POLL_S)

    def produce(self, topic: str, values, *, key: bytes | None = None,
                partition: int = 0) -> list[int]:
        """Append ``values`` (bytes, or str as UTF-8) to one partition in one batch,
        acknowledged by every replica (acks=all); their offsets."""
        now = int(time.time() * 1000)
        records = [Record(i, now, key, v.encode() if isinstance(v, str) else v)
                   for i, v in enumerate(values)]
        if not records:
            return []
        batch = build_batch(records)
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self.call(0, 9, {"transactional_id": None, "acks": -1,
                                      "timeout_ms": int(self.timeout * 1000),
                                      "topic_data": [{"name": topic, "partition_data": [
                                          {"index": partition, "records": batch}]}]})
            result = answer["responses"][0]["partition_responses"][0]
            # Apache Kafka may refuse a topic's first writes while its partition is
            # still being set up (its leadership applied a moment after Metadata
            # shows it): nothing was written, so the batch is sent again
            if result["error_code"] not in _NOT_LEADER_YET or time.monotonic() >= deadline:
                break
            time.sleep(_POLL_S)
        _check(f"Produce to {topic}-{partition}", result["error_code"])
        first = result["base_offset"]
        return list(range(first, first + len(records)))

    def list_topics(self, mine: bool = False) -> list[str]:
        """Every topic's name but the internal ones, sorted; ``mine``: only those
        this handle named (its prefix and suffix)."""
        answer = self.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
        return sorted(t["name"] for t in answer["topics"]
                      if not t["is_internal"] and (not mine or self._named(t["name"])))

    def _named(self, name: str) -> bool:
        """Whether ``name`` is one that ``unique`` made here."""
        head = f"{self.prefix}-" if self.prefix else ""
        return name.startswith(head) and re.search(
            rf"-{self._suffix}(-[0-9]+)?$", name) is not None

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` (it must exist)."""
        answer = self.call(20, 6, {"topics": [{"name": topic, "topic_id": None}],
                                   "timeout_ms": int(self.timeout * 1000)})
        _check(f"DeleteTopics {topic}", answer["responses"][0]["error_code"])

    def list_groups(self, mine: bool = False) -> list[str]:
        """Every group's id, whichever its protocol, sorted; ``mine``: only those
        this handle named."""
        answer = self.call(16, 4, {"states_filter": []})
        _check("ListGroups", answer["error_code"])
        return sorted(g["group_id"] for g in answer["groups"]
                      if not mine or self._named(g["group_id"]))

    def delete_group(self, group: str) -> None:
        """Delete an empty ``group`` and its committed offsets."""
        self._when_ready(lambda: _checked_group(
            self.call(42, 2, {"groups_names": [group]})["results"][0]))

    def end_offsets(self, topic: str) -> dict[tuple[str, int], int]:
        """The log end offset of each partition of ``topic``."""
        partitions = self._partitions(topic)
        return self._list_offsets({(topic, p) for p in range(partitions)})

    # -- groups --------------------------------------------------------------------------

    def describe_group(self, group: str) -> dict:
        """One group, whichever protocol its members speak: ``group_type``
        ("classic" or "consumer"), ``group_state`` and ``members``.  A classic
        group is what DescribeGroups gives (``protocol_type``, ``protocol_data``
        and each member's ``member_assignment`` bytes); a group of the consumer
        protocol (KIP-848, ``group.protocol=consumer``), which DescribeGroups
        reports as Dead, is what ConsumerGroupDescribe gives (each member's
        ``assignment`` of topic partitions).  While the group's coordinator is
        loading or not known yet (a broker just started), it is asked again
        until the handle's timeout."""
        return self._when_ready(self._describe_group, group)

    def _when_ready(self, ask, *args):
        """``ask(*args)``, asked again while the coordinator is not ready, until
        the handle's timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return ask(*args)
            except KafkaError as error:
                if error.code not in _NOT_YET or time.monotonic() >= deadline:
                    raise
            time.sleep(_POLL_S)

    def _describe_group(self, group: str) -> dict:
        answer = self.call(15, 5, {"groups": [group], "include_authorized_operations": False})
        described = answer["groups"][0]
        _check(f"DescribeGroups {group}", described["error_code"])
        if described["group_state"] != "Dead" or not self._consumer_protocol():
            return dict(described, group_type="classic")
        answer = self.call(69, 0, {"group_ids": [group], "include_authorized_operations": False})
        modern = answer["groups"][0]
        if modern["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
            return dict(described, group_type="classic")  # no such group: Dead, as Kafka says
        _check(f"ConsumerGroupDescribe {group}", modern["error_code"])
        return dict(modern, group_type="consumer", protocol_type="consumer",
                    protocol_data=modern["assignor_name"])

    def _consumer_protocol(self) -> bool:
        """Whether the broker serves ConsumerGroupDescribe (asked once)."""
        if self._serves_consumer_protocol is None:
            versions = self.call(18, 3, {"client_software_name": "kcoord-testing",
                                         "client_software_version": "1"})["api_keys"]
            self._serves_consumer_protocol = any(k["api_key"] == 69 for k in versions)
        return self._serves_consumer_protocol

    def wait_for_group(self, group: str, *, members: int | None = None,
                       state: str | None = "Stable", timeout: float | None = None) -> dict:
        """Wait until ``group`` is in ``state`` with ``members`` members (either
        may be None: any); the group as ``describe_group`` gives it then.  A
        group of the consumer protocol is Stable once every member has its
        target assignment."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            described = self.describe_group(group)
            if (state is None or described["group_state"] == state) and \
                    (members is None or len(described["members"]) == members):
                return described
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"group {group} is {described['group_state']} with "
                    f"{len(described['members'])} members, not {state or 'any state'} with "
                    f"{'any number of' if members is None else members} members")
            time.sleep(_POLL_S)

    def assignment(self, group: str) -> dict[str, list[tuple[str, int]]]:
        """Each member's partitions (by member id): as the group's leader assigned
        them in a classic group of consumers (``protocol_type`` "consumer"), as
        the coordinator assigned them in a group of the consumer protocol."""
        described = self.describe_group(group)
        out = {}
        if described["group_type"] == "consumer":
            for member in described["members"]:
                out[member["member_id"]] = sorted(
                    (t["topic_name"], p) for t in member["assignment"]["topic_partitions"]
                    for p in t["partitions"])
            return out
        for member in described["members"]:
            raw = member["member_assignment"]
            partitions = []
            if raw:
                for owned in consumer_assignment(raw)["assigned_partitions"]:
                    partitions += [(owned["topic"], p) for p in owned["partitions"]]
            out[member["member_id"]] = sorted(partitions)
        return out

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets."""
        return self._when_ready(self._committed, group)

    def _committed(self, group: str) -> dict[tuple[str, int], int]:
        answer = self.call(9, 8, {"require_stable": True, "groups": [
            {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}]})
        fetched = answer["groups"][0]
        _check(f"OffsetFetch {group}", fetched["error_code"])
        out = {}
        for topic in fetched["topics"]:
            for p in topic["partitions"]:
                _check(f"OffsetFetch {group} {topic['name']}-{p['partition_index']}",
                       p["error_code"])
                if p["committed_offset"] >= 0:
                    out[(topic["name"], p["partition_index"])] = p["committed_offset"]
        return out

    def lag(self, group: str) -> dict[tuple[str, int], int]:
        """For each partition the group has committed to: the log end offset less
        the committed offset."""
        committed = self.committed(group)
        ends = self._list_offsets(set(committed))
        return {tp: max(ends[tp] - offset, 0) for tp, offset in sorted(committed.items())}

    # -- helpers -------------------------------------------------------------------------

    def _partitions(self, topic: str) -> int:
        answer = self.call(3, 12, {"topics": [{"topic_id": None, "name": topic}],
                                   "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
        found = answer["topics"][0]
        _check(f"Metadata {topic}", found["error_code"])
        return len(found["partitions"])

    def _list_offsets(self, partitions) -> dict[tuple[str, int], int]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(partitions):
            by_topic.setdefault(topic, []).append(p)
        if not by_topic:
            return {}
        answer = self.call(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                            "timestamp": -1} for p in ps]}
            for topic, ps in by_topic.items()]})
        out = {}
        for topic in answer["topics"]:
            for p in topic["partitions"]:
                _check(f"ListOffsets {topic['name']}-{p['partition_index']}", p["error_code"])
                out[(topic["name"], p["partition_index"])] = p["offset"]
        return out


def _checked_group(result: dict) -> dict:
    _check(f"DeleteGroups {result['group_id']}", result["error_code"])
    return result


def _check(what: str, code: int) -> None:
    if code != ErrorCode.NONE:
        raise KafkaError(what, code)
