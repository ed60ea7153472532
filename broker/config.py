"""Broker configuration with Kafka's property names.

Every setting is a Kafka broker property (``num.partitions``,
``group.initial.rebalance.delay.ms`` ...), read from a ``server.properties``
file, ``--override key=value`` and the command line, in that order.

kcoord starts with *development defaults*: the few values where Kafka's
production default slows tests or cannot work on one node.  ``--kafka-defaults``
restores Kafka's value for each of them, except the replication factors, which
stay 1 because a single node cannot hold more replicas.  ``DEV_DEFAULTS`` below
is the list the README documents.

Unknown or unsupported properties are logged as warnings and ignored.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import structlog

log = structlog.get_logger("kcoord.config")

# Kafka's ConfigDef types, as DescribeConfigs v3+ reports them.
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9

_TYPE_NAMES = {BOOLEAN: "boolean", STRING: "string", INT: "int", SHORT: "short", LONG: "long",
               DOUBLE: "double", LIST: "list", CLASS: "class", PASSWORD: "password"}


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: int
    default: Any
    doc: str = ""
    validator: Callable[[Any], str | None] | None = None
    choices: tuple[str, ...] | None = None
    # The type DescribeConfigs reports, where Kafka declares a property as a
    # string and parses it later (listeners): kcoord parses it as a list at once.
    reported_type: int | None = None
    # Kafka defines it as internal: not listed by DescribeConfigs
    internal: bool = False

    @property
    def config_type(self) -> int:
        return self.reported_type or self.type


class ConfigValueError(ValueError):
    """An invalid value, worded as Kafka's ``ConfigException`` words it."""

    def __init__(self, name: str, value: Any, reason: str):
        super().__init__(f"Invalid value {value} for configuration {name}: {reason}")


class ConfigListError(ConfigValueError):
    """A list refused as a whole or for an empty item, worded as Kafka 4's
    ``ConfigDef.ValidList`` words it (without a value)."""

    def __init__(self, message: str):
        ValueError.__init__(self, message)


# Java's Integer/Long/Short.parseInt and Double.parseDouble accept these (ASCII
# digits, an optional sign, no underscores); Python's int()/float() accept more.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


def java_integer(text: str, bits: int = 31) -> int | None:
    """``text`` as Java's Integer.parseInt (``bits`` 31; Long.parseLong: 63)
    reads it, or None where it throws; a string of thousands of digits too
    (Python's int() refuses those with its own error)."""
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19:  # past any long
        return None
    value = -int(digits) if text.startswith("-") else int(digits)
    return value if -(1 << bits) <= value < (1 << bits) else None


def _java_double_text(value: float) -> str:
    """Java's Double.toString, which Kafka's messages show (2.0, 0.5, 1.0E10)."""
    if value != value or value in (math.inf, -math.inf):
        return {math.inf: "Infinity", -math.inf: "-Infinity"}.get(value, "NaN")
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    exponent = math.floor(math.log10(abs(value)))
    return f"{round(value / 10 ** exponent, 15)!r}E{exponent}"


def _parse_value(defn: ConfigDef, raw: Any) -> Any:
    """Parse a property value the way Kafka's ConfigDef.parseType does, then check
    it; ConfigValueError (with Kafka's message) if invalid."""
    if raw is None:
        if defn.default is None:
            return None
        raise ValueError(f"Null value not supported for topic configs: {defn.name}")
    text = str(raw).strip()
    if defn.type == BOOLEAN:
        if isinstance(raw, bool):
            return raw
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigValueError(defn.name, raw, "Expected value to be either true or false")
    if defn.type in (INT, SHORT, LONG):
        bits = {INT: 31, SHORT: 15, LONG: 63}[defn.type]
        value = java_integer(text, bits)
        if value is None:
            type_name = {INT: "INT", SHORT: "SHORT", LONG: "LONG"}[defn.type]
            raise ConfigValueError(defn.name, raw, f"Not a number of type {type_name}")
    elif defn.type == DOUBLE:
        if not _JAVA_DOUBLE.fullmatch(text):
            raise ConfigValueError(defn.name, raw, "Not a number of type DOUBLE")
        value = float(text.rstrip("fFdD").replace("Infinity", "inf"))
    elif defn.type == LIST:
        # ConfigDef.parseType: a value given twice is kept once, where first given
        value = list(dict.fromkeys(_LIST_SEPARATOR.split(text))) if text else []
        if defn.choices is not None:  # Kafka's ValidList, item by item
            for item in value:
                if not item:
                    raise ConfigListError(f"Configuration '{defn.name}' values must not be empty.")
                if item not in defn.choices:
                    raise ConfigValueError(defn.name, item,
                                           f"String must be one of: {', '.join(defn.choices)}")
    else:
        value = text
        if defn.choices is not None and value not in defn.choices:
            raise ConfigValueError(defn.name, value,
                                   f"String must be one of: {', '.join(defn.choices)}")
    if defn.validator is not None:
        reason = defn.validator(value)
        if reason:
            shown = (_java_double_text(value) if defn.type == DOUBLE
                     else f"[{', '.join(value)}]" if defn.type == LIST
                     else format_value(defn, value))
            raise ConfigValueError(defn.name, shown, reason)
    return value


def format_value(defn: ConfigDef, value: Any) -> str | None:
    """The string form DescribeConfigs reports."""
    if value is None:
        return None
    if defn.type == BOOLEAN:
        return "true" if value else "false"
    if defn.type == LIST:
        return ",".join(value)
    if defn.type == DOUBLE:
        return repr(float(value))
    return str(value)


