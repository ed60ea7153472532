"""AlterConfigs and IncrementalAlterConfigs, resource by resource, as Kafka 4.4
answers them (ConfigAdminManager's checks on the broker, then the
controller's ConfigurationControlManager): each resource gets its own error
code and message, and the ones that pass change at once unless
``validate_only``.

- TOPIC (2): the topic's dynamic configs (DescribeConfigs source
  DYNAMIC_TOPIC_CONFIG), persisted in the topic journal before the answer and
  applied to its partition logs at once: retention, compaction, segment roll
  and produce checks read them from then on.  AlterConfigs replaces the
  whole set; IncrementalAlterConfigs sets, deletes, or appends to and
  subtracts from a list config (from the topic's value, or the config's own
  default when it has none).
- GROUP (32): the group's own configs (``broker.groups.group_configs``, source
  DYNAMIC_GROUP_CONFIG), checked as Kafka's GroupConfig checks the whole new
  set, saved before the answer and applied at once to the consumer group of
  that id (session timeout, heartbeat interval, assignment interval). The
  group need not exist.
- BROKER (4): this broker's dynamic configs (its id) or the cluster-wide
  defaults (""), of the properties Kafka changes while it runs
  (``DYNAMIC_BROKER_CONFIGS``; the others: INVALID_REQUEST "Cannot update
  these configs dynamically"), checked as Kafka parses them, saved before the
  answer and applied at once (DescribeConfigs sources DYNAMIC_BROKER_CONFIG and
  DYNAMIC_DEFAULT_BROKER_CONFIG).  Names kcoord does not know are kept, as
  Kafka keeps custom configs, and have no effect.  The cluster-wide
  ``min.insync.replicas`` is there from the first start and stays, as on a
  Kafka 4.4 cluster with eligible leader replicas (its default).
- BROKER_LOGGER (8), IncrementalAlterConfigs only: the level of the root or of
  one of kcoord's loggers (``broker.logs``), SET or DELETE, applied at once and
  not kept over a restart, as Kafka's broker loggers; AlterConfigs does not
  know the resource type, as Kafka.
- Other resource types: INVALID_REQUEST, "Unknown resource type".
"""

from __future__ import annotations

from collections import Counter

import structlog

from kcoord.broker.apis.authz import (
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_REFUSED,
    GROUP_REFUSED,
    TOPIC_REFUSED,
    allowed,
)
from kcoord.broker.apis.authz import GROUP as GROUP_RESOURCE
from kcoord.broker.apis.authz import TOPIC as TOPIC_RESOURCE
from kcoord.broker.config import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    LIST,
    STRING,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigValueError,
    format_value,
    java_integer,
    parse_config_value,
)
from kcoord.broker.groups import group_configs
from kcoord.broker.groups.group_configs import GROUP_CONFIGS
from kcoord.broker import logs
from kcoord.broker.topics.manager import TopicError, check_topic_configs, validate_topic_name
from kcoord.protocol.errors import ErrorCode

log = structlog.get_logger("kcoord.config")

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str | None):
        super().__init__(message)
        self.code = code
        self.message = message


# Errors.message() of the authorization errors, as Kafka's ApiError words them.
AUTHORIZATION_MESSAGES = {
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: CLUSTER_REFUSED,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: TOPIC_REFUSED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: GROUP_REFUSED,
}


def config_refusal(ctx, operation: int, resource_type: int, name: str) -> ErrorCode | None:
    """The authorization error of DESCRIBE_CONFIGS / ALTER_CONFIGS on a config
    resource (a broker's are the cluster's), or None if allowed."""
    if ctx.broker.authorizer is None:
        return None
    if resource_type in (BROKER, BROKER_LOGGER):
        return None if allowed(ctx, operation, CLUSTER) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if resource_type == TOPIC:
        return None if allowed(ctx, operation, TOPIC_RESOURCE, name) \
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == GROUP:
        return None if allowed(ctx, operation, GROUP_RESOURCE, name) \
            else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None


