"""One module per Kafka API, each declaring an ``Api`` schema for all its versions.

``ALL_APIS`` maps api key to schema; it is collected from the modules of this
package so that adding an API means adding its module.
"""

from __future__ import annotations

import importlib
import pkgutil

from kcoord.protocol.schema import Api


def _collect() -> dict[int, Api]:
    apis: dict[int, Api] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Api) and value.key >= 0:
                if value.key in apis and apis[value.key] is not value:
                    raise RuntimeError(f"two schemas for api key {value.key}")
                apis[value.key] = value
    return apis


ALL_APIS: dict[int, Api] = _collect()


def schema_for(api_key: int) -> Api | None:
    return ALL_APIS.get(api_key)
