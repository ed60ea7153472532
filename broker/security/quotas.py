"""Client quotas, as Kafka's ``ClientQuotaManager`` keeps and enforces them.

Quotas are set per user, per client id, or per user and client id, each
possibly the default (an entity name of null): ``producer_byte_rate``,
``consumer_byte_rate`` (bytes per second), ``request_percentage`` (percent of
one request handler thread's time) and ``controller_mutation_rate``; per IP,
``connection_creation_rate``.  They are kept in ``kcoord-client-quotas.json``
in the data dir, replaced atomically before a change is answered (Kafka keeps
them in its metadata log).

The quota that applies to a request is the most specific one set (Kafka's
order: user and client id, user and default client id, user, default user and
client id, default user and default client id, default user, client id,
default client id).  Each (quota entity, kind) measures its rate over
``quota.window.num`` windows of ``quota.window.size.seconds``; a request that
takes it above the quota is answered with a throttle time
``(rate - quota) / quota * window`` and the connection reads nothing more for
that long, as Kafka mutes a throttled channel (KIP-219).
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

from kcoord.broker.groups.group_configs import ConfigFile
from kcoord.protocol.errors import ErrorCode

QUOTA_FILE = "kcoord-client-quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
# QuotaConfig.userAndClientQuotaConfigs / ipConfigs: key -> integral?
USER_CLIENT_KEYS = {PRODUCE: True, FETCH: True, REQUEST: False,
                    "controller_mutation_rate": False}
IP_KEYS = {"connection_creation_rate": True}
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
MAX_THROTTLE_MS = 30_000


def _entity_key(entity: dict[str, str | None]) -> str:
    return json.dumps(sorted(entity.items()))


def _entity_of(key: str) -> dict[str, str | None]:
    return dict(json.loads(key))


class _Rate:
    """Kafka's Rate over SampledStat windows: the amount of the retained
    windows divided by their span (at least ``samples - 1`` whole windows)."""

    __slots__ = ("window_ms", "samples", "starts", "amounts")

    def __init__(self, window_ms: int, samples: int):
        self.window_ms = window_ms
        self.samples = samples
        self.starts: list[float] = []
        self.amounts: list[float] = []

    def record(self, amount: float, now_ms: float) -> None:
        if not self.starts or now_ms >= self.starts[-1] + self.window_ms:
            self.starts.append(now_ms)
            self.amounts.append(0.0)
            if len(self.starts) > self.samples:
                del self.starts[0], self.amounts[0]
        self.amounts[-1] += amount

    def measure(self, now_ms: float) -> tuple[float, float]:
        """(rate per second, window in ms)."""
        oldest = now_ms - self.samples * self.window_ms
        while self.starts and self.starts[0] + self.window_ms <= oldest:
            del self.starts[0], self.amounts[0]
        elapsed = now_ms - self.starts[0] if self.starts else 0.0
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return sum(self.amounts) / (elapsed / 1000), elapsed


class ClientQuotas:
    def __init__(self, data_dir: Path, window_ms: int = 1000, samples: int = 11):
        self._file = ConfigFile(data_dir, QUOTA_FILE)
        self._quotas: dict[str, dict[str, float]] = {}  # entity key -> key -> value
        self._lock = asyncio.Lock()
        self.window_ms = window_ms
        self.samples = samples
        self._rates: dict[tuple, _Rate] = {}
        self.enforcing: frozenset[str] = frozenset()  # the kinds some quota sets

    def load(self) -> None:
        self._set({k: {q: float(v) for q, v in values.items()}
                   for k, values in self._file.load().items()})

    def _set(self, quotas: dict[str, dict[str, float]]) -> None:
        self._quotas = quotas
        self.enforcing = frozenset(k for values in quotas.values() for k in values)
        self._rates.clear()

    # -- DescribeClientQuotas ----------------------------------------------------------

    def describe(self, components, strict: bool) -> tuple[int, str | None, list | None]:
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for c in components:
            kind = c.entity_type
            if not kind:
                return ErrorCode.INVALID_REQUEST, "Invalid empty entity type.", None
            if kind in exact or kind in typed:
                return ErrorCode.INVALID_REQUEST, (f"Entity type {kind} cannot appear more than "
                                                   "once in the filter."), None
            if kind not in (USER, CLIENT_ID, IP):
                return ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}", None
            if c.match_type == EXACT:
                if c.match is None:
                    return ErrorCode.INVALID_REQUEST, ("Request specified MATCH_TYPE_EXACT, but "
                                                       "set match string to null."), None
                exact[kind] = c.match
            elif c.match_type == DEFAULT:
                if c.match is not None:
                    return ErrorCode.INVALID_REQUEST, ("Request specified MATCH_TYPE_DEFAULT, "
                                                       "but also specified a match string."), None
                exact[kind] = None
            elif c.match_type == SPECIFIED:
                if c.match is not None:
                    return ErrorCode.INVALID_REQUEST, ("Request specified MATCH_TYPE_SPECIFIED, "
                                                       "but also specified a match string."), None
                typed.add(kind)
            else:
                return ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}", None
        kinds = set(exact) | typed
        if IP in kinds and kinds & {USER, CLIENT_ID}:
            return ErrorCode.INVALID_REQUEST, (
                "Invalid entity filter component combination. IP filter component should not "
                "be used with user or clientId filter component."), None
        entries = []
        for key, values in sorted(self._quotas.items()):
            entity = _entity_of(key)
            if strict and len(entity) != len(exact) + len(typed):
                continue
            if any(t not in entity or entity[t] != name for t, name in exact.items()):
                continue
            if any(t not in entity for t in typed):
                continue
            entries.append({
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                "quota_values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
        return ErrorCode.NONE, None, entries

    # -- AlterClientQuotas -------------------------------------------------------------

    async def alter(self, entries, validate_only: bool) -> list[dict]:
        async with self._lock:
            quotas = {k: dict(v) for k, v in self._quotas.items()}
            # one answer per entity, as Kafka's map of results: an entity named
            # again is answered "Ignoring duplicate entity" (its first changes stay)
            results: dict[str, dict] = {}
            for entry in entries:
                entity_list = [(e.entity_type, e.entity_name) for e in entry.entity]
                key = json.dumps(sorted(entity_list, key=lambda e: (e[0], e[1] or "")))
                if key in results:
                    results[key].update(error_code=ErrorCode.INVALID_REQUEST,
                                        error_message="Ignoring duplicate entity")
                    continue
                code, message, _entity = self._alter_one(quotas, entity_list, entry.ops)
                results[key] = {"error_code": code, "error_message": message, "entity": [
                    {"entity_type": t, "entity_name": n} for t, n in entity_list]}
            if not validate_only and quotas != self._quotas:
                await asyncio.get_running_loop().run_in_executor(
                    None, self._file.save,
                    {k: {q: repr(v) for q, v in values.items()} for k, values in quotas.items()})
                self._set(quotas)
            return list(results.values())

    @staticmethod
    def _alter_one(quotas, entity_list, ops):
        if not entity_list:
            return ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity", None
        entity: dict[str, str | None] = {}
        for kind, name in entity_list:
            if kind in entity:
                return (ErrorCode.INVALID_REQUEST,
                        f"Invalid client quota entity, duplicate entity entry {kind}", None)
            if kind not in (USER, CLIENT_ID, IP):
                return (ErrorCode.INVALID_REQUEST,
                        f"Unhandled client quota entity type: {kind}", None)
            if name is not None and not name:
                return ErrorCode.INVALID_REQUEST, f"Empty {kind} not supported", None
            entity[kind] = name
        if IP in entity and len(entity) > 1:
            return (ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity "
                    "shouldnot be combined with User or ClientId", entity)
        keys = IP_KEYS if IP in entity else USER_CLIENT_KEYS
        changes: dict[str, float | None] = {}
        for op in ops:
            if op.key in changes:
                return (ErrorCode.INVALID_REQUEST, f"Duplicate quota key {op.key} not "
                        "updating quota for this entity", entity)
            changes[op.key] = None if op.remove else op.value
        key = _entity_key(entity)
        current = dict(quotas.get(key, {}))
        for name, value in changes.items():
            if value is None:
                current.pop(name, None)
                continue
            if name not in keys:
                return ErrorCode.INVALID_REQUEST, f"Invalid configuration key {name}", entity
            if value <= 0:
                return ErrorCode.INVALID_REQUEST, f"Quota {name} must be greater than 0", entity
            if keys[name]:
                if value > 2**63 - 1:
                    return (ErrorCode.INVALID_REQUEST,
                            f"Proposed value for {name} is too large for a LONG.", entity)
                if abs(math.fmod(value, 1.0)) > 1e-6:
                    return (ErrorCode.INVALID_REQUEST, f"{name} cannot be a fractional value.",
                            entity)
            current[name] = float(value)
        if current:
            quotas[key] = current
        else:
            quotas.pop(key, None)
        return ErrorCode.NONE, None, entity

    # -- enforcement --------------------------------------------------------------------

    def quota_for(self, user: str, client_id: str, kind: str) -> tuple[str, float] | None:
        """(entity key, quota) of the most specific quota of ``kind`` that applies."""
        quotas = self._quotas
        for entity in ({USER: user, CLIENT_ID: client_id}, {USER: user, CLIENT_ID: None},
                       {USER: user}, {USER: None, CLIENT_ID: client_id},
                       {USER: None, CLIENT_ID: None}, {USER: None},
                       {CLIENT_ID: client_id}, {CLIENT_ID: None}):
            key = _entity_key(entity)
            value = quotas.get(key, {}).get(kind)
            if value is not None:
                return key, value
        return None

    def record(self, user: str, client_id: str, kind: str, amount: float, now_ms: float) -> int:
        """Record ``amount`` against the quota that applies; the throttle time in ms."""
        found = self.quota_for(user, client_id, kind)
        if found is None:
            return 0
        key, quota = found
        # one measure per user and / or client id the quota names (a default too),
        # as Kafka tags its quota sensors
        entity = _entity_of(key)
        rate_key = (kind, user if USER in entity else None,
                    client_id if CLIENT_ID in entity else None)
        rate = self._rates.get(rate_key)
        if rate is None:
            rate = self._rates[rate_key] = _Rate(self.window_ms, self.samples)
        rate.record(amount, now_ms)
        observed, window_ms = rate.measure(now_ms)
        if observed <= quota:
            return 0
        return int(min((observed - quota) / quota * window_ms, MAX_THROTTLE_MS))
