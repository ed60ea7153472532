"""Topics: names, ids, partition counts and configs, kept in the data dir.

Kafka keeps topic metadata in KRaft; kcoord keeps it in a snapshot and a
journal of its own (``broker/topics/store.py``).  The partitions' data folders
(``<topic>-<partition>/``) are Kafka's format and belong to the storage engine.

``__consumer_offsets`` exists from the first start with
``offsets.topic.num.partitions`` partitions and is reported as internal.
"""

from __future__ import annotations

import asyncio
import base64
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from kcoord.broker.config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    format_value,
    validate_topic_config,
)
from kcoord.broker.topics.store import TopicStore
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.config import LogConfig
from kcoord.storage.manager import LogManager
from kcoord.storage.layout import INTERNAL_TOPICS, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

log = structlog.get_logger("kcoord.topics")

CLUSTER_METADATA_TOPIC = "__cluster_metadata"

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+", re.ASCII)
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


def java_length(text: str) -> int:
    """``String.length()`` in Java: UTF-16 code units."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def validate_topic_name(name: str) -> str | None:
    """None if valid, else Kafka's reason (Topic.validate: the whole name must match)."""
    if not name:
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if java_length(name) > MAX_NAME_LENGTH:
        return (f"Topic name is invalid: the length of '{name}' is longer than the max allowed "
                f"length {MAX_NAME_LENGTH}")
    if not _LEGAL_NAME.fullmatch(name):
        return (f"Topic name is invalid: '{name}' contains one or more characters other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


def unify_collision_chars(name: str) -> str:
    """Topic.unifyCollisionChars: '.' and '_' collide in metric names."""
    return name.replace(".", "_")


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
    """Topic metadata and the topic lifecycle: the one owner of topics on disk.

    Creation and deletion run their file work (partition folders, the metadata
    journal, checkpoint entries) on one worker thread of their own, in the
    order they were asked for, as Kafka's controller serializes them; the
    event loop only checks, reserves and commits, so no topic operation
    stalls other clients.
    """

    def __init__(self, config: BrokerConfig, data_dir: Path):
        self.config = config
        self.data_dir = Path(data_dir)
        self.topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._unified: dict[str, str] = {}  # unify_collision_chars(name) -> name
        self._pending: dict[str, str] = {}  # names being created, by unified name
        self.store = TopicStore(self.data_dir)
        self.logs: LogManager | None = None
        self._worker: ThreadPoolExecutor | None = None
        self.listeners: list[Any] = []  # objects with on_topic_deleted(topic)
        self._growing = asyncio.Lock()  # one CreatePartitions growth at a time
        self._creating_transaction_state: asyncio.Future | None = None
        # Moves on whenever a topic is added, removed or replaced (grown): the
        # consumer groups look again at the topics they subscribe to.
        self.version = 0
        self.created_version = 0  # the version at which a topic was last created

    # -- persistence -----------------------------------------------------------

    def load(self) -> None:
        cleaned = []
        for entry in self.store.load().values():
            configs = _known(entry)
            topic = Topic(entry["name"], topic_id_from_str(entry["topic_id"]),
                          int(entry["partitions"]), _below_the_floor(entry["name"], configs))
            self._add(topic)
            if len(configs) < len(entry.get("configs", {})):
                cleaned.append(topic)
        if cleaned:  # kept without the dropped configs: said once, not at every start
            self.store.record(created=[_entry(topic) for topic in cleaned])
        log.info("topics.loaded", count=len(self.topics), data_dir=str(self.data_dir))
        if OFFSETS_TOPIC not in self.topics:
            offsets = Topic(OFFSETS_TOPIC, new_topic_id(),
                            self.config["offsets.topic.num.partitions"],
                            self._offsets_topic_configs())
            self.store.record(created=[_entry(offsets)])
            self._add(offsets)

    def start_transaction_state(self) -> None:
        """Begin making ``__transaction_state`` (Metadata's auto-creation of it)."""
        if TRANSACTION_STATE_TOPIC not in self.topics and \
                self._creating_transaction_state is None:
            task = asyncio.ensure_future(self.ensure_transaction_state())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def ensure_transaction_state(self) -> bool:
        """Create ``__transaction_state`` if it does not exist yet, as Kafka does on
        the first FindCoordinator for a transactional id; whether it existed."""
        if TRANSACTION_STATE_TOPIC in self.topics:
            return True
        if self._creating_transaction_state is None:
            self._creating_transaction_state = asyncio.ensure_future(self.create_many([(
                TRANSACTION_STATE_TOPIC, self.config["transaction.state.log.num.partitions"], {
                    "cleanup.policy": "compact",
                    "compression.type": "uncompressed",
                    "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
                    "unclean.leader.election.enable": "false",
                })]))
        creating = self._creating_transaction_state
        try:
            await asyncio.shield(creating)
        finally:
            if creating.done() and self._creating_transaction_state is creating:
                self._creating_transaction_state = None
        return False

    def _offsets_topic_configs(self) -> dict[str, str]:
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
        }
        lag = self.config["kcoord.offsets.topic.min.compaction.lag.ms"]
        if lag:  # superseded commits kept that long (a day by default, for their history)
            configs["min.compaction.lag.ms"] = str(lag)
        return _below_the_floor(OFFSETS_TOPIC, configs, quiet=True)

    def _add(self, topic: Topic) -> None:
        self.version += 1
        self.created_version = self.version
        self.topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self._unified[unify_collision_chars(topic.name)] = topic.name

    def _remove(self, topic: Topic) -> None:
        self.version += 1
        del self.topics[topic.name]
        self._by_id.pop(topic.topic_id, None)
        self._unified.pop(unify_collision_chars(topic.name), None)

    # -- partition logs ----------------------------------------------------------

    def attach(self, logs: LogManager) -> None:
        """Open the partition logs of every topic (at start, before serving).

        Folders no topic owns, or owned by another topic id, are set aside as
        strays; a partition without a folder gets an empty log.
        """
        self.logs = logs
        logs.remove_leftover_dirs()
        logs.open_all(owner=self.partition_owner)
        for topic in self.topics.values():
            if topic.name == OFFSETS_TOPIC:
                continue  # its folders appear on first write
            for p in range(topic.partitions):
                if logs.get(topic.name, p) is None:
                    logs.get_or_create(topic.name, p, self.log_config(topic),
                                       topic_id=topic_id_to_str(topic.topic_id))

    def partition_owner(self, name: str, partition: int) -> str | None:
        """The topic id (string form) of the topic that owns a partition folder, if any."""
        topic = self.topics.get(name)
        if topic is None or not 0 <= partition < topic.partitions:
            return None
        return topic_id_to_str(topic.topic_id)

    def log_config(self, topic: Topic) -> LogConfig:
        props = self.effective_config_strings(topic)
        props["flush.policy"] = self.config["kcoord.fsync.policy"]
        return LogConfig.from_properties(props)

    async def reapply_log_configs(self) -> None:
        """Every partition log's config again, after a broker default changed
        (dynamic broker configs). The configs are worked out in the worker, one
        per distinct set of topic overrides, so that ten thousand topics do not
        hold the event loop; only the assignments run on it. Serialized with the
        topics' own config changes and growths."""
        if self.logs is None:
            return
        async with self._growing:
            topics = list(self.topics.values())
            configs = await self._run(self._log_configs, topics)
            for topic, config in zip(topics, configs):
                if self.topics.get(topic.name) is not topic:
                    continue  # deleted meanwhile
                for p in range(topic.partitions):
                    plog = self.logs.get(topic.name, p)
                    if plog is not None:
                        plog.config = config

    def _log_configs(self, topics: list[Topic]) -> list[LogConfig]:
        made: dict[frozenset, LogConfig] = {}
        out = []
        for topic in topics:
            key = frozenset(topic.configs.items())
            if key not in made:
                made[key] = self.log_config(topic)
            out.append(made[key])
        return out

    async def _run(self, fn, *args):
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcoord-topics")
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None

    # -- queries -----------------------------------------------------------------

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        """(topic id, partitions) of a topic, for the consumer groups."""
        topic = self.topics.get(name)
        return None if topic is None else (topic.topic_id, topic.partitions)

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        topic = self._by_id.get(topic_id)
        return None if topic is None else topic.name

    def topic_names(self):
        """Every topic name, internal ones too (a regular expression may match them)."""
        return self.topics.keys()

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
        strings = {name: format_value(TOPIC_CONFIGS[name], value)
                   for name, (value, _override) in self.effective_configs(topic).items()}
        # Kafka's internal.segment.bytes (for tests: segments below segment.bytes's
        # floor) wins over segment.bytes where a topic sets it.
        if strings.get("internal.segment.bytes") is not None:
            strings["segment.bytes"] = strings["internal.segment.bytes"]
        return strings

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
        unified = unify_collision_chars(name)
        if name in self.topics or self._pending.get(unified) == name:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        existing = self._unified.get(unified) or self._pending.get(unified)
        if existing is not None:
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
                                 "are registered or some brokers have all their log "
                                 "directories cordoned.")
        check_topic_configs(configs)
        return num_partitions, replication_factor

    async def create(self, name: str, num_partitions: int, configs: dict[str, str | None]) -> Topic:
        """Create one checked topic (see ``create_many``); raises ``TopicError``."""
        [result] = await self.create_many([(name, num_partitions, configs)])
        if isinstance(result, TopicError):
            raise result
        return result

    async def create_many(self, specs) -> list[Topic | TopicError]:
        """Create checked topics ``(name, partitions, configs)`` as one operation.

        Each topic's partition folders are made first, then one journal write
        commits every topic whose folders were made; a topic whose folders
        could not be made (out of file descriptors, disk full) is removed again
        and answered with an error, the others are created.
        """
        made = []
        for name, partitions, configs in specs:
            unified = unify_collision_chars(name)
            if name in self.topics or unified in self._unified or unified in self._pending:
                made.append(TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                                       f"Topic '{name}' already exists."))
                continue
            self._pending[unified] = name
            topic = Topic(name, new_topic_id(), partitions,
                          {k: v for k, v in configs.items() if v is not None})
            made.append(topic)
        todo = [t for t in made if isinstance(t, Topic)]
        try:
            outcome = await self._run(self._create_on_disk, todo,
                                      [self.log_config(t) for t in todo])
        finally:
            for topic in todo:
                self._pending.pop(unify_collision_chars(topic.name), None)
        results = []
        for item in made:
            if isinstance(item, TopicError):
                results.append(item)
                continue
            logs_or_error = outcome[item.name]
            if isinstance(logs_or_error, TopicError):
                results.append(logs_or_error)
                continue
            self.logs.register(logs_or_error)
            self._add(item)
            log.info("topic.created", topic=item.name, partitions=item.partitions,
                     topic_id=topic_id_to_str(item.topic_id), configs=item.configs or None)
            results.append(item)
        return results

    def _create_on_disk(self, topics: list[Topic], configs: list[LogConfig]) -> dict:
        outcome: dict[str, Any] = {}
        for topic, config in zip(topics, configs):
            try:
                outcome[topic.name] = self.logs.create_partitions(
                    topic.name, topic.partitions, topic_id_to_str(topic.topic_id), config)
            except OSError as exc:
                log.error("topic.create_failed", topic=topic.name, partitions=topic.partitions,
                          error=str(exc))
                outcome[topic.name] = TopicError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"Could not create the partitions of {topic.name}: {exc}")
        done = [t for t in topics if not isinstance(outcome[t.name], TopicError)]
        try:
            self.store.record(created=[_entry(t) for t in done])
        except OSError as exc:
            log.error("topic.create_failed", topics=[t.name for t in done], error=str(exc))
            for topic in done:
                self.logs.remove_partitions(outcome[topic.name])
                outcome[topic.name] = TopicError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"Could not record topic {topic.name}: {exc}")
        return outcome

    @staticmethod
    def growth_error(topic: Topic, count: int) -> TopicError | None:
        """Why ``topic`` cannot grow to ``count`` partitions (Kafka's words), or None."""
        if count < topic.partitions:
            return TopicError(ErrorCode.INVALID_PARTITIONS,
                              f"The topic {topic.name} currently has {topic.partitions} "
                              f"partition(s); {count} would not be an increase.")
        if count == topic.partitions:
            return TopicError(ErrorCode.INVALID_PARTITIONS,
                              f"Topic already has {topic.partitions} partition(s).")
        return None

    async def add_partitions(self, topic: Topic, count: int) -> None:
        """Grow ``topic`` to ``count`` partitions. The new partitions are empty
        logs, durable in the topic journal when this returns (Kafka's
        CreatePartitions); raises ``TopicError``.  Growths run one at a time
        and are checked again when their turn comes, as Kafka's controller
        serializes them: two requests for the same topic never make the same
        partition twice."""
        async with self._growing:
            if self.topics.get(topic.name) is not topic:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            error = self.growth_error(topic, count)
            if error is not None:
                raise error
            await self._grow(topic, count)

    async def _grow(self, topic: Topic, count: int) -> None:
        first = topic.partitions
        grown = Topic(topic.name, topic.topic_id, count, topic.configs)
        made = await self._run(self._add_on_disk, topic, grown, first, self.log_config(topic))
        if self.topics.get(topic.name) is not topic:  # deleted meanwhile
            await self._run(self.logs.remove_partitions, made)  # file work: not on the loop
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {topic.name} was deleted meanwhile.")
        self.logs.register(made)
        topic.partitions = count
        self.version += 1
        log.info("topic.partitions_added", topic=topic.name, partitions=count, added=count - first,
                 topic_id=topic_id_to_str(topic.topic_id))

    def _add_on_disk(self, topic: Topic, grown: Topic, first: int, config: LogConfig):
        # After a deletion queued before it, the topic must not come back in the
        # journal: the deletion took it out of the live topics first.
        if self.topics.get(topic.name) is not topic:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {topic.name} was deleted meanwhile.")
        try:
            made = self.logs.create_partitions(grown.name, grown.partitions,
                                               topic_id_to_str(grown.topic_id), config, first)
        except OSError as exc:
            log.error("topic.partitions_add_failed", topic=grown.name, error=str(exc))
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Could not create the partitions of {grown.name}: {exc}") from None
        try:
            self.store.record(created=[_entry(grown)])
        except OSError as exc:
            self.logs.remove_partitions(made)
            log.error("topic.partitions_add_failed", topic=grown.name, error=str(exc))
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Could not record the partitions of {grown.name}: {exc}") from None
        return made

    async def alter_configs(self, topic: Topic, configs: dict[str, str]) -> None:
        """Replace ``topic``'s dynamic configs (checked by the caller): durable in
        the topic journal when this returns, and applied to its partition logs
        at once (retention, compaction, rolls and produce checks read them).
        Serialized with the topic's growths, as Kafka's controller serializes
        its changes."""
        async with self._growing:
            if self.topics.get(topic.name) is not topic:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"The topic '{topic.name}' does not exist.")
            altered = Topic(topic.name, topic.topic_id, topic.partitions, dict(configs))
            config = self.log_config(altered)
            await self._run(self._record_configs, topic, altered)
            if self.topics.get(topic.name) is not topic:
                return  # deleted meanwhile: its logs are gone
            before = topic.configs
            topic.configs = altered.configs
            for p in range(topic.partitions):
                plog = self.logs.get(topic.name, p) if self.logs is not None else None
                if plog is not None:
                    plog.config = config
            log.info("topic.configs_altered", topic=topic.name,
                     set={k: v for k, v in altered.configs.items() if before.get(k) != v},
                     removed=sorted(set(before) - set(altered.configs)))

    def _record_configs(self, topic: Topic, altered: Topic) -> None:
        if self.topics.get(topic.name) is not topic:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"The topic '{topic.name}' does not exist.")
        try:
            self.store.record(created=[_entry(altered)])
        except OSError as exc:
            log.error("topic.configs_alter_failed", topic=topic.name, error=str(exc))
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Could not record the configs of {topic.name}: {exc}") from None

    async def delete(self, topic: Topic) -> None:
        """Delete a topic: gone from metadata at once, durable when this returns.

        The journal entry is written before the folders are renamed to
        ``-delete`` and removed, as Kafka's controller commits the deletion
        before brokers delete the logs; a crash in between leaves folders that
        no topic owns, which the next start sets aside as strays.
        """
        self._remove(topic)
        detached = self.logs.detach(topic.name, topic.partitions)
        for listener in self.listeners:
            listener.on_topic_deleted(topic)
        await self._run(self._delete_on_disk, topic, detached)
        log.info("topic.deleted", topic=topic.name, topic_id=topic_id_to_str(topic.topic_id))

    def _delete_on_disk(self, topic: Topic, detached) -> None:
        try:
            self.store.record(deleted=[_entry(topic)])
        except OSError as exc:
            # The topic journal is kcoord's metadata log: losing it is a log dir
            # failure (the broker stops; the deletion was never acknowledged).
            for plog in detached:
                plog.close_files()
            self.logs.dir_failed(f"topic journal: {exc}")
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"Could not record the deletion of {topic.name}: {exc}") from None
        self.logs.remove_partitions(detached)


