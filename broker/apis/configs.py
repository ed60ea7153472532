"""Config listings shared by CreateTopics (v5+) and DescribeConfigs."""

from __future__ import annotations

import heapq

from kcoord.broker.groups.group_configs import (
    DYNAMIC_GROUP_CONFIG,
    GROUP_CONFIGS,
    broker_value,
    kafka_default_text,
)
from kcoord.broker.config import (
    BROKER_CONFIGS,
    PASSWORD,
    TOPIC_CONFIG_SYNONYMS,
    TOPIC_CONFIGS,
    format_value,
    parse_config_value,
    validate_topic_config,
)

# DescribeConfigs config_source values.
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


_SOURCES = {"dynamic-broker": DYNAMIC_BROKER_CONFIG, "dynamic-default": DYNAMIC_DEFAULT_BROKER_CONFIG,
            "static": STATIC_BROKER_CONFIG}


def _broker_source(config, name: str) -> int:
    return _SOURCES.get(config.sources.get(name), DEFAULT_CONFIG)


def _synonym_entries(config, prop: str) -> list[dict]:
    """A broker property's synonyms as Kafka lists them: its value at each level
    that sets one (this broker's dynamic config, the cluster's, the static
    properties, the default), the winning one first; nothing for a property
    with no value."""
    if config.get(prop) is None:
        return []
    return [{"name": name, "value": None if BROKER_CONFIGS[name].type == PASSWORD
             else format_value(BROKER_CONFIGS[name], value),
             "source": _SOURCES.get(source, DEFAULT_CONFIG)}
            for name in (prop, *_COARSER.get(prop, ()))
            for value, source in config.layers(name) if value is not None]


# Kafka lists a property's coarser synonyms after it (log.retention.hours after
# log.retention.ms), where the property itself has a value.
_COARSER = {"log.retention.ms": ("log.retention.minutes", "log.retention.hours"),
            "log.roll.ms": ("log.roll.hours",)}


def _broker_synonyms(config, topic_config: str) -> list[dict]:
    # Kafka looks at the topic config's first broker synonym only: retention.ms
    # has none while log.retention.ms is unset, even though log.retention.hours
    # supplies the value (checked against Kafka 3.9).
    prop = TOPIC_CONFIG_SYNONYMS.get(topic_config)
    return [] if prop is None else _synonym_entries(config, prop)


def topic_config_values(broker, overrides: dict[str, str | None]):
    """(name, value string, source, synonyms, ConfigDef) for every topic config."""
    config = broker.config
    for name, defn in TOPIC_CONFIGS.items():
        if defn.internal and overrides.get(name) is None:
            continue  # an internal config is listed only where the topic sets it, as Kafka
        synonyms = _broker_synonyms(config, name)
        value = format_value(defn, config.topic_default(name))
        source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
        if overrides.get(name) is not None:
            value = format_value(defn, validate_topic_config(name, overrides[name]))
            source = TOPIC_CONFIG
            synonyms.insert(0, {"name": name, "value": value, "source": TOPIC_CONFIG})
        yield name, value, source, synonyms, defn


def topic_config_entries(broker, overrides: dict[str, str | None]) -> list[dict]:
    """CreateTopics v5+ ``configs``: the new topic's effective configs, each one the
    request sets as it was written (Kafka's controller echoes " 1000" or
    "compact , delete" as given; DescribeConfigs then shows it parsed)."""
    return [
        {"name": name, "value": value if overrides.get(name) is None else overrides[name],
         "read_only": False, "config_source": source, "is_sensitive": False}
        for name, value, source, _synonyms, _defn in topic_config_values(broker, overrides)
    ]


class CustomConfigDef:
    """What a listing reads of a dynamic broker config kcoord does not know (a
    custom one): Kafka lists it with no value (it could be a secret), no type
    and no documentation, read-only."""

    type = PASSWORD
    doc = None
    config_type = 0
    internal = False


def _custom_values(broker, levels: tuple[str, ...]):
    """The custom dynamic configs set at ``levels`` ("broker" this broker's, ""
    the cluster's), each with its synonyms, the finest level first."""
    sources = {"broker": DYNAMIC_BROKER_CONFIG, "": DYNAMIC_DEFAULT_BROKER_CONFIG}
    names = sorted({name for level in levels for name in broker.broker_configs.get(level, {})
                    if name not in BROKER_CONFIGS})
    for name in names:
        synonyms = [{"name": name, "value": None,
                     "source": sources[level]}
                    for level in levels if name in broker.broker_configs.get(level, {})]
        yield name, None, synonyms[0]["source"], synonyms, CustomConfigDef


def broker_config_values(broker):
    """Every broker config kcoord has, and the custom ones set dynamically, by name."""
    yield from heapq.merge(_known_broker_values(broker),
                           _custom_values(broker, ("broker", "")),
                           key=lambda entry: entry[0])


def _known_broker_values(broker):
    config = broker.config
    for name, defn in sorted(BROKER_CONFIGS.items()):
        if defn.internal:
            continue
        value = format_value(defn, config.get(name))
        source = _broker_source(config, name)
        synonyms = _synonym_entries(config, name)
        if name == "broker.id":
            # A KRaft broker's broker.id is its node.id (KafkaConfig sets one from the other).
            source = _broker_source(config, "node.id")
            value = str(config.node_id)
            synonyms = [{"name": name, "value": value, "source": source}]
            if source == STATIC_BROKER_CONFIG:
                synonyms.append({"name": name, "value": "-1", "source": DEFAULT_CONFIG})
        yield name, value, source, synonyms, defn


def group_config_values(broker, group_id: str):
    """(name, value string, source, synonyms, ConfigDef) for every group config:
    the group's own value (DYNAMIC_GROUP_CONFIG) or its broker property's."""
    config = broker.config
    own = broker.group_configs.get(group_id, {})
    for name, entry in GROUP_CONFIGS.items():
        defn = entry.defn
        prop = entry.synonym
        if prop in BROKER_CONFIGS:
            synonyms = _synonym_entries(config, prop)
        elif prop == name:  # a config with a default of its own
            synonyms = [{"name": name, "value": format_value(defn, defn.default),
                         "source": DEFAULT_CONFIG}]
        else:
            synonyms = [{"name": prop, "value": kafka_default_text(prop),
                         "source": DEFAULT_CONFIG}]
        if name == "streams.assignor.name":  # the first assignor registered
            value = broker_value(config, prop)[0]
        elif prop == name:
            value = format_value(defn, defn.default)
        else:
            value = synonyms[0]["value"]
        source = synonyms[0]["source"]
        if name in own:
            value = format_value(defn, parse_config_value(defn, own[name]))
            source = DYNAMIC_GROUP_CONFIG
            synonyms.insert(0, {"name": name, "value": value, "source": source})
        yield name, value, source, synonyms, defn


def cluster_default_values(broker):
    """The cluster-wide dynamic broker defaults that are set (resource name ""),
    custom ones included."""
    yield from heapq.merge(_known_cluster_defaults(broker), _custom_values(broker, ("",)),
                           key=lambda entry: entry[0])


def _known_cluster_defaults(broker):
    own = broker.broker_configs.get("", {})
    for name in sorted(own):
        defn = BROKER_CONFIGS.get(name)
        if defn is None:
            continue
        value = format_value(defn, parse_config_value(defn, own[name]))
        yield name, value, DYNAMIC_DEFAULT_BROKER_CONFIG, [
            {"name": name, "value": value, "source": DYNAMIC_DEFAULT_BROKER_CONFIG}], defn