async def alter_configs(ctx, request, incremental: bool) -> dict:
    broker = ctx.broker
    named = Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    for res in request.resources:
        answer = {"error_code": ErrorCode.NONE, "error_message": None,
                  "resource_type": res.resource_type, "resource_name": res.resource_name}
        try:
            if named[(res.resource_type, res.resource_name)] > 1:
                raise _Refused(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            _check_shape(res, incremental)
            refusal = config_refusal(ctx, ALTER_CONFIGS, res.resource_type, res.resource_name)
            if refusal is not None:  # Kafka words a topic's or group's, not a broker's
                raise _Refused(refusal, None if refusal == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                               else AUTHORIZATION_MESSAGES[refusal])
            changes = _changes(broker, res, incremental)
            if request.validate_only:
                pass
            elif res.resource_type == GROUP:
                await broker.alter_group_configs(res.resource_name, changes)
            elif res.resource_type == BROKER:
                if res.resource_name in ("", str(broker.node_id)):
                    await broker.alter_broker_configs(res.resource_name, changes)
                # else this node written otherwise (01, +1): Kafka's controller
                # keeps the change under that name, which no broker reads
                # (checked against Kafka 4.4): accepted, and nothing changes
            elif res.resource_type == BROKER_LOGGER:
                _set_log_levels(ctx, changes)
            else:
                topic = broker.topics.get(res.resource_name)
                await broker.topics.alter_configs(topic, changes)
        except _Refused as refused:
            answer["error_code"], answer["error_message"] = refused.code, refused.message
        except TopicError as error:
            answer["error_code"], answer["error_message"] = error.code, error.message
        responses.append(answer)
    return {"throttle_time_ms": 0, "responses": responses}


def _check_shape(res, incremental: bool) -> None:
    """What Kafka refuses before it asks whether the change is allowed
    (ConfigAdminManager's preprocessing), ``_Refused`` with its words:
    duplicate keys, null values (every name at once), an unknown resource type."""
    names = Counter(c.name for c in res.configs)
    if any(n > 1 for n in names.values()):
        raise _Refused(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in res.configs
             if (c.config_operation if incremental else SET) != DELETE and c.value is None]
    if nulls:
        raise _Refused(ErrorCode.INVALID_REQUEST,
                       f"Null value not supported for : {', '.join(nulls)}")
    if res.resource_type not in (TOPIC, BROKER, BROKER_LOGGER, GROUP) or \
            (res.resource_type == BROKER_LOGGER and not incremental):
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown resource type {res.resource_type}")


def _changes(broker, res, incremental: bool) -> dict[str, str]:
    """The resource's new dynamic configs, or ``_Refused`` with Kafka's words, in
    the order Kafka checks: the request's shape (``_check_shape``; then, in
    ``alter_configs``, the authorization), then what the resource type checks (a
    broker's or node's id before its operations); an unknown operation on a
    topic or group fails as Kafka's controller fails it (UNKNOWN_SERVER_ERROR,
    no message)."""
    if res.resource_type == BROKER_LOGGER:
        _check_node_id(broker, res.resource_name,
                       lambda node: f"Unexpected node id. Expected {broker.node_id}, "
                                    f"but received {node}")
        return _log_level_changes(res)
    if res.resource_type == BROKER and res.resource_name:
        _check_node_id(broker, res.resource_name,
                       lambda _node: f"Unexpected broker id, expected {broker.node_id}, but "
                                     f"received {res.resource_name}")
    for c in res.configs:
        op = c.config_operation if incremental else SET
        if op not in _OPERATIONS:
            if res.resource_type == BROKER:
                raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}")
            raise _Refused(ErrorCode.UNKNOWN_SERVER_ERROR, None)
    if res.resource_type == GROUP:
        if not res.resource_name:
            raise _Refused(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        return _group_changes(broker, res, incremental)
    if res.resource_type == BROKER:
        return _broker_changes(broker, res, incremental)
    name = res.resource_name
    topic = broker.topics.get(name)
    if topic is None:
        invalid = validate_topic_name(name)
        if invalid:
            raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
        raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       f"The topic '{name}' does not exist.")
    configs = _applied(dict(topic.configs) if incremental else {}, res, incremental,
                       TOPIC_CONFIGS.get, "Unknown topic config name")
    check_topic_configs(configs)  # TopicError, answered as it says
    return configs


def _check_node_id(broker, name: str, unexpected) -> None:
    """A BROKER or BROKER_LOGGER resource names this node as Integer.parseInt reads
    it (``01`` and ``+1`` are node 1); ``unexpected(node)`` words another id."""
    node = java_integer(name)
    if node is None:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}")
    if node != broker.node_id:
        raise _Refused(ErrorCode.INVALID_REQUEST, unexpected(node))


