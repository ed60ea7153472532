"""Config listings shared by CreateTopics (v5+) and DescribeConfigs."""

from __future__ import annotations

from broker.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIG_SYNONYMS,
    TOPIC_CONFIGS,
    format_value,
    validate_topic_config,
)

# DescribeConfigs config_source values.
TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


def _broker_source(config, name: str) -> int:
    return STATIC_BROKER_CONFIG if config.sources.get(name) == "static" else DEFAULT_CONFIG


# Topic configs whose broker default can come from several properties, most
# specific first (Kafka lists every one that is set, then the default).
_SYNONYM_CHAINS = {
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
}


def _broker_synonyms(config, topic_config: str) -> list[dict]:
    chain = _SYNONYM_CHAINS.get(topic_config, (TOPIC_CONFIG_SYNONYMS[topic_config],))
    synonyms = []
    for prop in chain:
        value = config.get(prop)
        if value is None:
            continue
        source = _broker_source(config, prop)
        synonyms.append({"name": prop, "value": format_value(BROKER_CONFIGS[prop], value),
                         "source": source})
    return synonyms


def topic_config_values(broker, overrides: dict[str, str | None]):
    """(name, value string, source, synonyms, ConfigDef) for every topic config."""
    config = broker.config
    for name, defn in TOPIC_CONFIGS.items():
        synonyms = _broker_synonyms(config, name)
        value = format_value(defn, config.topic_default(name))
        source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
        if overrides.get(name) is not None:
            value = format_value(defn, validate_topic_config(name, overrides[name]))
            source = TOPIC_CONFIG
            synonyms.insert(0, {"name": name, "value": value, "source": TOPIC_CONFIG})
        yield name, value, source, synonyms, defn


def topic_config_entries(broker, overrides: dict[str, str | None]) -> list[dict]:
    """CreateTopics v5+ ``configs``: the new topic's effective configs."""
    return [
        {"name": name, "value": value, "read_only": False, "config_source": source,
         "is_sensitive": False}
        for name, value, source, _synonyms, _defn in topic_config_values(broker, overrides)
    ]


def broker_config_values(broker):
    config = broker.config
    for name, defn in sorted(BROKER_CONFIGS.items()):
        value = format_value(defn, config.get(name))
        source = _broker_source(config, name)
        yield name, value, source, [{"name": name, "value": value, "source": source}], defn
