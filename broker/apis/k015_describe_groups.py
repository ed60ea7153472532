"""DescribeGroups (key 15), versions 0-6.

- A Stable group shows its protocol and each member's metadata and
  assignment; a group in any other state shows its members without them.
- An unknown group, and a consumer group of the KIP-848 protocol, are answered
  NONE with state "Dead" up to v5, and from v6 GROUP_ID_NOT_FOUND with Kafka
  4.4's message (KIP-1043), the state still "Dead".
- ``include_authorized_operations`` (v3+): every operation a group supports,
  as Kafka grants them without an authorizer.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DESCRIBE, GROUP, allowed, operations
from kcoord.broker.apis.group_support import NOT_PROVIDED
from kcoord.broker.groups.consumer_group import ConsumerGroup
from kcoord.protocol.errors import ErrorCode


@api(key=15, versions=(0, 6))
def describe_groups(ctx, request):
    groups = ctx.broker.groups
    include_ops = ctx.api_version >= 3 and request.include_authorized_operations
    described = []
    secured = ctx.broker.authorizer is not None
    for group_id in request.groups:
        if secured and not allowed(ctx, DESCRIBE, GROUP, group_id):
            described.append({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                              "error_message": None, "group_id": group_id, "group_state": "",
                              "protocol_type": "", "protocol_data": "", "members": [],
                              "authorized_operations": NOT_PROVIDED})
            continue
        entry = groups.describe(group_id)
        if ctx.api_version >= 6 and entry["error_code"] == ErrorCode.NONE and \
                entry["group_state"] == "Dead":
            found = groups.group(group_id)
            entry["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
            entry["error_message"] = f"Group {group_id} is not a classic group." \
                if isinstance(found, ConsumerGroup) and not found.dead \
                else f"Group {group_id} not found."
        entry["authorized_operations"] = operations(ctx, GROUP, group_id) \
            if include_ops and entry["error_code"] == ErrorCode.NONE else NOT_PROVIDED
        described.append(entry)
    return {"throttle_time_ms": 0, "groups": described}
