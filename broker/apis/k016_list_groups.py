"""ListGroups (key 16), versions 0-5.

- v4+ filter by state (case-insensitive), v5+ by type: every group here is a
  ``classic`` group, so another type matches none.
- While a ``__consumer_offsets`` partition is loading the answer is
  COORDINATOR_LOAD_IN_PROGRESS with no groups (the new coordinator).
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import CLUSTER, DESCRIBE, GROUP, allowed, allowed_names


@api(key=16, versions=(0, 5))
def list_groups(ctx, request):
    version = ctx.api_version
    code, groups = ctx.broker.groups.list_groups(
        list(request.states_filter) if version >= 4 else [],
        list(request.types_filter) if version >= 5 else [])
    if ctx.broker.authorizer is not None and not allowed(ctx, DESCRIBE, CLUSTER):
        # without DESCRIBE on the cluster, the groups the client may DESCRIBE
        shown = allowed_names(ctx, DESCRIBE, GROUP, [g["group_id"] for g in groups])
        groups = [g for g in groups if g["group_id"] in shown]
    return {"throttle_time_ms": 0, "error_code": code, "groups": groups}
