"""DescribeCluster (key 60), versions 0-1 (flexible in all).

- Brokers: this node at its advertised address; controller: this node.
- v1 ``endpoint_type``: 1 (brokers) is served; 2 (controllers) is answered with
  UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker listener does; anything else is
  INVALID_REQUEST.
"""

from __future__ import annotations

from broker.apis import api
from broker.apis.k003_metadata import CLUSTER_OPERATIONS, NOT_PROVIDED
from protocol.errors import ErrorCode


@api(key=60, versions=(0, 1))
def describe_cluster(ctx, request):
    broker = ctx.broker
    response = {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": request.endpoint_type,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": [],
        "cluster_authorized_operations": (
            CLUSTER_OPERATIONS if request.include_cluster_authorized_operations else NOT_PROVIDED
        ),
    }
    if request.endpoint_type == 2:
        response["error_code"] = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response["error_message"] = "The broker listener does not serve controller endpoints."
        return response
    if request.endpoint_type != 1:
        response["error_code"] = ErrorCode.INVALID_REQUEST
        response["error_message"] = f"Unsupported endpoint type {request.endpoint_type}"
        return response
    response["brokers"] = [{"broker_id": broker.node_id, "host": broker.advertised_host,
                            "port": broker.advertised_port, "rack": None}]
    return response
