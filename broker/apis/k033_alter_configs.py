"""AlterConfigs (key 33), versions 0-2: a resource's whole set of dynamic
configs replaced by the ones listed (see ``broker.apis.config_changes``)."""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.config_changes import alter_configs as _alter


@api(key=33, versions=(0, 2))
async def alter_configs(ctx, request):
    return await _alter(ctx, request, incremental=False)