def _log_level_changes(res) -> dict[str, str | None]:
    """logger -> its new level, or None to take its own away (ConfigAdminManager's
    validateLogLevelConfigs: loggers that exist, log4j's level names, SET and
    DELETE only, the root's level never removed)."""
    changes = {}
    for c in res.configs:
        if c.config_operation in (APPEND, SUBTRACT):
            raise _Refused(ErrorCode.INVALID_REQUEST,
                           f"{_OPERATIONS[c.config_operation]} operation is not allowed for "
                           "the BROKER_LOGGER resource")
        if c.config_operation not in _OPERATIONS:
            raise _Refused(ErrorCode.INVALID_REQUEST,
                           f"Unknown operation type {c.config_operation} is not allowed for the "
                           "BROKER_LOGGER resource")
        if not logs.exists(c.name):
            raise _Refused(ErrorCode.INVALID_CONFIG, f"Logger {c.name} does not exist!")
        if c.config_operation == DELETE:
            if c.name == logs.ROOT:
                raise _Refused(ErrorCode.INVALID_REQUEST,
                               "Removing the log level of the root logger is not allowed")
            changes[c.name] = None
        elif c.value not in logs.LEVELS:
            raise _Refused(ErrorCode.INVALID_CONFIG,
                           f"Cannot set the log level of {c.name} to {c.value} as it is not a "
                           f"supported log level. Valid log levels are "
                           f"{', '.join(sorted(logs.LEVELS))}")
        else:
            changes[c.name] = c.value
    return changes


def _set_log_levels(ctx, changes: dict[str, str | None]) -> None:
    for name, level in changes.items():
        logs.set_level(name, level)
        # at WARN, as Kafka logs it: seen whatever the level
        log.warning("broker.log_level_changed", logger=name,
                    to=level or "(its ancestor's)", client_id=ctx.client_id)


def _group_changes(broker, res, incremental: bool) -> dict[str, str]:
    current = broker.group_configs.get(res.resource_name, {})
    configs = _applied(dict(current) if incremental else {}, res, incremental,
                       lambda n: GROUP_CONFIGS[n].defn if n in GROUP_CONFIGS else None,
                       "Unknown group config name")
    try:
        group_configs.check(broker.config, configs)
    except group_configs.GroupConfigError as exc:
        raise _Refused(ErrorCode.INVALID_CONFIG, str(exc)) from None
    return configs


def _broker_definition(name: str) -> ConfigDef:
    # Kafka takes broker config names it does not know too (custom configs).
    return BROKER_CONFIGS.get(name) or ConfigDef(name, STRING, None)


def _broker_changes(broker, res, incremental: bool) -> dict[str, str]:
    current = broker.broker_configs.get("broker" if res.resource_name else "", {})
    configs = _applied(dict(current) if incremental else {}, res, incremental,
                       _broker_definition, "")
    if res.resource_name and any(c.name == "min.insync.replicas" for c in res.configs):
        raise _Refused(ErrorCode.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be "
                                                 "altered while ELR is enabled.")
    if not res.resource_name and "min.insync.replicas" not in configs:
        raise _Refused(ErrorCode.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be "
                                                 "removed while ELR is enabled.")
    fixed = [c.name for c in res.configs
             if c.name in BROKER_CONFIGS and c.name not in DYNAMIC_BROKER_CONFIGS]
    if fixed:
        raise _Refused(ErrorCode.INVALID_REQUEST,
                       f"Cannot update these configs dynamically: [{', '.join(fixed)}]")
    for name, raw in configs.items():
        defn = BROKER_CONFIGS.get(name)
        if defn is None:
            continue
        try:
            parse_config_value(defn, raw)
        except ConfigValueError as exc:
            raise _Refused(ErrorCode.INVALID_REQUEST, str(exc)) from None
    return configs


def _applied(configs: dict[str, str], res, incremental: bool, definition, unknown: str):
    """``configs`` with the resource's operations applied, in order; ``definition``
    gives a config's ConfigDef, None for a name the resource type does not know."""
    for c in res.configs:
        op = c.config_operation if incremental else SET
        defn = definition(c.name)
        if op == DELETE:
            configs.pop(c.name, None)
            continue
        if defn is None:
            raise _Refused(ErrorCode.INVALID_CONFIG, f"{unknown}: {c.name}")
        if op == SET:
            configs[c.name] = c.value
            continue
        if defn.type != LIST and res.resource_type == BROKER:
            # (the broker's own check, ConfigAdminManager, before the controller's)
            raise _Refused(ErrorCode.INVALID_CONFIG,
                           f"Config value {_OPERATIONS[op].lower()} is not allowed for config "
                           f"key: {c.name}")
        if defn.type != LIST or res.resource_type == GROUP:
            # Kafka's controller knows no config types for groups: no group
            # config is a list there (checked against Kafka 4.4).
            raise _Refused(ErrorCode.INVALID_CONFIG,
                           f"Can't {_OPERATIONS[op]} to key {c.name} because its type is not "
                           f"LIST.")
        current = configs.get(c.name)
        if current is None:
            current = format_value(defn, defn.default) or ""
        parts = [p.strip() for p in current.split(",") if p.strip()]
        given = [p.strip() for p in c.value.split(",") if p.strip()]
        if op == APPEND:
            parts += [p for p in given if p not in parts]
        else:
            parts = [p for p in parts if p not in given]
        configs[c.name] = ",".join(parts)
    return configs