class AtLeast:
    """Kafka's ``ConfigDef.Range.atLeast``: returns the reason a value is refused, or None."""

    def __init__(self, low):
        self.low = low

    def __call__(self, value) -> str | None:
        return f"Value must be at least {self.low}" if value < self.low else None


class Between:
    """Kafka's ``ConfigDef.Range.between``."""

    def __init__(self, low, high):
        self.low, self.high = low, high

    def __call__(self, value) -> str | None:
        if value < self.low:
            return f"Value must be at least {self.low}"
        if value > self.high:
            return f"Value must be no more than {self.high}"
        return None


def _gzip_level(value) -> str | None:
    # GzipCompression.LevelValidator: Deflater's DEFAULT_COMPRESSION (-1) or 1-9.
    return None if value == -1 or 1 <= value <= 9 else \
        "Value must be between 1 and 9 or equal to -1"


class _ThrottledReplicas:
    """ThrottledReplicaListValidator: ``*`` or ``partition:broker`` pairs."""

    _PAIR = re.compile(r"[0-9]+:[0-9]+")

    def __init__(self, name: str):
        self.name = name

    def __call__(self, value) -> str | None:
        if value == ["*"] or all(self._PAIR.fullmatch(item) for item in value):
            return None
        return (f"{self.name} must be the literal '*' or a list of replicas in the following "
                "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def assignor_names(values: list[str]) -> tuple[str, ...]:
    """``group.consumer.assignors``: Kafka's class names or their names (the first
    is the default assignor)."""
    return tuple(ASSIGNOR_CLASSES.get(v.strip(), v.strip()) for v in values)


_MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def _assignors_problem(values: list[str]) -> str | None:
    names = assignor_names(values)
    for name in names:
        if name not in ("uniform", "range"):
            return f"{name} is not a server assignor kcoord has (uniform, range)"
    for i, name in enumerate(names):
        if name in names[:i]:  # one by its name, once by its class (Kafka 4.4's words)
            return (f"Assignor name '{name}' is already registered by another configured "
                    f"assignor. Assignor names, whether built-in or custom, must be unique")
    if not names:
        return "at least one assignor is needed"
    return None


_nonneg = AtLeast(0)
_positive = AtLeast(1)
_ge_minus1 = AtLeast(-1)

# --- topic-level configs (LogConfig) and the broker property that sets each default.

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    ConfigDef("cleanup.policy", LIST, ["delete"], choices=("compact", "delete")),
    ConfigDef("compression.gzip.level", INT, -1, validator=_gzip_level),
    ConfigDef("compression.lz4.level", INT, 9, validator=Between(1, 17)),
    ConfigDef("compression.type", STRING, "producer",
              choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("compression.zstd.level", INT, 3, validator=Between(-131072, 22)),
    ConfigDef("delete.retention.ms", LONG, 86_400_000, validator=_nonneg),
    # share groups' dead-letter topics (KIP-1191): no share groups here, kept as set
    ConfigDef("errors.deadletterqueue.group.enable", BOOLEAN, False),
    ConfigDef("file.delete.delay.ms", LONG, 60_000, validator=_nonneg),
    ConfigDef("flush.messages", LONG, (1 << 63) - 1, validator=_positive),
    ConfigDef("flush.ms", LONG, (1 << 63) - 1, validator=_nonneg),
    ConfigDef("follower.replication.throttled.replicas", LIST, [],
              validator=_ThrottledReplicas("follower.replication.throttled.replicas")),
    ConfigDef("index.interval.bytes", INT, 4096, validator=_nonneg),
    ConfigDef("leader.replication.throttled.replicas", LIST, [],
              validator=_ThrottledReplicas("leader.replication.throttled.replicas")),
    ConfigDef("local.retention.bytes", LONG, -2, validator=AtLeast(-2)),
    ConfigDef("local.retention.ms", LONG, -2, validator=AtLeast(-2)),
    ConfigDef("max.compaction.lag.ms", LONG, (1 << 63) - 1, validator=_positive),
    # a record's size once decompressed, checked where a compressed batch is validated
    ConfigDef("max.decompressed.message.bytes", INT, 2_147_483_639,
              validator=Between(1, 2_147_483_639)),
    ConfigDef("max.message.bytes", INT, 1_048_588, validator=_nonneg),
    ConfigDef("message.timestamp.after.max.ms", LONG, 3_600_000, validator=_nonneg),  # KIP-1030
    ConfigDef("message.timestamp.before.max.ms", LONG, (1 << 63) - 1, validator=_nonneg),
    ConfigDef("message.timestamp.type", STRING, "CreateTime", choices=("CreateTime", "LogAppendTime")),
    ConfigDef("min.cleanable.dirty.ratio", DOUBLE, 0.5, validator=Between(0, 1)),
    ConfigDef("min.compaction.lag.ms", LONG, 0, validator=_nonneg),
    ConfigDef("min.insync.replicas", INT, 1, validator=_positive),
    ConfigDef("preallocate", BOOLEAN, False),
    # tiered storage's upload lags: no remote storage here, kept as set
    ConfigDef("remote.copy.lag.bytes", LONG, -1, validator=AtLeast(-1)),
    ConfigDef("remote.copy.lag.ms", LONG, 0, validator=AtLeast(-1)),
    ConfigDef("remote.log.copy.disable", BOOLEAN, False),
    ConfigDef("remote.log.delete.on.disable", BOOLEAN, False),
    ConfigDef("remote.storage.enable", BOOLEAN, False),
    ConfigDef("retention.bytes", LONG, -1),
    ConfigDef("retention.ms", LONG, 604_800_000, validator=_ge_minus1),
    # Kafka 4.x's floor (1 MiB); tests that want tiny segments set the internal
    # config below instead, as Kafka's own tests do.
    ConfigDef("segment.bytes", INT, 1_073_741_824, validator=AtLeast(1_048_576)),
    ConfigDef("internal.segment.bytes", INT, None, validator=AtLeast(14), internal=True),
    ConfigDef("segment.index.bytes", INT, 10_485_760, validator=AtLeast(4)),
    ConfigDef("segment.jitter.ms", LONG, 0, validator=_nonneg),
    ConfigDef("segment.ms", LONG, 604_800_000, validator=_positive),
    ConfigDef("unclean.leader.election.enable", BOOLEAN, False),
]}

