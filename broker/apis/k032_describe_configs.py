"""DescribeConfigs (key 32), versions 0-4.

- TOPIC (2): every topic config with its effective value; per-topic overrides
  have source TOPIC_CONFIG, the rest the broker's value (STATIC_BROKER_CONFIG
  when set in the properties, else DEFAULT_CONFIG).  An invalid topic name:
  INVALID_TOPIC_EXCEPTION; an unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4): the resource name must be this node's id (every broker config,
  read-only unless Kafka changes it while running, with its dynamic, static
  and default values as synonyms) or empty (the cluster-wide dynamic defaults
  that are set); any other name is INVALID_REQUEST, as Kafka's ConfigHelper
  answers.
- BROKER_LOGGER (8): the root's and every logger's level (``broker.logs``), for
  this node's id.
- GROUP (32): every group config (``broker.groups.group_configs``), the
  group's own value (DYNAMIC_GROUP_CONFIG) or its broker property's, whether
  the group exists or not, as Kafka answers; an empty name: INVALID_REQUEST.
- A resource type other than these fails the whole request: every resource
  gets INVALID_REQUEST with Kafka's generic message, as KafkaApis answers.
- ``configuration_keys`` null or empty lists every config; otherwise only the
  named ones that exist.  v0 answers ``is_default``; v1+ ``config_source`` and, when asked,
  synonyms; v3+ the config type and, when asked, documentation.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.configs import (
    broker_config_values,
    cluster_default_values,
    group_config_values,
    topic_config_values,
)
from kcoord.broker.apis.authz import DESCRIBE_CONFIGS
from kcoord.broker.apis.config_changes import AUTHORIZATION_MESSAGES, config_refusal
from kcoord.broker.config import BROKER_CONFIGS, DYNAMIC_BROKER_CONFIGS, PASSWORD, java_integer
from kcoord.broker import logs
from kcoord.broker.topics.manager import validate_topic_name
from kcoord.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
DYNAMIC_BROKER_LOGGER_CONFIG = 6


def _entries(values, keys, include_synonyms, include_docs, read_only):
    wanted = None if keys is None else set(keys)
    out = []
    for name, value, source, synonyms, defn in values:
        if wanted is not None and name not in wanted:
            continue
        sensitive = defn.type == PASSWORD  # Kafka never shows a password's value
        out.append({
            "name": name,
            "value": None if sensitive else value,
            "read_only": read_only(name) if callable(read_only) else read_only,
            "is_default": False,  # Kafka answers false at v0 whatever the source
            "config_source": source,
            "is_sensitive": sensitive,
            "synonyms": synonyms if include_synonyms else [],
            "config_type": defn.config_type,
            "documentation": (defn.doc or None) if include_docs else None,
        })
    return out


class _LoggerDef:
    """What ``_entries`` reads of a logger: Kafka's ConfigHelper answers its
    loggers with no config type (UNKNOWN, 0) and no documentation."""

    type = None
    doc = None
    config_type = 0


def _logger_values():
    for name, level in logs.levels():
        yield name, level, DYNAMIC_BROKER_LOGGER_CONFIG, [], _LoggerDef


def _broker_id_refusal(name: str, node_id: int, resource_type: int) -> str | None:
    """ConfigHelper's words for a BROKER or BROKER_LOGGER name that is not this
    node's id (read as Integer.parseInt reads it), or None."""
    if name == "" and resource_type == BROKER_LOGGER:
        return "Broker id must not be empty"
    if java_integer(name) is None:
        return f"Broker id must be an integer, but it is: {name}"
    if java_integer(name) == node_id:
        return None
    if resource_type == BROKER_LOGGER:
        return f"Unexpected broker id, expected {node_id} but received {name}"
    return f"Unexpected broker id, expected {node_id} or empty string, but received {name}"


# The message of an error Kafka answers without one of its own (Errors.message()).
_INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details.")


@api(key=32, versions=(0, 4))
def describe_configs(ctx, request):
    broker = ctx.broker
    if any(res.resource_type not in (TOPIC, BROKER, BROKER_LOGGER, GROUP)
           for res in request.resources):
        # KafkaApis checks every resource type before answering any: one it does
        # not know fails the whole request, each resource with INVALID_REQUEST.
        return {"throttle_time_ms": 0, "results": [
            {"error_code": ErrorCode.INVALID_REQUEST, "error_message": _INVALID_REQUEST_MESSAGE,
             "resource_type": res.resource_type, "resource_name": res.resource_name,
             "configs": []} for res in request.resources]}
    results = []
    for res in request.resources:
        # Kafka answers an empty message, not a null one, when there is no error
        # and for an unknown topic.
        result = {"error_code": ErrorCode.NONE, "error_message": "",
                  "resource_type": res.resource_type, "resource_name": res.resource_name,
                  "configs": []}
        keys = res.configuration_keys or None  # none named: all, as ConfigHelper
        refusal = config_refusal(ctx, DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
        if refusal is not None:
            result["error_code"] = refusal
            result["error_message"] = AUTHORIZATION_MESSAGES[refusal]
        elif res.resource_type == TOPIC:
            topic = broker.topics.get(res.resource_name)
            invalid = validate_topic_name(res.resource_name) if topic is None else None
            if invalid:
                # Kafka's ConfigHelper validates the name before looking it up.
                result["error_code"] = ErrorCode.INVALID_TOPIC_EXCEPTION
                result["error_message"] = invalid
            elif topic is None:
                result["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

            else:
                result["configs"] = _entries(topic_config_values(broker, topic.configs), keys,
                                             request.include_synonyms,
                                             request.include_documentation, read_only=False)
        elif res.resource_type == GROUP and not res.resource_name:
            result["error_code"] = ErrorCode.INVALID_REQUEST
            result["error_message"] = "Group name must not be empty"
        elif res.resource_type == GROUP:
            result["configs"] = _entries(group_config_values(broker, res.resource_name), keys,
                                         request.include_synonyms,
                                         request.include_documentation, read_only=False)
        elif res.resource_type in (BROKER, BROKER_LOGGER):
            name = res.resource_name
            refused = _broker_id_refusal(name, broker.node_id, res.resource_type)
            if name == "" and res.resource_type == BROKER:
                result["configs"] = _entries(cluster_default_values(broker), keys,
                                             request.include_synonyms,
                                             request.include_documentation,
                                             read_only=lambda n: n not in BROKER_CONFIGS)
            elif refused:
                result["error_code"] = ErrorCode.INVALID_REQUEST
                result["error_message"] = refused
            elif res.resource_type == BROKER:
                result["configs"] = _entries(broker_config_values(broker), keys,
                                             request.include_synonyms,
                                             request.include_documentation,
                                             read_only=lambda n: n not in DYNAMIC_BROKER_CONFIGS)
            else:
                result["configs"] = _entries(_logger_values(), keys, False, False,
                                             read_only=False)
                if request.include_documentation:
                    for entry in result["configs"]:  # Kafka's is empty, not null
                        entry["documentation"] = ""
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}
