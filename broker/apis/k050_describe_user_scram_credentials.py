"""DescribeUserScramCredentials (key 50), version 0: the mechanisms and
iteration counts of users' SCRAM credentials (``kafka-configs --describe
--entity-type users``), all users when none is named."""

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import CLUSTER, CLUSTER_REFUSED, DESCRIBE, allowed
from kcoord.protocol.errors import ErrorCode


@api(key=50, versions=(0, 0))
def describe_user_scram_credentials(ctx, request):
    if not allowed(ctx, DESCRIBE, CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": CLUSTER_REFUSED, "results": []}
    users = None if request.users is None else [u.name for u in request.users]
    # Kafka answers empty messages where there is no error
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": "",
            "results": ctx.broker.scram_credentials.describe(users)}