# Broker property that supplies each topic config's default (Kafka's synonyms).
TOPIC_CONFIG_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.type": "compression.type",
    "compression.zstd.level": "compression.zstd.level",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.decompressed.message.bytes": "max.decompressed.message.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "remote.copy.lag.bytes": "log.remote.copy.lag.bytes",
    "remote.copy.lag.ms": "log.remote.copy.lag.ms",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}

# --- broker properties --------------------------------------------------------------

_BROKER_DEFS: list[ConfigDef] = [
    ConfigDef("node.id", INT, 1, validator=_nonneg),
    ConfigDef("broker.id", INT, -1),
    ConfigDef("listeners", LIST, ["PLAINTEXT://127.0.0.1:9092"]),
    ConfigDef("advertised.listeners", LIST, None),
    # (lists to Kafka 4; kcoord splits them where it reads them)
    ConfigDef("log.dirs", STRING, "./data", reported_type=LIST),
    ConfigDef("log.dir", STRING, None, reported_type=LIST),
    ConfigDef("socket.request.max.bytes", INT, 104_857_600, validator=_positive),
    ConfigDef("connections.max.idle.ms", LONG, 600_000),
    ConfigDef("auto.create.topics.enable", BOOLEAN, True),
    ConfigDef("delete.topic.enable", BOOLEAN, True),
    ConfigDef("num.partitions", INT, 1, validator=_positive),
    ConfigDef("default.replication.factor", INT, 1, validator=_positive),
    ConfigDef("offsets.topic.num.partitions", INT, 50, validator=_positive),
    ConfigDef("offsets.topic.replication.factor", SHORT, 1, validator=_positive),
    ConfigDef("offsets.topic.segment.bytes", INT, 104_857_600, validator=_positive),
    ConfigDef("offsets.topic.compression.codec", INT, 0, validator=_nonneg),
    ConfigDef("offsets.retention.minutes", INT, 10_080, validator=_positive),
    ConfigDef("offsets.retention.check.interval.ms", LONG, 600_000, validator=_positive),
    ConfigDef("offsets.commit.timeout.ms", INT, 5_000, validator=_positive),
    ConfigDef("offset.metadata.max.bytes", INT, 4096),
    ConfigDef("group.initial.rebalance.delay.ms", INT, 3000, validator=_nonneg),
    ConfigDef("group.min.session.timeout.ms", INT, 6000),
    ConfigDef("group.max.session.timeout.ms", INT, 1_800_000),
    ConfigDef("group.max.size", INT, (1 << 31) - 1, validator=_positive),
    ConfigDef("group.coordinator.append.linger.ms", INT, -1, validator=AtLeast(-1)),
    ConfigDef("group.coordinator.rebalance.protocols", LIST, ["classic", "consumer"],
              choices=("classic", "consumer", "share", "streams"),
              validator=lambda v: None if "classic" in v
              else "Disabling the 'classic' protocol is not supported.",
              doc="classic, and consumer for the KIP-848 consumer group protocol."),
    ConfigDef("group.consumer.session.timeout.ms", INT, 45_000, validator=_positive),
    ConfigDef("group.consumer.min.session.timeout.ms", INT, 45_000, validator=_positive),
    ConfigDef("group.consumer.max.session.timeout.ms", INT, 60_000, validator=_positive),
    ConfigDef("group.consumer.heartbeat.interval.ms", INT, 5_000, validator=_positive),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", INT, 5_000, validator=_positive),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", INT, 15_000, validator=_positive),
    ConfigDef("group.consumer.max.size", INT, (1 << 31) - 1, validator=_positive),
    ConfigDef("group.consumer.assignors", LIST, ["uniform", "range"],  # (Kafka 4.4's default)
              validator=lambda v: _assignors_problem(v)),
    ConfigDef("group.consumer.assignment.interval.ms", INT, 1_000, validator=_nonneg),
    ConfigDef("group.consumer.migration.policy", STRING, "bidirectional",
              validator=lambda v: None if v.lower() in _MIGRATION_POLICIES else
              "String must be one of (case insensitive): " + ", ".join(_MIGRATION_POLICIES),
              doc="Online migration between classic and consumer groups: a consumer-protocol "
                  "member joining a running classic group upgrades it, the last one leaving "
                  "downgrades it."),
    ConfigDef("log.cleaner.backoff.ms", LONG, 15_000, validator=_nonneg),
    ConfigDef("log.cleaner.enable", BOOLEAN, True),
    ConfigDef("log.retention.minutes", INT, None),
    ConfigDef("log.retention.hours", INT, 168),
    ConfigDef("log.retention.check.interval.ms", LONG, 300_000, validator=_positive),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", INT, 60_000, validator=_nonneg),
    ConfigDef("log.roll.hours", INT, 168, validator=_positive),
    ConfigDef("fetch.max.bytes", INT, 57_671_680, validator=AtLeast(1024)),
    ConfigDef("producer.id.expiration.ms", INT, 86_400_000, validator=_positive),
    ConfigDef("transaction.state.log.num.partitions", INT, 50, validator=_positive),
    ConfigDef("transaction.state.log.segment.bytes", INT, 104_857_600, validator=_positive),
    ConfigDef("transaction.max.timeout.ms", INT, 900_000, validator=_positive),
    ConfigDef("transactional.id.expiration.ms", INT, 604_800_000, validator=_positive),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10_000,
              validator=_positive),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3_600_000,
              validator=_positive),
    ConfigDef("max.incremental.fetch.session.cache.slots", INT, 1000, validator=_nonneg),
    ConfigDef("kcoord.transaction.version", INT, 2, validator=lambda v: None if 0 <= v <= 2
              else "Value must be 0, 1 or 2",
              doc="The transaction.version feature level (kcoord property; Kafka sets it with "
                  "kafka-storage format --feature): 2, Kafka 4.4's, lets Java producers use "
                  "the second transaction protocol (KIP-890); 1 or 0 keeps them to the first."),
    ConfigDef("kcoord.fsync.policy", STRING, "never", choices=("never", "batch", "always"),
              doc="When appends are fsynced before they are acknowledged (kcoord property)."),
    ConfigDef("kcoord.offsets.topic.min.compaction.lag.ms", LONG, 0, validator=_nonneg,
              doc="The min.compaction.lag.ms topic config __consumer_offsets is created with, "
                  "as offsets.topic.segment.bytes gives its segment.bytes (kcoord property; "
                  "Kafka creates it without one): how long superseded offset commits stay "
                  "for kcoord pipeline history. Changed later with kafka-configs on the topic."),
    # Security: each of these can also be given for one listener alone,
    # listener.name.<listener>.<property> (and the SASL ones for one mechanism,
    # listener.name.<listener>.<mechanism>.<property>), as on Kafka.
    ConfigDef("authorizer.class.name", STRING, "",
              doc="org.apache.kafka.metadata.authorizer.StandardAuthorizer turns on ACLs."),
    # the authorizer's own settings: Kafka's DescribeConfigs does not list them
    ConfigDef("super.users", STRING, None, internal=True),
    ConfigDef("allow.everyone.if.no.acl.found", BOOLEAN, False, internal=True),
    ConfigDef("quota.window.num", INT, 11, validator=_positive),
    ConfigDef("quota.window.size.seconds", INT, 1, validator=_positive),
    ConfigDef("sasl.enabled.mechanisms", LIST, ["GSSAPI"]),
    ConfigDef("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI"),
    ConfigDef("sasl.server.max.receive.size", INT, 524_288),
    ConfigDef("connections.max.reauth.ms", LONG, 0),
    ConfigDef("connection.failed.authentication.delay.ms", INT, 100, validator=_nonneg),
    ConfigDef("ssl.keystore.type", STRING, "JKS"),
    ConfigDef("ssl.keystore.location", STRING, None),
    ConfigDef("ssl.keystore.password", PASSWORD, None),
    ConfigDef("ssl.key.password", PASSWORD, None),
    ConfigDef("ssl.keystore.certificate.chain", PASSWORD, None),
    ConfigDef("ssl.keystore.key", PASSWORD, None),
    ConfigDef("ssl.truststore.type", STRING, "JKS"),
    ConfigDef("ssl.truststore.location", STRING, None),
    ConfigDef("ssl.truststore.password", PASSWORD, None),
    ConfigDef("ssl.truststore.certificates", PASSWORD, None),
    ConfigDef("ssl.client.auth", STRING, "none", choices=("required", "requested", "none")),
    ConfigDef("ssl.enabled.protocols", LIST, ["TLSv1.2", "TLSv1.3"]),
    ConfigDef("ssl.protocol", STRING, "TLSv1.3"),
    ConfigDef("ssl.cipher.suites", LIST, []),
    ConfigDef("ssl.principal.mapping.rules", STRING, "DEFAULT"),
    ConfigDef("ssl.endpoint.identification.algorithm", STRING, "https"),
]

