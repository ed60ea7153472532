"""Heartbeat (key 12), versions 0-4.

Keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to re-join.
Answered NONE while the group's partition is loading, as Kafka does.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import GROUP, READ, allowed
from kcoord.protocol.errors import ErrorCode


@api(key=12, versions=(0, 4))
def heartbeat(ctx, request):
    groups = ctx.broker.groups
    if not allowed(ctx, READ, GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    code = groups.heartbeat(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None)
    return {"throttle_time_ms": 0, "error_code": code}