SEGMENT_BYTES_FLOOR = 1_048_576  # Kafka 4.x's minimum segment.bytes


def _below_the_floor(name: str, configs: dict[str, str], quiet: bool = False) -> dict[str, str]:
    """A segment.bytes below Kafka 4.x's floor (kept by an older kcoord, or an
    ``offsets.topic.segment.bytes`` set that low) becomes the internal.segment.bytes
    Kafka keeps such segment sizes in: the segments stay as they were."""
    raw = configs.get("segment.bytes")
    try:
        small = raw is not None and int(raw) < SEGMENT_BYTES_FLOOR
    except ValueError:
        small = False
    if small:
        configs["internal.segment.bytes"] = configs.pop("segment.bytes")
        if not quiet:
            log.warning("topic.segment_bytes_below_floor", topic=name, segment_bytes=raw,
                        kept_as="internal.segment.bytes")
    return configs


def _known(entry: dict) -> dict[str, str | None]:
    """A stored topic's configs that Kafka 4.x still knows: those it removed
    (message.format.version, message.downconversion.enable,
    message.timestamp.difference.max.ms; an earlier kcoord kept them) are
    dropped with a log line: Kafka 4.x no longer applies them."""
    configs = dict(entry.get("configs", {}))
    gone = sorted(name for name in configs if name not in TOPIC_CONFIGS)
    if gone:
        log.warning("topic.configs_dropped", topic=entry["name"], configs=gone,
                    reason="not topic configs of Kafka 4.x")
        for name in gone:
            del configs[name]
    return configs


def check_topic_configs(configs: dict[str, str | None]) -> None:
    """A topic's dynamic configs as Kafka checks them (at creation and when
    altered): names, values, and no tiered storage; ``TopicError`` otherwise."""
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


def _entry(topic: Topic) -> dict:
    return {"name": topic.name, "topic_id": topic_id_to_str(topic.topic_id),
            "partitions": topic.partitions, "configs": topic.configs}
