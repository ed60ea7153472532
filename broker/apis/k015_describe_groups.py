"""DescribeGroups (key 15), versions 0-5.

- A Stable group shows its protocol and each member's metadata and
  assignment; a group in any other state shows its members without them.
- An unknown group is answered NONE with state "Dead" (v0-5, as Kafka).
- ``include_authorized_operations`` (v3+): every operation a group supports,
  as Kafka grants them without an authorizer.
"""

from __future__ import annotations

from broker.apis import api
from broker.apis.group_support import GROUP_OPERATIONS, NOT_PROVIDED
from protocol.errors import ErrorCode


@api(key=15, versions=(0, 5))
def describe_groups(ctx, request):
    groups = ctx.broker.groups
    include_ops = ctx.api_version >= 3 and request.include_authorized_operations
    described = []
    for group_id in request.groups:
        entry = groups.describe(group_id)
        entry["authorized_operations"] = GROUP_OPERATIONS \
            if include_ops and entry["error_code"] == ErrorCode.NONE else NOT_PROVIDED
        described.append(entry)
    return {"throttle_time_ms": 0, "groups": described}
