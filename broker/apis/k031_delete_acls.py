"""DeleteAcls (key 31), versions 1-3: the ACLs each filter matches are removed
and listed (``kafka-acls --remove``), the change kept in the data dir before
the answer.  Needs ALTER on the cluster; without an authorizer,
SECURITY_DISABLED as on Kafka."""

from kcoord.broker.apis import api
from kcoord.broker.apis.k029_describe_acls import acl_filter, change_refusal


@api(key=31, versions=(1, 3))
async def delete_acls(ctx, request):
    refusal = change_refusal(ctx)
    if refusal is not None:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": refusal[0], "error_message": refusal[1], "matching_acls": []}
            for _ in request.filters]}
    results = await ctx.broker.authorizer.delete([acl_filter(f) for f in request.filters])
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": code, "error_message": message, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": a.resource_type,
             "resource_name": a.resource_name, "pattern_type": a.pattern_type,
             "principal": a.principal, "host": a.host, "operation": a.operation,
             "permission_type": a.permission_type} for a in acls]}
        for code, message, acls in results]}
