"""AlterUserScramCredentials (key 51), version 0: add, replace and remove users'
SCRAM credentials (``kafka-configs --alter --entity-type users --add-config
SCRAM-SHA-256=[password=...]``).  The client sends the salted password; the
broker keeps the keys derived from it, saved before the answer."""

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import ALTER, CLUSTER, CLUSTER_REFUSED, allowed
from kcoord.protocol.errors import ErrorCode


@api(key=51, versions=(0, 0))
async def alter_user_scram_credentials(ctx, request):
    if not allowed(ctx, ALTER, CLUSTER):
        users = dict.fromkeys([d.name for d in request.deletions] +
                              [u.name for u in request.upsertions])
        return {"throttle_time_ms": 0, "results": [
            {"user": user, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": CLUSTER_REFUSED} for user in users]}
    results = await ctx.broker.scram_credentials.alter(request.deletions, request.upsertions)
    return {"throttle_time_ms": 0, "results": results}
