"""Group configs: the settings a group may have of its own (Kafka 4.x's
``GroupConfig``, resource type GROUP of DescribeConfigs, IncrementalAlterConfigs
and AlterConfigs, ``kafka-configs --entity-type groups``).

Each config falls back to a broker property (its synonym) unless the group sets
it. Kafka's checks, with its messages: the config's own type and lower bound,
the broker's min/max bounds for timeouts and intervals, a session timeout above
the heartbeat interval, the streams assignor among those registered, no
dead-letter topic under ``__``.

Of these, kcoord applies ``consumer.session.timeout.ms``,
``consumer.heartbeat.interval.ms`` and ``consumer.assignment.interval.ms`` to
the consumer group of that id (KIP-848 groups; ``CoordinatorConfig``), clamped
to the broker's current bounds as Kafka clamps them. The share and streams
settings are kept and described as Kafka keeps them; kcoord serves no share or
streams groups for them to act on.

``ConfigFile`` keeps them in ``kcoord-group-configs.json`` in the data dir,
replaced atomically (and fsynced) before a change is acknowledged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcoord.broker.config import (
    BOOLEAN,
    BROKER_CONFIGS,
    INT,
    LIST,
    LONG,
    STRING,
    AtLeast,
    ConfigDef,
    ConfigValueError,
    format_value,
    parse_config_value,
)
from kcoord.storage.files import write_atomically

GROUP_CONFIG_FILE = "kcoord-group-configs.json"
# Kafka's broker defaults for the group properties kcoord does not define (it
# serves no share or streams groups): the values a group falls back to.
_KAFKA_BROKER_DEFAULTS: dict[str, Any] = {
    "group.consumer.min.assignment.interval.ms": 0,
    "group.consumer.max.assignment.interval.ms": 15_000,
    "group.share.session.timeout.ms": 45_000,
    "group.share.min.session.timeout.ms": 45_000,
    "group.share.max.session.timeout.ms": 60_000,
    "group.share.heartbeat.interval.ms": 5_000,
    "group.share.min.heartbeat.interval.ms": 5_000,
    "group.share.max.heartbeat.interval.ms": 15_000,
    "group.share.record.lock.duration.ms": 30_000,
    "group.share.min.record.lock.duration.ms": 15_000,
    "group.share.max.record.lock.duration.ms": 60_000,
    "group.share.delivery.count.limit": 5,
    "group.share.min.delivery.count.limit": 2,
    "group.share.max.delivery.count.limit": 10,
    "group.share.partition.max.record.locks": 2_000,
    "group.share.min.partition.max.record.locks": 100,
    "group.share.max.partition.max.record.locks": 4_000,
    "group.share.assignment.interval.ms": 1_000,
    "group.share.min.assignment.interval.ms": 0,
    "group.share.max.assignment.interval.ms": 15_000,
    "group.streams.session.timeout.ms": 45_000,
    "group.streams.min.session.timeout.ms": 45_000,
    "group.streams.max.session.timeout.ms": 60_000,
    "group.streams.heartbeat.interval.ms": 5_000,
    "group.streams.min.heartbeat.interval.ms": 5_000,
    "group.streams.max.heartbeat.interval.ms": 15_000,
    "group.streams.num.standby.replicas": 0,
    "group.streams.max.standby.replicas": 2,
    "group.streams.initial.rebalance.delay.ms": 3_000,
    "group.streams.assignment.interval.ms": 1_000,
    "group.streams.min.assignment.interval.ms": 0,
    "group.streams.max.assignment.interval.ms": 15_000,
    "group.streams.rack.aware.assignment.tags": [],
    "group.streams.assignors": ["sticky"],
}
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


@dataclass(frozen=True)
class GroupConfig:
    """One group config: its definition, the broker property it falls back to
    (None: its own default), and the broker properties bounding it."""

    defn: ConfigDef
    synonym: str | None = None
    bounds: tuple[str | None, str | None] = (None, None)

    @property
    def name(self) -> str:
        return self.defn.name


def _int(name, low, synonym, bounds=(None, None)):
    return GroupConfig(ConfigDef(name, INT, None, validator=AtLeast(low)), synonym, bounds)


def _own(name, type_, default, **kw):
    return GroupConfig(ConfigDef(name, type_, default, **kw), name)


def _range(prefix: str, what: str) -> tuple[str, str]:
    return f"group.{prefix}.min.{what}", f"group.{prefix}.max.{what}"


# java.time.Duration.parse's ISO-8601 form, [-+]PnDTnHnMn.nS: each part optional
# and signed, at least one given.
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?)([0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def _negative_duration(text: str) -> bool | None:
    """Whether a duration Java parses is negative; None where Java refuses it."""
    match = _DURATION.fullmatch(text)
    if match is None or text[-1:].upper() in ("P", "T"):
        return None
    sign, days, hours, minutes, s_sign, seconds, fraction = match.groups()
    nanos = (int(days or 0) * 86_400 + int(hours or 0) * 3_600 + int(minutes or 0) * 60) \
        * 10**9
    if seconds is not None:
        second_nanos = int(seconds) * 10**9 + int((fraction or "").ljust(9, "0"))
        nanos += -second_nanos if s_sign == "-" else second_nanos
    return (nanos > 0) if sign == "-" else (nanos < 0)


def _share_reset(value: str) -> str | None:
    """Kafka's ShareGroupAutoOffsetResetStrategy.Validator."""
    if value in ("earliest", "latest"):
        return None
    if value.startswith("by_duration:") and \
            _negative_duration(value[len("by_duration:"):]) is False:
        return None
    return (f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must "
            f"be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


GROUP_CONFIGS: dict[str, GroupConfig] = {c.name: c for c in (
    _int("consumer.session.timeout.ms", 1, "group.consumer.session.timeout.ms",
         _range("consumer", "session.timeout.ms")),
    _int("consumer.heartbeat.interval.ms", 1, "group.consumer.heartbeat.interval.ms",
         _range("consumer", "heartbeat.interval.ms")),
    _int("consumer.assignment.interval.ms", 0, "group.consumer.assignment.interval.ms",
         _range("consumer", "assignment.interval.ms")),
    _int("share.session.timeout.ms", 1, "group.share.session.timeout.ms",
         _range("share", "session.timeout.ms")),
    _int("share.heartbeat.interval.ms", 1, "group.share.heartbeat.interval.ms",
         _range("share", "heartbeat.interval.ms")),
    _int("share.record.lock.duration.ms", 1000, "group.share.record.lock.duration.ms",
         _range("share", "record.lock.duration.ms")),
    _int("share.delivery.count.limit", 2, "group.share.delivery.count.limit",
         _range("share", "delivery.count.limit")),
    _int("share.partition.max.record.locks", 100, "group.share.partition.max.record.locks",
         _range("share", "partition.max.record.locks")),
    _own("share.auto.offset.reset", STRING, "latest", validator=_share_reset),
    _own("share.isolation.level", STRING, "read_uncommitted", choices=_ISOLATION_LEVELS),
    _own("share.renew.acknowledge.enable", BOOLEAN, True),
    _int("share.assignment.interval.ms", 0, "group.share.assignment.interval.ms",
         _range("share", "assignment.interval.ms")),
    _int("streams.session.timeout.ms", 1, "group.streams.session.timeout.ms",
         _range("streams", "session.timeout.ms")),
    _int("streams.heartbeat.interval.ms", 1, "group.streams.heartbeat.interval.ms",
         _range("streams", "heartbeat.interval.ms")),
    _int("streams.num.standby.replicas", 0, "group.streams.num.standby.replicas",
         (None, "group.streams.max.standby.replicas")),
    _int("streams.initial.rebalance.delay.ms", 0, "group.streams.initial.rebalance.delay.ms"),
    _int("streams.assignment.interval.ms", 0, "group.streams.assignment.interval.ms",
         _range("streams", "assignment.interval.ms")),
    GroupConfig(ConfigDef("streams.rack.aware.assignment.tags", LIST, None),
                "group.streams.rack.aware.assignment.tags"),
    GroupConfig(ConfigDef("streams.assignor.name", STRING, None), "group.streams.assignors"),
    _own("errors.deadletterqueue.topic.name", STRING, ""),
    _own("errors.deadletterqueue.copy.record.enable", BOOLEAN, False),
)}
# (session, heartbeat) pairs: the session must stay above the heartbeat.
_SESSION_OVER_HEARTBEAT = [(f"{p}.session.timeout.ms", f"{p}.heartbeat.interval.ms")
                           for p in ("consumer", "share", "streams")]


def broker_value(config, prop: str) -> Any:
    """A broker property's value: kcoord's own, or Kafka's default for the group
    properties kcoord does not define."""
    if prop in BROKER_CONFIGS:
        return config[prop]
    return _KAFKA_BROKER_DEFAULTS[prop]


class GroupConfigError(Exception):
    """A change Kafka refuses: INVALID_CONFIG with this message."""


def check(config, configs: dict[str, str]) -> dict[str, Any]:
    """A group's whole new set of configs, parsed; GroupConfigError as Kafka words it."""
    parsed: dict[str, Any] = {}
    for name, raw in configs.items():
        entry = GROUP_CONFIGS.get(name)
        if entry is None:
            raise GroupConfigError(f"Unknown group config name: {name}")
        try:
            parsed[name] = parse_config_value(entry.defn, raw)
        except ConfigValueError as exc:
            raise GroupConfigError(str(exc)) from None
    # Checked as given: a list's repeated values are dropped by its parse (Kafka's
    # ConfigDef), but GroupConfig refuses repeated tags before that.
    raw_tags = configs.get("streams.rack.aware.assignment.tags")
    tags = [t.strip() for t in raw_tags.split(",")] if raw_tags else []
    if len(set(tags)) != len(tags):
        raise GroupConfigError("streams.rack.aware.assignment.tags must not contain duplicate "
                               "tag keys.")
    for name, value in parsed.items():
        low, high = GROUP_CONFIGS[name].bounds
        low_value = None if low is None else broker_value(config, low)
        high_value = None if high is None else broker_value(config, high)
        if low_value is not None and high_value is not None:
            if not low_value <= value <= high_value:
                raise GroupConfigError(f"{name} must be in the range {low_value} to "
                                       f"{high_value} inclusive.")
        elif high_value is not None and value > high_value:
            raise GroupConfigError(f"{name} must be less than or equal to {high_value}")
    assignor = parsed.get("streams.assignor.name")
    registered = broker_value(config, "group.streams.assignors")
    if "streams.assignor.name" in parsed and assignor not in registered:
        raise GroupConfigError(f"streams.assignor.name '{assignor}' is not a registered task "
                               f"assignor. Registered assignors are: [{', '.join(registered)}].")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if session in parsed or heartbeat in parsed:
            s = parsed.get(session, broker_value(config, GROUP_CONFIGS[session].synonym))
            h = parsed.get(heartbeat, broker_value(config, GROUP_CONFIGS[heartbeat].synonym))
            if s <= h:
                raise GroupConfigError(f"{session} must be greater than {heartbeat}")
    dlq = parsed.get("errors.deadletterqueue.topic.name")
    if dlq and dlq.startswith("__"):
        raise GroupConfigError("errors.deadletterqueue.topic.name: DLQ topic name must not "
                               "start with '__'")
    return parsed


def effective(config, group_configs: dict[str, str], name: str) -> Any:
    """The value a group runs with: its own (clamped to the broker's current
    bounds, as Kafka's ``GroupConfig.evaluate``), else the broker's."""
    entry = GROUP_CONFIGS[name]
    raw = group_configs.get(name)
    if raw is None:
        return broker_value(config, entry.synonym)
    value = parse_config_value(entry.defn, raw)
    low, high = entry.bounds
    if low is not None:
        value = max(value, broker_value(config, low))
    if high is not None:
        value = min(value, broker_value(config, high))
    return value


class ConfigFile:
    """Named sets of dynamic configs (name -> {config: value}) in one JSON file of
    the data dir, replaced atomically (fsynced, then renamed) on each change;
    used for the groups' configs and for the dynamic broker configs."""

    def __init__(self, data_dir: Path, filename: str = GROUP_CONFIG_FILE):
        self.path = Path(data_dir) / filename

    def load(self) -> dict[str, dict[str, str]]:
        if not self.path.exists():
            return {}
        data = json.loads(self.path.read_text(encoding="utf-8"))
        return {g: dict(c) for g, c in data.get("groups", {}).items()}

    def save(self, groups: dict[str, dict[str, str]]) -> None:
        """Replace the file; from a worker thread."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(
            {"version": 1, "groups": {g: groups[g] for g in sorted(groups) if groups[g]}},
            indent=1, sort_keys=True))


# The DescribeConfigs source of a group's own value (DYNAMIC_GROUP_CONFIG).
DYNAMIC_GROUP_CONFIG = 8


def kafka_default_text(prop: str) -> str | None:
    value = _KAFKA_BROKER_DEFAULTS.get(prop)
    if value is None:
        return None
    kind = LIST if isinstance(value, list) else LONG
    return format_value(ConfigDef(prop, kind, value), value)
