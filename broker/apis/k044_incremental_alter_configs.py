"""IncrementalAlterConfigs (key 44), versions 0-1: the named configs of a
resource set, deleted, appended to or subtracted from, the others kept (see
``broker.apis.config_changes``)."""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.config_changes import alter_configs


@api(key=44, versions=(0, 1))
async def incremental_alter_configs(ctx, request):
    return await alter_configs(ctx, request, incremental=True)
