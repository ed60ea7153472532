"""LeaveGroup (key 13), versions 0-5.

- v0-2 name one member; v3+ a list of members, by member id or, with an empty
  member id, by ``group.instance.id`` (KIP-345 administrative removal).
- The members leave together and the group rebalances once (the new
  coordinator's behaviour).
- v0-2 have only a top-level error: the group's, else the member's.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import GROUP, READ, allowed
from kcoord.broker.apis.group_support import first_error
from kcoord.protocol.errors import ErrorCode


@api(key=13, versions=(0, 5))
def leave_group(ctx, request):
    version = ctx.api_version
    groups = ctx.broker.groups
    if not allowed(ctx, READ, GROUP, request.group_id):
        # Kafka's getErrorResponse: the error, and no member
        answer = {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
        return answer if version < 3 else dict(answer, members=[])
    if version >= 3:
        members = [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
                   for m in request.members]
    else:
        members = [(request.member_id, None, None)]
    code, errors = groups.leave(request.group_id, members)
    if version < 3:
        return {"throttle_time_ms": 0, "error_code": first_error(code, *errors)}
    return {"throttle_time_ms": 0, "error_code": code, "members": [
        {"member_id": m, "group_instance_id": i, "error_code": e}
        for (m, i, _r), e in zip(members, errors)]}
