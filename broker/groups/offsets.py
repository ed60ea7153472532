"""Committed offsets: the pure part of offset management (no I/O).

A commit is two steps, as in Kafka's GroupMetadataManager: ``commit_records``
gives the ``__consumer_offsets`` records to append, and once the append is
durable ``apply`` makes the offsets visible.  Deleting offsets works the same
way with tombstones.  ``replay`` rebuilds the same state from the records read
back from the log at start-up: the last record of a key wins and a tombstone
removes it, so replaying what was written gives exactly the live state.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcoord.protocol import group_records as G


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # set only by OffsetCommit v2-4 with a retention time

    def __post_init__(self) -> None:
        # The record of a commit with an expiry (value v1) has no leader epoch,
        # and the OffsetCommit versions with a retention time carry none.
        if self.expire_timestamp != -1 and self.leader_epoch != -1:
            raise ValueError("a commit with an expiry time has no leader epoch")

    def value(self) -> bytes:
        return G.offset_commit_value(self.offset, self.metadata, self.commit_timestamp,
                                     leader_epoch=self.leader_epoch,
                                     expire_timestamp=self.expire_timestamp)


Partition = tuple[str, int]


class OffsetStore:
    def __init__(self) -> None:
        self.groups: dict[str, dict[Partition, OffsetAndMetadata]] = {}

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.groups.get(group, {}).get((topic, partition))

    def offsets(self, group: str) -> dict[Partition, OffsetAndMetadata]:
        return dict(self.groups.get(group, {}))

    def has_offsets(self, group: str) -> bool:
        return bool(self.groups.get(group))

    # -- writing: records first, state once they are durable ------------------

    @staticmethod
    def commit_records(group: str, offsets: dict[Partition, OffsetAndMetadata]):
        return [(G.offset_commit_key(group, t, p), o.value()) for (t, p), o in offsets.items()]

    def delete_records(self, group: str, partitions) -> list[tuple[bytes, None]]:
        """Tombstones for the offsets of ``partitions`` that the group has."""
        held = self.groups.get(group, {})
        return [(G.offset_commit_key(group, t, p), None) for t, p in partitions if (t, p) in held]

    def apply(self, group: str, offsets: dict[Partition, OffsetAndMetadata | None]) -> None:
        """Make durable commits (or deletions, as None) visible."""
        held = self.groups.setdefault(group, {})
        for tp, committed in offsets.items():
            if committed is None:
                held.pop(tp, None)
            else:
                held[tp] = committed
        if not held:
            del self.groups[group]

    # -- loading ---------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None):
        """Apply one record read back from ``__consumer_offsets``.

        Returns ``(kind, key fields, value fields)`` so that the caller can
        rebuild group metadata; unknown record types raise
        ``G.UnknownRecordType`` (Kafka skips them with a warning).
        """
        kind, fields = G.decode_key(key)
        decoded = G.decode_value(kind, value)
        if kind == G.OFFSET_COMMIT:
            committed = None if decoded is None else OffsetAndMetadata(
                decoded.offset, decoded.leader_epoch, decoded.metadata,
                decoded.commit_timestamp, decoded.expire_timestamp)
            self.apply(fields.group, {(fields.topic, fields.partition): committed})
        return kind, fields, decoded
