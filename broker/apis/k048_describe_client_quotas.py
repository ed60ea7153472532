"""DescribeClientQuotas (key 48), versions 0-1: the quotas whose entity a
filter matches (``kafka-configs --describe --entity-type users|clients``), as
Kafka's ClientQuotasImage matches them.  Needs DESCRIBE_CONFIGS on the cluster."""

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import CLUSTER, CLUSTER_REFUSED, DESCRIBE_CONFIGS, allowed
from kcoord.protocol.errors import ErrorCode


@api(key=48, versions=(0, 1))
def describe_client_quotas(ctx, request):
    if not allowed(ctx, DESCRIBE_CONFIGS, CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": CLUSTER_REFUSED, "entries": None}
    code, message, entries = ctx.broker.quotas.describe(request.components, request.strict)
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
            "entries": entries}
