"""API handlers: one module per API key (``k018_api_versions.py`` ...).

Each module registers its handler with ``@api(key=..., versions=(low, high))``;
ApiVersions answers from this registry, so nothing is advertised that is not
served.  A handler takes ``(ctx, request)`` and returns the response body as a
dict (or an awaitable of one, or a ``Later``), or ``NO_RESPONSE`` for requests
Kafka does not answer (Produce with acks=0).  An ``async`` handler is started
by its connection, outside any task, and runs there until it first waits: what
it does before that must not need ``asyncio.current_task()`` (``asyncio.timeout``,
a ``TaskGroup``) nor set context variables, and a future it waits on that other
requests wait on too is awaited through ``asyncio.shield``.

``prepare`` (optional) is a pure function ``(request, version) -> request`` that
the server runs in a worker thread, right after decoding, for large requests
(``broker.server.OFFLOAD_BYTES``): the place for work proportional to the size
of the request that needs no broker state (collapsing a million repeated
names), so it never runs on the event loop.

``decode_on_loop`` (optional) is the size up to which a large request is
decoded on the event loop all the same: Produce, whose size is its records,
which the generated codec neither copies nor reads (a hop to a worker thread
and back costs more than the decoding, and much more when other clients keep
the event loop busy); the handler's work per partition is on the loop anyway.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable

from kcoord.protocol.messages import ALL_APIS
from kcoord.protocol.schema import Api

NO_RESPONSE = object()


class CloseConnection(Exception):
    """Raised by a handler when Kafka would drop the connection instead of answering."""


class Later:
    """A response body that comes once ``ticket`` (a future) is done: ``shape(its
    result)``.  The server encodes and sends it from the ticket's own callback,
    with no task and no coroutine (a commit waiting for its batch's append is
    the common case); it can be awaited all the same."""

    __slots__ = ("ticket", "shape")

    def __init__(self, ticket, shape: Callable[[Any], Any]):
        self.ticket = ticket
        self.shape = shape

    def __await__(self):
        return self._body().__await__()

    async def _body(self):
        return self.shape(await self.ticket)


@dataclass(slots=True)
class Registration:
    key: int
    min_version: int
    max_version: int
    handler: Callable[..., Any]
    schema: Api
    prepare: Callable[[Any, int], Any] | None = None
    decode_on_loop: int = 0
    # Advertised only when this says the broker serves the API as configured
    # (the consumer group protocol, enabled by group.coordinator.rebalance.protocols).
    advertised_if: Callable[[Any], bool] | None = None

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


REGISTRY: dict[int, Registration] = {}


def api(*, key: int, versions: tuple[int, int], prepare: Callable[[Any, int], Any] | None = None,
        decode_on_loop: int = 0, advertised_if: Callable[[Any], bool] | None = None):
    """Register the handler of API ``key`` for the inclusive version range."""

    schema = ALL_APIS.get(key)
    if schema is None:
        raise RuntimeError(f"no schema declared for api key {key}")
    low, high = versions
    if low < schema.min_version or high > schema.max_version:
        raise RuntimeError(f"{schema.name}: versions {low}-{high} outside the schema's range")

    def register(handler):
        if key in REGISTRY:
            raise RuntimeError(f"api key {key} registered twice")
        if decode_on_loop and (prepare is not None or not schema.generated):
            raise RuntimeError(f"{schema.name}: decode_on_loop needs the generated codec")
        REGISTRY[key] = Registration(key, low, high, handler, schema, prepare, decode_on_loop,
                                     advertised_if)
        return handler

    return register


_loaded = False
_advertised: list[tuple[int, int, int]] | None = None


def load_handlers() -> dict[int, Registration]:
    global _loaded
    if not _loaded:
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            importlib.import_module(f"{__name__}.{info.name}")
        _loaded = True
    return REGISTRY


# The APIs of a client's first requests (its bootstrap, a producer, a consumer and
# its group, an admin creating topics), in the order clients send them.
FIRST_REQUESTS = (18, 3, 10, 0, 1, 2, 8, 9, 11, 14, 12, 13, 22, 19)


def codecs_to_warm() -> list[tuple[Api, int, str]]:
    """The codecs of ``FIRST_REQUESTS`` (every served version, request and
    response), compiled ahead of a client's first use: the newest version of
    each API first, then the one below it, and so on (clients send the newest
    they share with the broker; older clients an older one)."""
    registrations = [REGISTRY[key] for key in FIRST_REQUESTS if key in REGISTRY]
    out = []
    for back in range(max((r.max_version - r.min_version for r in registrations),
                          default=-1) + 1):
        for reg in registrations:
            version = reg.max_version - back
            if version >= reg.min_version:
                out.append((reg.schema, version, "request"))
                out.append((reg.schema, version, "response"))
    return out


def advertised_versions(broker=None) -> list[tuple[int, int, int]]:
    """``(api_key, min, max)`` for every registered API, in key order; given the
    broker, without the APIs its configuration does not serve."""
    global _advertised
    if _advertised is None:
        load_handlers()
        _advertised = [(r.key, r.min_version, r.max_version)
                       for r in sorted(REGISTRY.values(), key=lambda r: r.key)]
    if broker is None:
        return _advertised
    return [entry for entry in _advertised
            if (check := REGISTRY[entry[0]].advertised_if) is None or check(broker)]