# These synonyms are unset by default: a coarser property supplies the value
# (log.retention.hours, log.roll.hours) or the behaviour is "never" (flush).
_SYNONYMS_WITHOUT_DEFAULT = {"retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"}


def _synonym_defs() -> list[ConfigDef]:
    """The broker property behind each topic config: same type, rules and default."""
    return [
        dataclasses.replace(defn, name=TOPIC_CONFIG_SYNONYMS[name],
                            default=None if name in _SYNONYMS_WITHOUT_DEFAULT else defn.default)
        for name, defn in TOPIC_CONFIGS.items() if name in TOPIC_CONFIG_SYNONYMS
    ]


BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _BROKER_DEFS + _synonym_defs()}

# The broker properties Kafka 4.4 lets IncrementalAlterConfigs and AlterConfigs
# change while it runs (DescribeConfigs answers the others read-only), of those
# kcoord knows; all of them for the whole cluster as well as per broker.
# ``listeners`` is dynamic on Kafka but not here: kcoord binds its listeners once.
DYNAMIC_BROKER_CONFIGS = frozenset({
    "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "group.consumer.assignment.interval.ms", "log.cleaner.backoff.ms",
    "log.cleaner.delete.retention.ms", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms", "log.cleanup.policy",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.index.interval.bytes",
    "log.index.size.max.bytes", "log.local.retention.bytes", "log.local.retention.ms",
    "log.message.timestamp.after.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.type", "log.preallocate", "log.remote.copy.lag.bytes",
    "log.remote.copy.lag.ms", "log.retention.bytes", "log.retention.ms",
    "log.roll.jitter.ms", "log.roll.ms", "log.segment.bytes", "log.segment.delete.delay.ms",
    "max.decompressed.message.bytes", "message.max.bytes", "min.insync.replicas",
    "producer.id.expiration.ms",
    "unclean.leader.election.enable",
})
# The development defaults, with Kafka's own value beside each (README lists these).
# Kafka's defaults where kcoord's own differ even under --kafka-defaults: a
# development broker listens on loopback only and keeps its data in ./data.
KAFKA_OWN_DEFAULTS: dict[str, Any] = {
    "listeners": "PLAINTEXT://:9092",
    "log.dirs": "/tmp/kafka-logs",  # log.dirs unset: log.dir's default
}

