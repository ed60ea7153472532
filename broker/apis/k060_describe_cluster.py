"""DescribeCluster (key 60), versions 0-2 (flexible in all).

- Brokers: this node at its advertised address; controller: this node.
- v1 ``endpoint_type``: 1 (brokers) is served.  As Kafka's
  ``AuthHelper.computeDescribeClusterResponse`` answers on a broker listener,
  2 (controllers) gets MISMATCHED_ENDPOINT_TYPE and any other value
  UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0); such an error answer
  carries only the code and message, every other field at its default.
- v2 ``include_fenced_brokers``: this node is never fenced (``is_fenced``
  false), so the answer is the same either way.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.k003_metadata import cluster_operations
from kcoord.protocol.errors import ErrorCode

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2


@api(key=60, versions=(0, 2))
def describe_cluster(ctx, request):
    broker = ctx.broker
    endpoint_type = request.endpoint_type
    if endpoint_type not in (BROKER_ENDPOINT, CONTROLLER_ENDPOINT):
        code = ErrorCode.INVALID_REQUEST if ctx.api_version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        return {"error_code": code, "error_message": f"Unsupported endpoint type {endpoint_type}"}
    if endpoint_type != BROKER_ENDPOINT:
        code = ErrorCode.INVALID_REQUEST if ctx.api_version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        return {"error_code": code,
                "error_message": "The request was sent to an endpoint of type BROKER, but we "
                                 "wanted an endpoint of type CONTROLLER"}
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": BROKER_ENDPOINT,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": [{"broker_id": broker.node_id, "host": ctx.advertised[0],
                     "port": ctx.advertised[1], "rack": None, "is_fenced": False}],
        "cluster_authorized_operations": cluster_operations(
            ctx, request.include_cluster_authorized_operations),
    }
