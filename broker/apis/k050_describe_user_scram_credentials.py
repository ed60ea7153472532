"""DescribeUserScramCredentials (key 50), version 0: the mechanisms and
iteration counts of users' SCRAM credentials (``kafka-configs --describe
--entity-type users``), all users when none is named."""

from kcoord.broker.apis import api


@api(key=50, versions=(0, 0))
def describe_user_scram_credentials(ctx, request):
    users = None if request.users is None else [u.name for u in request.users]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "results": ctx.broker.scram_credentials.describe(users)}
