"""CreateAcls (key 30), versions 1-3: ACLs added, kept in the data dir before the
answer (``kafka-acls --add``), each creation checked as Kafka checks it.  Needs
ALTER on the cluster; without an authorizer, SECURITY_DISABLED as on Kafka."""

from kcoord.broker.apis import api
from kcoord.broker.apis.k029_describe_acls import change_refusal
from kcoord.broker.security.acls import ANY, MATCH, Acl
from kcoord.protocol.errors import ErrorCode


@api(key=30, versions=(1, 3))
async def create_acls(ctx, request):
    refusal = change_refusal(ctx)
    if refusal is not None:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": refusal[0], "error_message": refusal[1]} for _ in request.creations]}
    acls = [Acl(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                c.operation, c.permission_type) for c in request.creations]
    if any(a.operation == ANY or a.pattern_type == MATCH for a in acls):
        # Kafka's controller fails the whole request (StandardAcl refuses ANY and
        # MATCH): every creation UNKNOWN_SERVER_ERROR, none made
        return {"throttle_time_ms": 0, "results": [
            {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": None}
            for _ in acls]}
    results = await ctx.broker.authorizer.create(acls)
    return {"throttle_time_ms": 0, "results": [
        {"error_code": code, "error_message": "" if code == ErrorCode.NONE else message}
        for code, message in results]}
