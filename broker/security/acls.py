"""ACLs and their authorizer, as Kafka's ``StandardAuthorizer`` decides.

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an entry
(principal, host, operation, ALLOW or DENY).  To authorize an operation on a
resource: a super user is allowed; otherwise every ACL whose pattern matches
the resource (the literal name, the literal ``*``, a prefix of the name) and
whose principal (the client's or ``User:*``) and host (the client's or ``*``)
match is considered: a DENY for the operation (or ALL) denies; else an ALLOW
for it allows (READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS
implies DESCRIBE_CONFIGS, ALL implies everything); else, if no ACL names the
resource at all, ``allow.everyone.if.no.acl.found`` decides; else denied.

The ACLs are kept in ``kcoord-acls.json`` in the data dir (Kafka keeps them in
its metadata log), replaced atomically before a change is answered.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import structlog

from kcoord.protocol.errors import ErrorCode
from kcoord.storage.files import write_atomically

log = structlog.get_logger("kcoord.security")

ACL_FILE = "kcoord-acls.json"
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

# ResourceType
ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 1, 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                  6: "DELEGATION_TOKEN", 7: "USER"}
# PatternType
MATCH, LITERAL, PREFIXED = 2, 3, 4
PATTERN_TYPES = {1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
# AclOperation
(ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
 ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS, TWO_PHASE_COMMIT) = range(2, 16)
OPERATIONS = {2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
              8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
              12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS",
              15: "TWO_PHASE_COMMIT"}
# AclPermissionType
DENY, ALLOW = 2, 3
PERMISSIONS = {1: "ANY", 2: "DENY", 3: "ALLOW"}

_IMPLIES_DESCRIBE = {DESCRIBE, READ, WRITE, DELETE, ALTER}
_IMPLIES_DESCRIBE_CONFIGS = {DESCRIBE_CONFIGS, ALTER_CONFIGS}
# The operations each resource type has (Kafka's AclEntry.supportedOperations),
# for the authorized_operations fields.
SUPPORTED_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
              DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE, TWO_PHASE_COMMIT),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True)
class Acl:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls' and DeleteAcls' filter (Kafka's AclBindingFilter): None or
    ANY matches anything."""
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def problem(self) -> str | None:
        if self.pattern_type not in PATTERN_TYPES or self.resource_type not in (
                ANY, *RESOURCE_TYPES):
            return "Unknown patternFilter."
        if self.operation not in (ANY, *OPERATIONS) or self.permission_type not in PERMISSIONS:
            return "Unknown entryFilter."
        return None

    def matches(self, acl: Acl) -> bool:
        if self.resource_type != ANY and self.resource_type != acl.resource_type:
            return False
        name = self.resource_name
        if self.pattern_type == MATCH:
            if acl.pattern_type == LITERAL:
                if name is not None and name != acl.resource_name \
                        and acl.resource_name != WILDCARD:
                    return False
            elif name is not None and not name.startswith(acl.resource_name):
                return False
        elif self.pattern_type != ANY:
            if self.pattern_type != acl.pattern_type:
                return False
            if name is not None and name != acl.resource_name:
                return False
        elif name is not None and name != acl.resource_name:
            return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and self.operation in (ANY, acl.operation)
                and self.permission_type in (ANY, acl.permission_type))


def creation_problem(acl: Acl) -> str | None:
    """Why Kafka refuses to create this ACL (INVALID_REQUEST), or None."""
    if acl.resource_type == CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.resource_name:
        return "Invalid empty resource name"
    if acl.resource_type not in RESOURCE_TYPES:
        return f"Invalid resourceType {_name(RESOURCE_TYPES, acl.resource_type)}"
    if acl.pattern_type not in (LITERAL, PREFIXED):
        return f"Invalid patternType {_name(PATTERN_TYPES, acl.pattern_type)}"
    if acl.operation not in OPERATIONS:
        return f"Invalid operation {_name(OPERATIONS, acl.operation)}"
    if acl.permission_type not in (DENY, ALLOW):
        return f"Invalid permissionType {_name(PERMISSIONS, acl.permission_type)}"
    if ":" not in acl.principal:
        return (f"Could not parse principal from `{acl.principal}` (no colon is present "
                "separating the principal type from the principal name)")
    return None


def _name(table: dict, code: int) -> str:
    return table.get(code, "ANY" if code == 1 else "UNKNOWN")


