"""JoinGroup (key 11), versions 0-9.

- v0 has no rebalance timeout: the session timeout stands in (Kafka).
- v4+ dynamic members join in two steps (KIP-394): MEMBER_ID_REQUIRED hands
  out the member id; v0-3 members are added at once.
- A JoinGroup is parked in the group's delayed-join purgatory until the join
  phase completes (``broker.groups.coordinator``); the connection waits, as
  Kafka's does.
- ``protocol_name`` is "" rather than null before v7, where it is not nullable.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.group_support import client_host, when_answered
from kcoord.broker.apis.authz import GROUP, READ, allowed
from kcoord.broker.groups.common import JoinRequest, join_error
from kcoord.broker.groups.group import shared
from kcoord.protocol.errors import ErrorCode


@api(key=11, versions=(0, 9))
def join_group(ctx, request):
    version = ctx.api_version
    groups = ctx.broker.groups
    if not allowed(ctx, READ, GROUP, request.group_id):
        answer = dict(join_error(ErrorCode.GROUP_AUTHORIZATION_FAILED), throttle_time_ms=0)
        return dict(answer, protocol_name="") if version < 7 else answer
    few = len(request.protocols) <= 16  # the names of a usual member, worth sharing
    join = JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        protocol_type=shared(request.protocol_type),
        protocols=[(shared(p.name) if few else p.name, bytes(p.metadata))
                   for p in request.protocols],
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1
        else request.session_timeout_ms,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=shared(ctx.client_id or ""), client_host=shared(client_host(ctx)),
        version=version,
        reason=request.reason if version >= 8 else None)

    def shape(answer):
        answer = dict(answer, throttle_time_ms=0)
        if version < 7 and answer["protocol_name"] is None:
            answer["protocol_name"] = ""
        return answer

    return when_answered(groups.join(join), shape)
