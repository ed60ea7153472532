"""The differential runner: one scripted request, sent to kcoord and to Apache Kafka.

Both requests are the same bytes, built with the project's own schemas; both
answers are decoded with the same codec, normalized, and compared field by
field. ``Normalizer`` names every field allowed to differ and why; anything
else that differs fails the test with the path of each differing field.

A request body may be a callable taking the ``Side`` it is sent to, for the
few requests that must carry a broker's own identifiers (a topic asked for by
its id): ``lambda side: {"topics": [{"topic_id": side.topic_ids["t"]}]}``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from kcoord.broker.config import DEV_DEFAULTS, TOPIC_CONFIG_SYNONYMS
from kcoord.broker.groups.group_configs import GROUP_CONFIGS
from kcoord.protocol.wire import ZERO_UUID
from kcoord.protocol.client import WireClient

# Config sources (DescribeConfigsResponse.ConfigSource).
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# The properties kcoord changes for development and the topic configs that take
# their default from them. The reference Kafka gets the same values from its
# server.properties, so it reports them as STATIC_BROKER_CONFIG; kcoord's own
# defaults are these values, so it reports DEFAULT_CONFIG. Same value, same
# effect; only the label differs.
# offsets.topic.replication.factor is 1 on both, a default on kcoord (one node
# holds one replica) and a static setting on the reference.
_KCOORD_DEFAULTS = {**DEV_DEFAULTS, "offsets.topic.replication.factor": (1, 3)}
_DEV_DEFAULT_NAMES = set(_KCOORD_DEFAULTS) | {"log.roll.ms"} | {
    topic for topic, broker in TOPIC_CONFIG_SYNONYMS.items()
    if broker in DEV_DEFAULTS or broker == "log.roll.ms"
} | {  # group configs too
    name for name, entry in GROUP_CONFIGS.items() if entry.synonym in DEV_DEFAULTS
}
# Topic configs (and their broker properties) Kafka 4.0 removed, which kcoord
# does not know, and those Kafka 4.4 added, which Kafka 3.9 does not: a kcoord
# compared with Kafka 3.9 lists neither (test_differential_newest_versions
# compares them with Kafka 4.4).
_ONLY_IN_3_9 = {"message.format.version", "message.downconversion.enable",
                "message.timestamp.difference.max.ms", "log.message.format.version",
                "log.message.downconversion.enable", "log.message.timestamp.difference.max.ms"}
_ONLY_IN_4_X = {"max.decompressed.message.bytes", "remote.copy.lag.bytes", "remote.copy.lag.ms",
                "errors.deadletterqueue.group.enable", "log.remote.copy.lag.bytes",
                "log.remote.copy.lag.ms"}
_TIMESTAMP_AFTER_MAX = {"message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms"}
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def is_kafka_cluster_id(value: str) -> bool:
    """A cluster id as Kafka writes it: a UUID in 22 base64url characters."""
    if not _CLUSTER_ID.match(value or ""):
        return False
    return len(base64.urlsafe_b64decode(value + "==")) == 16


@dataclass
class Side:
    """One broker of the comparison and what was learned of its identifiers."""

    name: str
    bootstrap: str
    port: int
    cluster_id: str | None = None
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    _labels: dict[uuid.UUID, str] = field(default_factory=dict)
    # kcoord compared with a Kafka 3.9: see Normalizer._before_elr
    before_elr: bool = False
    # a Kafka 3.9 itself: see _ONLY_IN_3_9
    kafka_3_9: bool = False

    def label(self, topic_id: uuid.UUID) -> str:
        """Topic ids are random on each broker: compared by consistency, the first id
        seen in a test becomes ``<topic-id-0>`` on both sides, the next ``<topic-id-1>``."""
        if topic_id not in self._labels:
            self._labels[topic_id] = f"<topic-id-{len(self._labels)}>"
        return self._labels[topic_id]


class Normalizer:
    """Replaces the fields that legitimately differ between two brokers."""

    def __init__(self, side: Side):
        self.side = side

    def __call__(self, api_key: int, answer: dict) -> dict:
        answer = self._walk(answer)
        if self.side.before_elr and api_key in (19, 32):
            self._before_elr(answer)
            self._before_kip_1030(answer)
            self._drop_configs(answer, _ONLY_IN_4_X)
        if self.side.kafka_3_9 and api_key in (19, 32):
            self._drop_configs(answer, _ONLY_IN_3_9)
        if api_key == 18:
            # kcoord has no KRaft metadata log, so it has no feature levels
            # (metadata.version ...) to list (docs/deviations.md).
            for name in ("supported_features", "finalized_features", "finalized_features_epoch"):
                answer.pop(name, None)
        return answer

    def _walk(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, Mapping):
            out = {k: self._walk(v, k) for k, v in value.items()}
            if out.get("resource_type") == 4:
                # kcoord binds its listeners once: read-only there, where Kafka
                # changes them while it runs (docs/deviations.md).
                for entry in out.get("configs", []):
                    if entry.get("name") == "listeners":
                        entry["read_only"] = "<bound once>"
            if "documentation" in out:
                # Kafka's config documentation is its own prose, which kcoord does not
                # copy (docs/deviations.md): kcoord answers null for Kafka's configs.
                out["documentation"] = "<documentation>"
            self._learn_topic(out, value)
            if out.get("name") in _DEV_DEFAULT_NAMES:
                self._dev_default_source(out)
            return out
        if isinstance(value, list):
            # Kafka answers partitions (and topics in a listing) in hash-map order:
            # 3.9 lists a new topic's partition 1 before 0. Order carries no meaning.
            # Sorted before walking, so that topic-id labels are given in name order.
            if value and isinstance(value[0], dict):
                if key == "partitions" and "partition_index" in value[0]:
                    value = sorted(value, key=lambda p: p["partition_index"])
                elif key in ("results", "groups") and "group_id" in value[0]:
                    # DeleteGroups and DescribeGroups answer group by group in the
                    # order of their coordinator shards, which carries no meaning.
                    value = sorted(value, key=lambda g: g["group_id"])
                elif key in ("topics", "configs", "responses") and "name" in value[0]:
                    # Topics in a listing, configs of a resource (Kafka keeps them in a
                    # HashMap) and DeleteTopics results (ControllerApis builds them from
                    # hash maps) also come in no meaningful order.
                    value = sorted(value, key=lambda t: (t["name"] is None, t["name"] or "",
                                                         t.get("error_code", 0)))
            return [self._walk(v, key) for v in value]
        if key == "port" and value == self.side.port:
            return "<advertised port>"  # each broker listens on its own free port
        if key == "cluster_id" and value:  # an error answer carries an empty one
            # Each broker formats its own cluster id; it must be Kafka-shaped and stable.
            assert is_kafka_cluster_id(value), f"{self.side.name}: bad cluster id {value!r}"
            if self.side.cluster_id is None:
                self.side.cluster_id = value
            assert value == self.side.cluster_id, f"{self.side.name}: cluster id changed"
            return "<cluster id>"
        if key == "topic_id" and isinstance(value, uuid.UUID) and value != ZERO_UUID:
            return self.side.label(value)
        return value

    @staticmethod
    def _before_elr(answer: dict) -> None:
        """A Kafka 4.4 cluster (and kcoord) holds a cluster-wide min.insync.replicas
        (DYNAMIC_DEFAULT_BROKER_CONFIG) for its eligible leader replicas, which Kafka
        3.9 has no reason to keep: kcoord's answer as it would be without it
        (test_differential_broker_configs compares it with Kafka 4.4)."""
        for result in answer.get("results", answer.get("topics", [])):
            if result.get("resource_type") == 4 and result.get("resource_name") == "":
                result["configs"] = [c for c in result["configs"]
                                     if c["name"] != "min.insync.replicas"]
            for entry in result.get("configs") or []:
                if entry["name"] == "min.insync.replicas" and entry["config_source"] == 3:
                    below = [s for s in entry.get("synonyms", []) if s["source"] != 3]
                    if "synonyms" in entry:  # (CreateTopics lists none)
                        entry["synonyms"] = below
                    entry["config_source"] = below[0]["source"] if below else DEFAULT_CONFIG

    @staticmethod
    def _drop_configs(answer: dict, names: set[str]) -> None:
        for result in answer.get("results", answer.get("topics", [])):
            if result.get("configs"):
                result["configs"] = [c for c in result["configs"] if c["name"] not in names]

    @staticmethod
    def _before_kip_1030(answer: dict) -> None:
        """Kafka 4.0 bounds a record's timestamp at an hour ahead by default
        (KIP-1030; kcoord too, test_differential_newest_versions asks Kafka 4.4),
        where 3.9's default is Long.MAX: kcoord's default as 3.9 would state it."""
        for result in answer.get("results", answer.get("topics", [])):
            for entry in result.get("configs") or []:
                for item in [entry, *(entry.get("synonyms") or [])]:
                    # (v0 states no source)
                    default = item.get("config_source", item.get("source")) in (DEFAULT_CONFIG, -1)
                    if item["name"] in _TIMESTAMP_AFTER_MAX and item["value"] == "3600000" \
                            and default:
                        item["value"] = str((1 << 63) - 1)

    @staticmethod
    def _dev_default_source(entry: dict) -> None:
        """See ``_DEV_DEFAULT_NAMES``: STATIC_BROKER_CONFIG there is DEFAULT_CONFIG here,
        and the synonym carrying Kafka's production default (which follows a static
        value) is not one of kcoord's defaults."""
        if entry.get("synonyms"):
            entry["synonyms"] = [
                s for s in entry["synonyms"]
                if not (s["name"] in _KCOORD_DEFAULTS
                        and s["value"] == str(_KCOORD_DEFAULTS[s["name"]][1]))]
        for source in ("config_source", "source"):  # a config entry, a synonym
            if entry.get(source) == STATIC_BROKER_CONFIG:
                entry[source] = DEFAULT_CONFIG

    def _learn_topic(self, out: dict, raw: dict) -> None:
        name, topic_id = raw.get("name"), raw.get("topic_id")
        if isinstance(name, str) and isinstance(topic_id, uuid.UUID) and topic_id != ZERO_UUID:
            self.side.topic_ids[name] = topic_id


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Every field path where two decoded answers differ."""
    if isinstance(ours, Mapping) and isinstance(theirs, Mapping):
        found = []
        for k in list(ours) + [k for k in theirs if k not in ours]:
            if k not in ours or k not in theirs:
                found.append(f"{path}.{k}: kcoord {ours.get(k, '<absent>')!r}, "
                             f"Kafka {theirs.get(k, '<absent>')!r}")
            else:
                found += differences(ours[k], theirs[k], f"{path}.{k}")
        return found
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        found = []
        for i, (a, b) in enumerate(zip(ours, theirs)):
            found += differences(a, b, f"{path}[{i}]")
        return found
    if ours != theirs:
        return [f"{path or '.'}: kcoord {ours!r}, Kafka {theirs!r}"]
    return []


Body = dict | Callable[[Side], dict] | None


class Differential:
    """Sends the same requests to kcoord and to one Kafka and compares the answers."""

    def __init__(self, kcoord_bootstrap: str, kafka_bootstrap: str, kafka_name: str = "Kafka"):
        self.kcoord = Side("kcoord", kcoord_bootstrap, int(kcoord_bootstrap.rsplit(":", 1)[1]))
        self.kafka = Side(kafka_name, kafka_bootstrap, int(kafka_bootstrap.rsplit(":", 1)[1]))
        self.kcoord.before_elr = self.kafka.kafka_3_9 = "3.9" in kafka_name

    def ask(self, api_key: int, version: int, body: Body = None) -> tuple[dict, dict]:
        """Both normalized answers, kcoord's first."""
        return self._ask(self.kcoord, api_key, version, body), \
            self._ask(self.kafka, api_key, version, body)

    def _ask(self, side: Side, api_key: int, version: int, body: Body) -> dict:
        request = body(side) if callable(body) else body
        with WireClient.to(side.bootstrap) as client:
            answer = client.call(api_key, version, request)
        return Normalizer(side)(api_key, answer)

    def create_topics(self, *names: str, partitions: int = 1, timeout: float = 30) -> None:
        """Create topics on both brokers (CreateTopics v4, which every reference serves)
        and wait until both list them with a leader: Kafka's metadata cache learns of
        a new topic a little after CreateTopics answers."""
        body = {"topics": [{"name": n, "num_partitions": partitions, "replication_factor": 1,
                            "assignments": [], "configs": []} for n in names],
                "timeout_ms": 10000, "validate_only": False}
        for side in (self.kcoord, self.kafka):
            answer = self._ask(side, 19, 4, body)
            assert [t["error_code"] for t in answer["topics"]] == [0] * len(names), answer
            self.wait_for_topics(side, names, timeout)

    def wait_for_topics(self, side: Side, names, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        body = {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False}
        with WireClient.to(side.bootstrap) as client:
            while True:
                topics = client.call(3, 4, body)["topics"]
                if all(t["error_code"] == 0 and t["partitions"]
                       and all(p["leader_id"] >= 0 for p in t["partitions"]) for t in topics):
                    return
                assert time.monotonic() < deadline, f"{side.name}: topics not ready: {topics}"
                time.sleep(0.05)

    def same(self, api_key: int, version: int, body: Body = None, *,
             settle_s: float = 0) -> dict:
        """Assert both brokers give the same (normalized) answer; return it.
        ``settle_s``: Kafka's answer may take that long to come to it (a config
        change reaches its brokers' DescribeConfigs through the metadata log, a
        little after the change is answered); kcoord's is the one first given."""
        ours, theirs = self.ask(api_key, version, body)
        found = differences(ours, theirs)
        deadline = time.monotonic() + settle_s
        while found and time.monotonic() < deadline:
            time.sleep(0.05)
            theirs = self._ask(self.kafka, api_key, version, body)
            found = differences(ours, theirs)
        assert not found, (f"api {api_key} v{version}: kcoord and {self.kafka.name} differ:\n  "
                           + "\n  ".join(found))
        return ours
