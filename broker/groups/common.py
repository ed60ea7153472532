"""What the group coordinator's parts share: its settings, a JoinGroup request,
the shapes of refused JoinGroup and SyncGroup answers, and Java's ways of
counting and wrapping that Kafka's checks depend on."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcoord.broker.runtime.outcome import Write
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.wire import MAX_STRING_BYTES

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's hard-coded join timeout of a new member
WRITE_CHUNK_BYTES = 256 * 1024  # well under __consumer_offsets' max.message.bytes (1 MiB)
CLASSIC = "classic"
# The group configs a consumer group (KIP-848) runs with.
CONSUMER_GROUP_SETTINGS = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                           "consumer.assignment.interval.ms")


@dataclass(slots=True)
class CoordinatorConfig:
    partitions: int = 50  # of __consumer_offsets: one shard each
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 0
    max_group_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    # the consumer group protocol (KIP-848)
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_assignment_interval_ms: int = 0
    # group.consumer.migration.policy: disabled, upgrade, downgrade or bidirectional
    consumer_migration_policy: str = "bidirectional"
    # group id -> {group config name: value} for the groups that set one of
    # CONSUMER_GROUP_SETTINGS themselves (``broker.groups.group_configs``)
    per_group: dict[str, dict[str, int]] = field(default_factory=dict)

    def session_timeout_ms(self, group_id: str) -> int:
        return self._own(group_id, "consumer.session.timeout.ms",
                         self.consumer_session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._own(group_id, "consumer.heartbeat.interval.ms",
                         self.consumer_heartbeat_interval_ms)

    def assignment_interval_ms(self, group_id: str) -> int:
        return self._own(group_id, "consumer.assignment.interval.ms",
                         self.consumer_assignment_interval_ms)

    def _own(self, group_id: str, name: str, default: int) -> int:
        own = self.per_group.get(group_id)
        return default if own is None else own.get(name, default)

    @property
    def upgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("downgrade", "bidirectional")


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 9
    reason: str | None = None


def join_error(code: E, member_id: str = "") -> dict:
    return {"error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False,
            "member_id": member_id, "members": []}


def sync_answer(code: E, assignment: bytes = b"", protocol_type=None, protocol_name=None) -> dict:
    return {"error_code": code, "protocol_type": protocol_type,
            "protocol_name": protocol_name, "assignment": assignment}


def map_write_error(code: E) -> E:
    """GroupMetadataManager.appendGroupMetadataErrorToResponseError (new coordinator)."""
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    return code


def fits_string(text: str) -> bool:
    """Whether ``text`` fits a Kafka string field (at most 32767 UTF-8 bytes)."""
    return len(text) * 4 <= MAX_STRING_BYTES or len(text.encode("utf-8")) <= MAX_STRING_BYTES


def java_long(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


def java_length(text: str) -> int:
    """``String.length()``: UTF-16 code units."""
    if text.isascii():  # constant time in CPython: the usual (and empty) metadata
        return len(text)
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def chunked_writes(records, done=None) -> list[Write]:
    """Tombstones in batches small enough for ``max.message.bytes`` (Kafka writes
    expiry and deletion records non-atomically, in as many batches as
    needed); ``done`` follows the last one."""
    chunks, size = [[]], 0
    for key, value in records:
        cost = len(key) + (len(value) if value is not None else 0) + 24
        if size + cost > WRITE_CHUNK_BYTES and chunks[-1]:
            chunks.append([])
            size = 0
        chunks[-1].append((key, value))
        size += cost
    return [Write(chunk, done if i == len(chunks) - 1 else None)
            for i, chunk in enumerate(chunks)]