DEV_DEFAULTS: dict[str, tuple[Any, Any]] = {
    # property: (kcoord development value, Kafka's default)
    "group.initial.rebalance.delay.ms": (0, 3000),
    "group.consumer.heartbeat.interval.ms": (500, 5_000),
    "group.consumer.min.heartbeat.interval.ms": (500, 5_000),
    "group.consumer.assignment.interval.ms": (0, 1_000),
    "offsets.topic.segment.bytes": (1_048_576, 104_857_600),
    "log.segment.bytes": (67_108_864, 1_073_741_824),
    "log.roll.hours": (1, 168),
    "log.cleaner.backoff.ms": (1_000, 15_000),
    "kcoord.offsets.topic.min.compaction.lag.ms": (86_400_000, 0),
}

# Properties Kafka accepts that have no effect on a single kcoord node; they are
# accepted quietly instead of warned about (a copied server.properties has them).
_IGNORED_QUIETLY = {
    "process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "controller.listener.names", "inter.broker.listener.name", "listener.security.protocol.map",
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir",
    "transaction.state.log.replication.factor", "transaction.state.log.min.isr",
    "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
    "zookeeper.connect", "zookeeper.connection.timeout.ms",
}

# Kafka's ACL authorizer (KRaft's, and the ZooKeeper-era name of the same rules).
AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer")
# Kafka's listener.security.protocol.map default: a listener named as a protocol.
_DEFAULT_PROTOCOL_MAP = {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
# listener.name.<listener>.<property>; the property may name a SASL mechanism
# first (listener.name.sasl_ssl.plain.sasl.jaas.config).
_LISTENER_PREFIX = re.compile(r"listener\.name\.([A-Za-z0-9_-]+)\.(.+)")
_PER_MECHANISM = {"sasl.jaas.config", "connections.max.reauth.ms",
                  "sasl.server.callback.handler.class", "sasl.login.class"}
_JAAS_DEF = ConfigDef("sasl.jaas.config", PASSWORD, None)
HIDDEN = "[hidden]"  # how Kafka shows a password-typed value in its logs


@dataclass(frozen=True)
class ListenerSpec:
    """One of ``listeners``: ``NAME://host:port``."""
    name: str
    host: str
    port: int

_LISTENER = re.compile(r"^(?:(?P<name>[A-Za-z0-9_]+)://)?(?P<host>\[[^\]]*\]|[^:]*):(?P<port>-?\d+)$")


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or '""'
    if value is None or value == "":
        return '""'
    return str(value).lower() if isinstance(value, bool) else str(value)


# KAFKA_* variables that Apache Kafka's image does not turn into properties.
_NOT_PROPERTIES_ENV = {
    "KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME"}


def properties_from_env(env) -> dict[str, str]:
    """Broker properties from ``KAFKA_*`` variables, as Apache Kafka's image makes
    them (KafkaDockerWrapper): ``KAFKA_`` dropped, lower case, ``_`` -> ``.``,
    ``___`` -> ``-``, ``__`` -> ``_`` (``KAFKA_NUM_PARTITIONS=3`` is
    ``num.partitions=3``); without ``KAFKA_LISTENERS``, the advertised listeners on
    0.0.0.0 (the image's configure script)."""
    props = {}
    for key, value in env.items():
        if key.startswith("KAFKA_") and key not in _NOT_PROPERTIES_ENV:
            name = key.replace("KAFKA_", "").lower().replace("_", ".")
            props[name.replace("...", "-").replace("..", "_")] = value
    if "listeners" not in props and props.get("advertised.listeners"):
        props["listeners"] = re.sub(r"://[^:]*:", "://0.0.0.0:", props["advertised.listeners"])
    return props


def parse_listener(spec: str) -> tuple[str, str, int]:
    """``PLAINTEXT://host:port`` -> (listener name, host, port)."""
    m = _LISTENER.match(spec.strip())
    if not m:
        raise ValueError(f"invalid listener {spec!r}: expected [NAME://]host:port")
    host = m.group("host").strip("[]")
    port = int(m.group("port"))
    if not 0 <= port <= 65535:
        raise ValueError(f"invalid listener {spec!r}: port {port} is outside 0-65535")
    return (m.group("name") or "PLAINTEXT").upper(), host, port


def read_properties(path: str | Path) -> dict[str, str]:
    """A ``.properties`` file read as Java's ``Properties.load(InputStream)`` reads
    it (Kafka loads ``server.properties`` with it): as ISO-8859-1 bytes, every
    other character written as ``\\uXXXX``."""
    return parse_properties(Path(path).read_bytes().decode("iso-8859-1"))


_PROPERTY_BLANKS = " \t\f"
_PROPERTY_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """``Properties.load``: ``#`` and ``!`` comment lines; a key ends at the first
    unescaped ``=``, ``:`` or blank, and one ``=`` or ``:`` and the blanks around
    it separate it from the value; a line ending in an odd number of backslashes
    continues on the next, whose leading blanks are dropped; ``\\t \\n \\r \\f``,
    ``\\uXXXX`` and a backslash before any other character (``\\=``, ``\\\\``) are
    escapes, in keys and values alike."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n and line[i] not in "=:" + _PROPERTY_BLANKS:
            i += 2 if line[i] == "\\" else 1
        key_end = min(i, n)
        while i < n and line[i] in _PROPERTY_BLANKS:
            i += 1
        if i < n and line[i] in "=:":
            i += 1
            while i < n and line[i] in _PROPERTY_BLANKS:
                i += 1
        props[_unescape(line[:key_end])] = _unescape(line[i:])
    return props


def _logical_lines(text: str):
    """The logical lines of a properties text: comments and blank lines dropped,
    continuations joined (their leading blanks dropped)."""
    pending: str | None = None
    for natural in re.split(r"\r\n|\r|\n", text):
        if pending is None:
            line = natural.lstrip(_PROPERTY_BLANKS)
            if not line or line[0] in "#!":
                continue
        else:
            line = pending + natural.lstrip(_PROPERTY_BLANKS)
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            # nothing yet (a lone backslash): the next line starts afresh, so it may
            # be blank or a comment, as Java's LineReader reads it
            pending = line[:-1] or None
            continue
        pending = None
        yield line
    if pending is not None:
        yield pending


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        c = text[i + 1]
        if c == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uxxxx encoding in {text!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_PROPERTY_ESCAPES.get(c, c))
        i += 2
    return "".join(out)


class BrokerConfig:
    """Effective broker properties, with where each value came from.

    ``sources[name]`` is ``"default"`` (Kafka's default), ``"dev"`` (a kcoord
    development default) or ``"static"`` (set in a file, an override or a flag).
    """

    def __init__(self, values: dict[str, Any], sources: dict[str, str],
                 quiet: dict[str, str] | None = None):
        self.values = values
        self.sources = sources
        # Properties accepted without effect of their own, as given; the listener
        # checks read listener.security.protocol.map and controller.listener.names.
        self.quiet = quiet or {}
        # listener.name.<listener>.<property> values, by listener name (upper case)
        self.per_listener: dict[str, dict[str, Any]] = {}
        self.protocols: dict[str, str] = {}  # each listener's security protocol

    @classmethod
    def build(
        cls,
        properties: dict[str, str] | None = None,
        *,
        kafka_defaults: bool = False,
        warn: bool = True,
    ) -> "BrokerConfig":
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for name, defn in BROKER_CONFIGS.items():
            values[name] = defn.default
            sources[name] = "default"
        if not kafka_defaults:
            for name, (dev_value, _kafka_value) in DEV_DEFAULTS.items():
                values[name] = dev_value
                sources[name] = "dev"
        quiet = {}
        per_listener: dict[str, dict[str, Any]] = {}
        for name, raw in (properties or {}).items():
            prefixed = _LISTENER_PREFIX.fullmatch(name)
            if prefixed is not None:
                listener_name, prop = prefixed[1].upper(), prefixed[2]
                defn = BROKER_CONFIGS.get(prop)
                if defn is None and "." in prop and prop.split(".", 1)[1] in _PER_MECHANISM:
                    defn = BROKER_CONFIGS.get(prop.split(".", 1)[1], _JAAS_DEF)
                if defn is None and prop == "sasl.jaas.config":
                    defn = _JAAS_DEF
                if defn is None:
                    if warn:
                        log.warning("config.unknown_property_ignored", property=name)
                    continue
                try:
                    per_listener.setdefault(listener_name, {})[prop] = _parse_value(defn, raw)
                except ValueError as exc:
                    raise ValueError(f"invalid broker property {name}: {exc}") from None
                continue
            defn = BROKER_CONFIGS.get(name)
            if defn is None:
                if name in _IGNORED_QUIETLY:
                    quiet[name] = raw
                elif warn:
                    log.warning("config.unknown_property_ignored", property=name)
                continue
            try:
                values[name] = _parse_value(defn, raw)
            except ValueError as exc:
                raise ValueError(f"invalid broker property {name}={raw!r}: {exc}") from None
            sources[name] = "static"
        config = cls(values, sources, quiet)
        config.per_listener = per_listener
        config._check(warn)
        return config

    def _check(self, warn: bool) -> None:
        for name in ("offsets.topic.replication.factor", "default.replication.factor"):
            if self.sources.get(name) == "static" and self.values[name] != 1:
                if warn:
                    log.warning("config.replication_factor_forced_to_1", property=name,
                                requested=self.values[name])
                self.values[name] = 1
        self._check_listeners()
        self._check_consumer_groups()
        authorizer = (self.values.get("authorizer.class.name") or "").strip()
        if authorizer and authorizer not in AUTHORIZER_CLASSES:
            raise ValueError(f"authorizer.class.name: {authorizer} is not served: kcoord has "
                             f"Kafka's ACL authorizer, {AUTHORIZER_CLASSES[0]}")
        log_dirs = [d for d in str(self.values.get("log.dirs") or "").split(",") if d.strip()]
        if not self._first_log_dir():
            raise ValueError("log.dirs (the data dir, --data-dir) is empty: at least one "
                             "directory must be named, as Kafka requires")
        if warn and len(log_dirs) > 1:
            log.warning("config.extra_log_dirs_ignored", used=log_dirs[0].strip(),
                        ignored=[d.strip() for d in log_dirs[1:]])

    def _check_consumer_groups(self) -> None:
        """The bounds Kafka's GroupCoordinatorConfig requires of the consumer group
        protocol's session timeout and heartbeat interval."""
        v = self.values
        for setting, low, high in (
                ("group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
                 "group.consumer.max.session.timeout.ms"),
                ("group.consumer.heartbeat.interval.ms",
                 "group.consumer.min.heartbeat.interval.ms",
                 "group.consumer.max.heartbeat.interval.ms")):
            if v[high] < v[low]:
                raise ConfigValueError(high, v[high], f"{high} must be greater than or "
                                                      f"equal to {low}")
            if v[setting] < v[low]:
                raise ConfigValueError(setting, v[setting], f"{setting} must be greater than "
                                                            f"or equal to {low}")
            if v[setting] > v[high]:
                raise ConfigValueError(setting, v[setting], f"{setting} must be less than or "
                                                            f"equal to {high}")
        if v["group.consumer.heartbeat.interval.ms"] >= v["group.consumer.session.timeout.ms"]:
            raise ConfigValueError(
                "group.consumer.heartbeat.interval.ms", v["group.consumer.heartbeat.interval.ms"],
                "group.consumer.heartbeat.interval.ms must be less than "
                "group.consumer.session.timeout.ms")

    def _check_listeners(self) -> None:
        """As Kafka checks them (KafkaConfig.listeners, advertisedListeners): names
        and ports unique, each name's security protocol known (the map, or the
        name itself), advertised names among the listeners'; each protocol one of Kafka's four."""
        protocols = dict(_DEFAULT_PROTOCOL_MAP)
        protocol_map = self.quiet.get("listener.security.protocol.map")
        if protocol_map:
            protocols = {}
            for entry in protocol_map.split(","):
                listener_name, sep, protocol = entry.strip().partition(":")
                if not sep or not listener_name or not protocol:
                    raise ValueError(f"listener.security.protocol.map: {entry.strip()!r} is "
                                     "not NAME:PROTOCOL")
                protocols[listener_name.strip().upper()] = protocol.strip().upper()
        listeners = self.listeners
        names = [spec.name for spec in listeners]
        if not listeners:
            raise ValueError("listeners: at least one listener is needed")
        if len(set(names)) != len(names):
            raise ValueError(f"listeners: each listener must have a different name: {names}")
        ports = [spec.port for spec in listeners if spec.port != 0]
        if len(set(ports)) != len(ports):
            raise ValueError(f"listeners: each listener must have a different port: {ports}")
        for prop, specs in (("listeners", listeners),
                            ("advertised.listeners", self.advertised_specs())):
            for spec in specs:
                protocol = protocols.get(spec.name)
                if protocol is None:
                    raise ValueError(
                        f"{prop}: listener {spec.name} has no security protocol (give it one "
                        "in listener.security.protocol.map, as NAME:PLAINTEXT)")
                if protocol not in _DEFAULT_PROTOCOL_MAP:
                    raise ValueError(f"{prop}: listener {spec.name} has an unknown security "
                                     f"protocol {protocol} (PLAINTEXT, SSL, SASL_PLAINTEXT or "
                                     "SASL_SSL)")
        self.protocols = {name: protocols[name] for name in names}
        unknown = [spec.name for spec in self.advertised_specs() if spec.name not in names]
        if unknown:
            raise ValueError(f"advertised.listeners: {unknown} are not among the listeners "
                             f"{names}")

    # --- dynamic broker configs (IncrementalAlterConfigs/AlterConfigs, BROKER) -------

    def set_dynamic(self, per_broker: dict[str, Any], cluster_default: dict[str, Any]) -> None:
        """Lay the dynamic configs over the static ones: this broker's own
        (source ``dynamic-broker``) over the cluster-wide defaults
        (``dynamic-default``) over what the broker started with; values parsed."""
        if not hasattr(self, "_started_with"):
            self._started_with = (dict(self.values), dict(self.sources))
        values, sources = (dict(d) for d in self._started_with)
        for layer, source in ((cluster_default, "dynamic-default"),
                              (per_broker, "dynamic-broker")):
            for name, value in layer.items():
                if name in BROKER_CONFIGS:
                    values[name] = value
                    sources[name] = source
        self.values, self.sources = values, sources
        self.dynamic = {"dynamic-broker": dict(per_broker),
                        "dynamic-default": dict(cluster_default)}

    def layers(self, name: str) -> list[tuple[Any, str]]:
        """(value, source) of a property at each level that gives it one, from the
        one that wins: this broker's dynamic value, the cluster's, the static one,
        the default."""
        started_values, started_sources = getattr(
            self, "_started_with", (self.values, self.sources))
        out = [(layer[name], source) for source, layer in getattr(self, "dynamic", {}).items()
               if name in layer]
        if started_sources.get(name) == "static":
            out.append((started_values[name], "static"))
        out.append((started_values.get(name) if started_sources.get(name) == "dev"
                    else BROKER_CONFIGS[name].default, "default"))
        return out

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def for_listener(self, listener: str, name: str, mechanism: str | None = None) -> Any:
        """A property as listener ``listener`` (and SASL ``mechanism``) sees it:
        ``listener.name.<listener>.<mechanism>.<name>``, else
        ``listener.name.<listener>.<name>``, else the broker's own value."""
        own = self.per_listener.get(listener.upper(), {})
        if mechanism is not None and f"{mechanism.lower()}.{name}" in own:
            return own[f"{mechanism.lower()}.{name}"]
        if name in own:
            return own[name]
        return self.values.get(name)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def effective(self) -> dict[str, str]:
        """Every property's value as the broker runs with it (passwords hidden)."""
        return {name: HIDDEN if BROKER_CONFIGS[name].type == PASSWORD else _shown(value)
                for name, value in sorted(self.values.items())}

    def differences(self) -> dict[str, str]:
        """Every property whose value is not Kafka's default: ``value (default X;
        why)``, why being ``development default``, ``set`` (a file, an override or
        a flag) or ``kcoord's default`` (where kcoord listens and keeps its data
        when nothing says: loopback and ``./data``)."""
        why = {"dev": "development default", "static": "set",
               "default": "kcoord's default"}
        out = {}
        for name, value in sorted(self.values.items()):
            default = KAFKA_OWN_DEFAULTS.get(name, BROKER_CONFIGS[name].default)
            if value != default:
                shown = HIDDEN if BROKER_CONFIGS[name].type == PASSWORD else _shown(value)
                out[name] = (f"{shown} (default {_shown(default)}; "
                             f"{why.get(self.sources[name], self.sources[name])})")
        for listener, props in sorted(self.per_listener.items()):
            for prop, value in sorted(props.items()):
                secret = (prop.endswith("sasl.jaas.config") or
                          BROKER_CONFIGS.get(prop, _JAAS_DEF).type == PASSWORD)
                out[f"listener.name.{listener.lower()}.{prop}"] = (
                    f"{HIDDEN if secret else _shown(value)} (set)")
        return out

    # --- derived values ---------------------------------------------------------

    @property
    def node_id(self) -> int:
        if self.sources.get("node.id") != "static" and self.values["broker.id"] >= 0:
            return self.values["broker.id"]
        return self.values["node.id"]

    @property
    def listeners(self) -> list[ListenerSpec]:
        """The listeners served: a KRaft controller's (``controller.listener.names``,
        in a configuration written for Kafka) is not, as kcoord has no controller."""
        controllers = {n.strip().upper() for n in
                       self.quiet.get("controller.listener.names", "").split(",")}
        return [spec for spec in (ListenerSpec(*parse_listener(s))
                                  for s in self.values["listeners"] or [])
                if spec.name not in controllers]

    def advertised_specs(self) -> list[ListenerSpec]:
        return [ListenerSpec(*parse_listener(spec))
                for spec in self.values.get("advertised.listeners") or []]

    @property
    def listener(self) -> tuple[str, int]:
        """The first listener's host and port."""
        first = self.listeners[0]
        return first.host, first.port

    def advertised_for(self, name: str) -> tuple[str, int]:
        """What clients that connect to listener ``name`` are told to connect to:
        its advertised.listeners entry, else its own address (port 0 stands for
        the port the listener got)."""
        advertised = {spec.name: spec for spec in self.advertised_specs()}
        spec = advertised.get(name) or next(s for s in self.listeners if s.name == name)
        host = spec.host
        if host in ("", "0.0.0.0", "::"):
            # Like Kafka, an unspecified bind address is not something a client can
            # dial; advertise loopback unless told otherwise.
            host = "127.0.0.1" if host != "::" else "::1"
        return host, spec.port

    @property
    def advertised(self) -> tuple[str, int]:
        """What the first listener advertises."""
        return self.advertised_for(self.listeners[0].name)

    @property
    def data_dir(self) -> Path:
        return Path(self._first_log_dir())

    def _first_log_dir(self) -> str:
        log_dirs = self.values.get("log.dir") if self.sources.get("log.dir") == "static" else None
        log_dirs = log_dirs or self.values["log.dirs"]
        return str(log_dirs).split(",")[0].strip()

    def topic_default(self, topic_config: str) -> Any:
        """The broker-level default of a topic config (via its synonym property)."""
        if topic_config == "retention.ms":
            return self.retention_ms
        if topic_config == "segment.ms":
            return self.roll_ms
        if topic_config == "segment.jitter.ms":
            jitter = self.values.get("log.roll.jitter.ms")
            return 0 if jitter is None else jitter
        if topic_config == "flush.ms":
            flush = self.values.get("log.flush.interval.ms")
            return TOPIC_CONFIGS["flush.ms"].default if flush is None else flush
        synonym = TOPIC_CONFIG_SYNONYMS.get(topic_config)
        if synonym is None:  # a topic-only config (remote storage, throttled replicas)
            return TOPIC_CONFIGS[topic_config].default
        return self.values[synonym]

    @property
    def retention_ms(self) -> int:
        if self.values.get("log.retention.ms") is not None:
            return self.values["log.retention.ms"]
        if self.values.get("log.retention.minutes") is not None:
            return self.values["log.retention.minutes"] * 60_000
        return self.values["log.retention.hours"] * 3_600_000

    @property
    def roll_ms(self) -> int:
        if self.values.get("log.roll.ms") is not None:
            return self.values["log.roll.ms"]
        return self.values["log.roll.hours"] * 3_600_000

    def with_overrides(self, **props: Any) -> "BrokerConfig":
        values = dict(self.values)
        sources = dict(self.sources)
        for name, value in props.items():
            values[name] = value
            sources[name] = "static"
        config = BrokerConfig(values, sources, self.quiet)
        config.per_listener, config.protocols = self.per_listener, self.protocols
        return config

    def protocol_of(self, listener: str) -> str:
        """The security protocol of listener ``listener``."""
        return self.protocols.get(listener) or _DEFAULT_PROTOCOL_MAP.get(listener, "PLAINTEXT")


def parse_config_value(defn: ConfigDef, raw: Any) -> Any:
    """A value parsed and checked as Kafka's ConfigDef does; ConfigValueError if invalid."""
    return _parse_value(defn, raw)


def validate_topic_config(name: str, raw: str | None) -> Any:
    """Parse one topic config value; raises KeyError (unknown) or ValueError (invalid)."""
    defn = TOPIC_CONFIGS[name]
    return _parse_value(defn, raw)


def config_type_name(type_code: int) -> str:
    return _TYPE_NAMES.get(type_code, "unknown")