class Authorizer:
    """The ACLs and the decisions taken from them."""

    def __init__(self, data_dir: Path, super_users: list[str], allow_if_no_acl: bool):
        self.path = Path(data_dir) / ACL_FILE
        self.super_users = set(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: set[Acl] = set()
        # resource type -> literal name -> ACLs; resource type -> prefix -> ACLs
        self._literal: dict[int, dict[str, list[Acl]]] = {}
        self._prefixed: dict[int, dict[str, list[Acl]]] = {}
        self._prefix_lengths: dict[int, list[int]] = {}
        self._lock = asyncio.Lock()

    # -- persistence ---------------------------------------------------------------

    def load(self) -> None:
        if self.path.exists():
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self._set({Acl(**entry) for entry in data.get("acls", [])})

    def _save(self, acls: set[Acl]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rows = sorted((asdict(a) for a in acls), key=lambda d: tuple(d.values()))
        write_atomically(self.path, json.dumps({"version": 1, "acls": rows}, indent=1))

    def _set(self, acls: set[Acl], index=None) -> None:
        self._acls = acls
        self._literal, self._prefixed, self._prefix_lengths = index or _index(acls)

    def _saved(self, acls: set[Acl]):
        """Save ``acls`` and index them (in a worker: thousands of ACLs take
        milliseconds); the index to swap in."""
        self._save(acls)
        return _index(acls)

    # -- the APIs --------------------------------------------------------------------

    def acls(self, acl_filter: AclFilter) -> list[Acl]:
        return [acl for acl in self._acls if acl_filter.matches(acl)]

    async def create(self, acls: list[Acl]) -> list[tuple[int, str | None]]:
        results: list[tuple[int, str | None]] = []
        added = []
        for acl in acls:
            problem = creation_problem(acl)
            if problem:
                results.append((ErrorCode.INVALID_REQUEST, problem))
            else:
                results.append((ErrorCode.NONE, None))
                added.append(acl)
        async with self._lock:
            new = self._acls | set(added)
            if new != self._acls:
                index = await asyncio.get_running_loop().run_in_executor(None, self._saved, new)
                self._set(new, index)
                log.info("security.acls_created", acls=[describe(a) for a in added])
        return results

    async def delete(self, filters: list[AclFilter]) -> list[tuple[int, str | None, list[Acl]]]:
        async with self._lock:
            results = []
            gone: set[Acl] = set()
            for acl_filter in filters:
                problem = acl_filter.problem()
                if problem:
                    results.append((ErrorCode.INVALID_REQUEST, problem, []))
                    continue
                matched = [acl for acl in self._acls if acl_filter.matches(acl)]
                gone.update(matched)
                results.append((ErrorCode.NONE, None, matched))
            if gone:
                new = self._acls - gone
                index = await asyncio.get_running_loop().run_in_executor(None, self._saved, new)
                self._set(new, index)
                log.info("security.acls_deleted", acls=[describe(a) for a in gone])
            return results

    # -- decisions -------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: int, resource_type: int,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        found_acl = False
        allowed = False
        for acl in self._matching(resource_type, name):
            found_acl = True
            result = _result(acl, principal, host, operation)
            if result is False:
                return False
            if result:
                allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl and not found_acl

    def _matching(self, resource_type: int, name: str):
        literal = self._literal.get(resource_type)
        if literal:
            yield from literal.get(name, ())
            if name != WILDCARD:
                yield from literal.get(WILDCARD, ())
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for length in self._prefix_lengths[resource_type]:
                if length > len(name):
                    break
                yield from prefixed.get(name[:length], ())

    def authorize_any(self, principal: str, host: str, operation: int,
                      resource_type: int) -> bool:
        """Whether ``operation`` is allowed on some resource of the type (Kafka's
        authorizeByResourceType, used for idempotent producers): an ALLOW for it
        that no DENY covers, or no ACL of the type at all under
        ``allow.everyone.if.no.acl.found``."""
        if principal in self.super_users:
            return True
        acls = [acl for table in (self._literal, self._prefixed)
                for by_name in (table.get(resource_type) or {}).values() for acl in by_name]
        if not acls:
            return self.allow_if_no_acl
        denies = [acl for acl in acls if _result(acl, principal, host, operation) is False]
        if any(d.pattern_type == LITERAL and d.resource_name == WILDCARD for d in denies):
            return False
        for acl in acls:
            if _result(acl, principal, host, operation) is not True:
                continue
            covered = any(
                (d.pattern_type == PREFIXED and acl.resource_name.startswith(d.resource_name))
                or (d.pattern_type == LITERAL and acl.pattern_type == LITERAL
                    and d.resource_name == acl.resource_name) for d in denies)
            if not covered:
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: int,
                              name: str) -> int:
        """The bit set of the operations allowed on the resource (the
        ``authorized_operations`` fields)."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits


def _index(acls: set[Acl]):
    """(literal, prefixed, prefix lengths): by resource type, the ACLs by name or
    prefix, and the lengths of the prefixes, longest last."""
    literal: dict[int, dict[str, list[Acl]]] = {}
    prefixed: dict[int, dict[str, list[Acl]]] = {}
    for acl in acls:
        table = literal if acl.pattern_type == LITERAL else prefixed
        table.setdefault(acl.resource_type, {}).setdefault(acl.resource_name, []).append(acl)
    lengths = {t: sorted({len(p) for p in names}) for t, names in prefixed.items()}
    return literal, prefixed, lengths


def _result(acl: Acl, principal: str, host: str, operation: int) -> bool | None:
    """True (allows), False (denies) or None (says nothing) for the request."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != ALL:
        if acl.permission_type == ALLOW:
            if operation == DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != acl.operation:
                return None
        elif operation != acl.operation:
            return None
    return acl.permission_type == ALLOW


def describe(acl: Acl) -> str:
    return (f"{acl.principal} {PERMISSIONS[acl.permission_type]} "
            f"{OPERATIONS.get(acl.operation, acl.operation)} from {acl.host} on "
            f"{RESOURCE_TYPES.get(acl.resource_type)}:{PATTERN_TYPES.get(acl.pattern_type)}:"
            f"{acl.resource_name}")


def all_operations(resource_type: int) -> int:
    """authorized_operations without an authorizer: every operation of the type."""
    return sum(1 << op for op in SUPPORTED_OPERATIONS.get(resource_type, ()))


def make_authorizer(config, data_dir: Path) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` names (None when unset)."""
    if not (config.get("authorizer.class.name") or "").strip():
        return None  # checked with the rest of the configuration
    super_users = [u.strip() for u in (config.get("super.users") or "").split(";") if u.strip()]
    return Authorizer(data_dir, super_users, bool(config.get("allow.everyone.if.no.acl.found")))
