"""CreateAcls (key 30), versions 1-3: ACLs added, kept in the data dir before the
answer (``kafka-acls --add``), each creation checked as Kafka checks it.  Needs
ALTER on the cluster; without an authorizer, SECURITY_DISABLED as on Kafka."""

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import ALTER, CLUSTER, allowed
from kcoord.broker.security.acls import Acl
from kcoord.protocol.errors import ErrorCode


@api(key=30, versions=(1, 3))
async def create_acls(ctx, request):
    authorizer = ctx.broker.authorizer
    refusal = None
    if authorizer is None:
        refusal = (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    elif not allowed(ctx, ALTER, CLUSTER):
        refusal = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if refusal is not None:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": refusal[0], "error_message": refusal[1]} for _ in request.creations]}
    results = await authorizer.create([
        Acl(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
            c.operation, c.permission_type) for c in request.creations])
    return {"throttle_time_ms": 0, "results": [
        {"error_code": code, "error_message": message} for code, message in results]}
