"""DeleteGroups (key 42), versions 0-3 (v3's per-group message is null, as
Kafka 4.4's coordinator leaves it).

- Only an Empty group can be deleted (NON_EMPTY_GROUP otherwise); an unknown
  one gets GROUP_ID_NOT_FOUND.  Repeated names count once.
- A deleted group leaves tombstones for its offsets and its metadata, and the
  answer comes once they are durable (the new coordinator).
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DELETE, GROUP, allowed_names
from kcoord.broker.apis.group_support import when_answered
from kcoord.protocol.errors import ErrorCode


@api(key=42, versions=(0, 3))
def delete_groups(ctx, request):
    groups = ctx.broker.groups
    names = list(dict.fromkeys(request.groups_names))
    permitted = allowed_names(ctx, DELETE, GROUP, names)
    refused = {name: ErrorCode.GROUP_AUTHORIZATION_FAILED for name in names
               if name not in permitted}
    deleting = [name for name in names if name not in refused]
    if not deleting:
        return {"throttle_time_ms": 0, "results": [
            {"group_id": name, "error_code": refused[name]} for name in names]}
    return when_answered(groups.delete_groups(deleting), lambda answer: {
        "throttle_time_ms": 0,
        "results": [{"group_id": name, "error_code": refused.get(name) or answer[name]}
                    for name in names]})
