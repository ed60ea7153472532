"""AlterClientQuotas (key 49), versions 0-1: quotas set and removed per entity
(``kafka-configs --alter --entity-type users --entity-name alice --add-config
producer_byte_rate=1048576``), checked as Kafka's ClientQuotaControlManager
checks them, kept in the data dir before the answer and enforced at once.
Needs ALTER_CONFIGS on the cluster."""

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import ALTER_CONFIGS, CLUSTER, CLUSTER_REFUSED, allowed
from kcoord.protocol.errors import ErrorCode


@api(key=49, versions=(0, 1))
async def alter_client_quotas(ctx, request):
    if not allowed(ctx, ALTER_CONFIGS, CLUSTER):
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": CLUSTER_REFUSED,
             "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                        for e in entry.entity]} for entry in request.entries]}
    results = await ctx.broker.quotas.alter(request.entries, request.validate_only)
    return {"throttle_time_ms": 0, "entries": results}
