"""DescribeAcls (key 29), versions 1-3: the ACLs a filter matches, grouped by
resource pattern (``kafka-acls --list``).  Needs DESCRIBE on the cluster;
without an authorizer, SECURITY_DISABLED as on Kafka."""

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import ALTER, CLUSTER, DESCRIBE, allowed
from kcoord.broker.security.acls import AclFilter
from kcoord.protocol.errors import ErrorCode


def acl_filter(f) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                     f.principal_filter, f.host_filter, f.operation, f.permission_type)


def change_refusal(ctx) -> tuple[int, str] | None:
    """Why CreateAcls and DeleteAcls are refused as a whole (no authorizer, or
    no ALTER on the cluster), or None."""
    if ctx.broker.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, "No Authorizer is configured."
    if not allowed(ctx, ALTER, CLUSTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, needs(ctx, "ALTER")
    return None


def needs(ctx, operation: str) -> str:
    """Kafka's AuthHelper.authorizeClusterOperation message (it describes the
    request with its connection, principal and listener)."""
    return (f"Request Request(connectionId={ctx.peer}, session={ctx.principal}, "
            f"listenerName={ctx.connection.listener}, apiKey={ctx.api_key}, "
            f"apiVersion={ctx.api_version}) needs {operation} permission.")


@api(key=29, versions=(1, 3))
def describe_acls(ctx, request):
    authorizer = ctx.broker.authorizer
    answer = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "",
              "resources": []}
    if authorizer is None:
        return dict(answer, error_code=ErrorCode.SECURITY_DISABLED,
                    error_message="No Authorizer is configured on the broker")
    if not allowed(ctx, DESCRIBE, CLUSTER):
        return dict(answer, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=needs(ctx, "DESCRIBE"))
    wanted = acl_filter(request)
    problem = wanted.problem()
    if problem:
        return dict(answer, error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
    grouped: dict[tuple, list] = {}
    for acl in sorted(authorizer.acls(wanted), key=lambda a: (
            a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
            a.operation, a.permission_type)):
        grouped.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            {"principal": acl.principal, "host": acl.host, "operation": acl.operation,
             "permission_type": acl.permission_type})
    answer["resources"] = [
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
        for (t, n, p), acls in grouped.items()]
    return answer
