"""ListConfigResources (key 74), versions 0-1 (``kafka-configs --describe`` of
every entity of a type, ``Admin.listConfigResources``).

- v0 (ListClientMetricsResources) lists client metrics resources: kcoord keeps
  none, so the list is empty.
- v1 lists, for the ``resource_types`` asked (none: every type below), in
  Kafka 4.4's order: the groups that have configs of their own (GROUP, 32),
  client metrics (16, none), this node as BROKER_LOGGER (8) and as BROKER (4),
  then every topic, internal ones included (TOPIC, 2).  A type outside these
  answers UNSUPPORTED_VERSION with an empty list, as Kafka answers it.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import CLUSTER, DESCRIBE_CONFIGS, allowed
from kcoord.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
_ORDER = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)


def _names(broker, resource_type: int):
    if resource_type == GROUP:
        return sorted(broker.group_configs)
    if resource_type in (BROKER_LOGGER, BROKER):
        return [str(broker.node_id)]
    if resource_type == TOPIC:
        return sorted(broker.topics.topic_names())
    return []  # client metrics: none kept


@api(key=74, versions=(0, 1))
def list_config_resources(ctx, request):
    if not allowed(ctx, DESCRIBE_CONFIGS, CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "config_resources": []}
    supported = (CLIENT_METRICS,) if ctx.api_version == 0 else _ORDER
    wanted = set(request.resource_types or ()) or set(supported)
    if not wanted <= set(supported):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_VERSION,
                "config_resources": []}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "config_resources": [
        {"resource_name": name, "resource_type": t}
        for t in _ORDER if t in wanted for name in _names(ctx.broker, t)]}
