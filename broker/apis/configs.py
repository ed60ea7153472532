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


def topic_config_values(broker, overrides: dict[str, str | None]):
    """(name, value string, source, synonyms, ConfigDef) for every topic config."""
    config = broker.config
    for name, defn in TOPIC_CONFIGS.items():
        synonym = TOPIC_CONFIG_SYNONYMS[name]
        default_value = format_value(defn, config.topic_default(name))
        default_source = _broker_source(config, synonym)
        synonyms = []
        if overrides.get(name) is not None:
            value = format_value(defn, validate_topic_config(name, overrides[name]))
            source = TOPIC_CONFIG
            synonyms.append({"name": name, "value": value, "source": TOPIC_CONFIG})
        else:
            value, source = default_value, default_source
        synonyms.append({"name": synonym, "value": default_value, "source": default_source})
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
