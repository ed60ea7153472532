"""SyncGroup (key 14), versions 0-5.

- v5+ must carry the protocol type and name: INCONSISTENT_GROUP_PROTOCOL
  without them (KafkaApis checks this before the coordinator).
- The leader's assignment is written to ``__consumer_offsets`` first; every
  parked SyncGroup of the generation is answered once it is durable, and only
  then is the group Stable.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import GROUP, READ, allowed
from kcoord.broker.apis.group_support import when_answered
from kcoord.broker.groups.common import sync_answer
from kcoord.protocol.errors import ErrorCode


def _shape(answer):
    return dict(answer, throttle_time_ms=0)


@api(key=14, versions=(0, 5))
def sync_group(ctx, request):
    version = ctx.api_version
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return _shape(sync_answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    if not allowed(ctx, READ, GROUP, request.group_id):
        return _shape(sync_answer(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    groups = ctx.broker.groups
    return when_answered(groups.sync(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if version >= 3 else None,
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        [(a.member_id, bytes(a.assignment)) for a in request.assignments]), _shape)
