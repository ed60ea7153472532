"""Topics: names, ids, partition counts and configs, kept in the data dir.

Kafka keeps topic metadata in KRaft; kcoord keeps it in one small JSON file of
its own (``kcoord-topics.json``), replaced atomically on every change.  The
partitions' data folders (``<topic>-<partition>/``) are Kafka's format and
belong to the storage engine.

``__consumer_offsets`` exists from the first start with
``offsets.topic.num.partitions`` partitions and is reported as internal.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from broker.config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    format_value,
    validate_topic_config,
)
from protocol.errors import ErrorCode
from storage.files import write_atomically

log = structlog.get_logger("kcoord.topics")

OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__share_group_state"})
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
METADATA_FILE = "kcoord-topics.json"

_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's string form of a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def new_topic_id() -> uuid.UUID:
    # Kafka never hands out the zero id, the reserved ...01 id, or an id whose
    # string form starts with '-' (it would read as a command-line flag).
    while True:
        candidate = uuid.uuid4()
        if candidate.int in (0, 1):
            continue
        if topic_id_to_str(candidate).startswith("-"):
            continue
        return candidate


def validate_topic_name(name: str) -> str | None:
    """None if valid, else Kafka's reason."""
    if not name:
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return (f"Topic name is invalid: the length of '{name}' is longer than the max allowed "
                f"length {MAX_NAME_LENGTH}")
    if not _LEGAL_NAME.match(name):
        return (f"Topic name is invalid: '{name}' contains one or more characters other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # per-topic overrides, as given

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class TopicManager:
    def __init__(self, config: BrokerConfig, data_dir: Path):
        self.config = config
        self.data_dir = Path(data_dir)
        self.topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self.listeners: list[Any] = []  # objects with on_topic_created/on_topic_deleted

    # -- persistence -----------------------------------------------------------

    @property
    def metadata_path(self) -> Path:
        return self.data_dir / METADATA_FILE

    def load(self) -> None:
        path = self.metadata_path
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            for entry in data.get("topics", []):
                topic = Topic(entry["name"], topic_id_from_str(entry["topic_id"]),
                              int(entry["partitions"]), dict(entry.get("configs", {})))
                self._add(topic)
            log.info("topics.loaded", count=len(self.topics), path=str(path))
        if OFFSETS_TOPIC not in self.topics:
            self._add(Topic(OFFSETS_TOPIC, new_topic_id(),
                            self.config["offsets.topic.num.partitions"],
                            self._offsets_topic_configs()))
            self.save()

    def _offsets_topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
        }

    def save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        data = {
            "version": 1,
            "topics": [
                {"name": t.name, "topic_id": topic_id_to_str(t.topic_id),
                 "partitions": t.partitions, "configs": t.configs}
                for t in sorted(self.topics.values(), key=lambda t: t.name)
            ],
        }
        write_atomically(self.metadata_path, json.dumps(data, indent=1, sort_keys=True))

    def _add(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    # -- queries -----------------------------------------------------------------

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def effective_configs(self, topic: Topic) -> dict[str, tuple[Any, bool]]:
        """name -> (value, is_topic_override) for every topic config."""
        result = {}
        for name, defn in TOPIC_CONFIGS.items():
            if name in topic.configs:
                result[name] = (validate_topic_config(name, topic.configs[name]), True)
            else:
                result[name] = (self.config.topic_default(name), False)
        return result

    def effective_config_strings(self, topic: Topic) -> dict[str, str | None]:
        return {name: format_value(TOPIC_CONFIGS[name], value)
                for name, (value, _override) in self.effective_configs(topic).items()}

    # -- changes -------------------------------------------------------------------

    def check_new_topic(self, name: str, num_partitions: int, replication_factor: int,
                        assignments: list, configs: dict[str, str | None]) -> tuple[int, int]:
        """Kafka's CreateTopics validation; returns (partitions, replication factor)."""
        if name == CLUSTER_METADATA_TOPIC:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"Creation of internal topic {name} is prohibited.")
        reason = validate_topic_name(name)
        if reason:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        if name in self.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collision = name.replace(".", "_")
        for existing in self.topics:
            if existing.replace(".", "_") == collision:
                raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {existing}")
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 "A manual partition assignment was specified, but numPartitions "
                                 "or replicationFactor was not set to -1.")
            node = self.config.node_id
            seen = set()
            for assignment in assignments:
                index = assignment.partition_index
                if index in seen or index < 0:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Partition {index} was specified more than once or is negative.")
                seen.add(index)
                if not assignment.broker_ids:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Partition {index} has no replicas.")
                other = [b for b in assignment.broker_ids if b != node]
                if other:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"The manual partition assignment includes broker {other[0]}, "
                                     "but no such broker is registered.")
                if len(set(assignment.broker_ids)) != len(assignment.broker_ids):
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "The manual partition assignment includes the partition "
                                     "replicas more than once.")
            if seen != set(range(len(seen))):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "Partitions should be a consecutive 0-based integer sequence")
            num_partitions, replication_factor = len(seen), 1
        else:
            if num_partitions == -1:
                num_partitions = self.config["num.partitions"]
            elif num_partitions <= 0:
                raise TopicError(ErrorCode.INVALID_PARTITIONS,
                                 "Number of partitions was set to an invalid non-positive value.")
            if replication_factor == -1:
                replication_factor = self.config["default.replication.factor"]
            elif replication_factor <= 0:
                raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0, or -1 to use the "
                                 "default value.")
            if replication_factor > 1:
                raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Unable to replicate the partition {replication_factor} time(s): "
                                 "The target replication factor of "
                                 f"{replication_factor} cannot be reached because only 1 broker(s) "
                                 "are registered.")
        for key, value in configs.items():
            if key not in TOPIC_CONFIGS:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
            try:
                validate_topic_config(key, value)
            except ValueError as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if str(configs.get("remote.storage.enable", "")).strip().lower() == "true":
            # kcoord has no tiered storage, like a Kafka with remote.log.storage.system.enable=false.
            raise TopicError(ErrorCode.INVALID_CONFIG,
                             "Tiered Storage functionality is disabled in the broker. "
                             "Topic cannot be configured with remote log storage.")
        return num_partitions, replication_factor

    def create(self, name: str, num_partitions: int, configs: dict[str, str | None]) -> Topic:
        """Create a topic: its partition logs first, then its metadata, so that a
        failure (out of file descriptors, disk full) leaves no half-made topic."""
        topic = Topic(name, new_topic_id(), num_partitions,
                      {k: v for k, v in configs.items() if v is not None})
        self._add(topic)
        try:
            for listener in self.listeners:
                listener.on_topic_created(topic)
            self.save()
        except OSError as exc:
            del self.topics[topic.name]
            self._by_id.pop(topic.topic_id, None)
            for listener in self.listeners:
                listener.on_topic_deleted(topic)
            self._remove_partition_dirs(topic)
            log.error("topic.create_failed", topic=name, partitions=num_partitions, error=str(exc))
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Could not create the partitions of {name}: {exc}") from None
        log.info("topic.created", topic=name, partitions=num_partitions,
                 topic_id=topic_id_to_str(topic.topic_id), configs=topic.configs or None)
        return topic

    def delete(self, topic: Topic) -> None:
        del self.topics[topic.name]
        self._by_id.pop(topic.topic_id, None)
        self.save()
        for listener in self.listeners:
            listener.on_topic_deleted(topic)
        self._remove_partition_dirs(topic)
        log.info("topic.deleted", topic=topic.name, topic_id=topic_id_to_str(topic.topic_id))

    def _remove_partition_dirs(self, topic: Topic) -> None:
        # Kafka renames a deleted partition folder to <topic>-<p>.<id>-delete and
        # removes it later; a crash between the two leaves only -delete folders,
        # which the next start removes.
        suffix = uuid.uuid4().hex
        for p in range(topic.partitions):
            folder = self.data_dir / f"{topic.name}-{p}"
            if folder.exists():
                doomed = folder.with_name(f"{folder.name}.{suffix}-delete")
                os.replace(folder, doomed)
                shutil.rmtree(doomed, ignore_errors=True)

    def remove_leftover_deleted_dirs(self) -> None:
        if not self.data_dir.exists():
            return
        for entry in self.data_dir.iterdir():
            if entry.is_dir() and entry.name.endswith("-delete"):
                shutil.rmtree(entry, ignore_errors=True)

