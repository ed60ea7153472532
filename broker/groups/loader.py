"""Loading a ``__consumer_offsets`` partition (Kafka's ``CoordinatorLoaderImpl``
and the shard's ``replay``): its records, read with the verified read that
passes over no byte, folded into the groups and offsets a new shard takes
over.  Pure but for the read: the runtime runs it in a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.groups.consumer_group import ConsumerGroup
from broker.groups.group import Group
from broker.groups.offsets import OffsetStore
from protocol import group_records as G
from protocol.records import batch_header, batch_payload, key_values


@dataclass
class LoadedPartition:
    groups: dict[str, Group] = field(default_factory=dict)
    consumer_groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    offsets: dict[str, dict] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0  # unknown record types (share and streams groups)
    unreadable: int = 0

    def counts(self) -> dict[str, int]:
        return {"groups": len(self.groups), "records": self.records}


def replay(records: Iterable[tuple[bytes, bytes | None]]) -> LoadedPartition:
    """Rebuild the groups and offsets of one ``__consumer_offsets`` partition from
    its records, in log order: the last record of a key wins, tombstones remove
    (GroupMetadataManager.loadGroupsAndOffsets).  Pure: safe in a worker thread."""
    loaded = LoadedPartition()
    # The last record of each key is all that counts: keep the raw bytes of the
    # last one per key (no decoding), then decode only those.  Offset-commit keys
    # v0 and v1 have the same body: one logical key.
    # A consumer group's records are folded in the order of their last
    # occurrence (a key written again moves to the end), so that a group deleted
    # and made again comes back as the new one.
    latest: dict[bytes, bytes | None] = {}
    for key, value in records:
        loaded.records += 1
        if key is None:
            continue
        if key[:2] == b"\x00\x00":
            key = b"\x00\x01" + key[2:]
        elif key[0] != 0 or key[1] > 2:
            latest.pop(key, None)
        latest[key] = value
    store = OffsetStore()
    metadata: dict[str, Any] = {}
    for key, value in latest.items():
        if value is None and key[:2] == b"\x00\x01":
            continue  # a deleted offset: nothing to decode
        try:
            kind, fields, decoded = store.replay(key, value)
        except G.UnknownRecordType:
            loaded.skipped += 1
            continue
        except Exception:  # an undecodable record costs itself, not the partition
            loaded.unreadable += 1
            continue
        if kind == G.GROUP_METADATA:
            metadata[fields.group] = decoded
        elif kind != G.OFFSET_COMMIT:
            # GroupMetadataManager.replay: any value makes the group; the group's
            # own tombstone ends it
            group = loaded.consumer_groups.get(fields.group)
            if kind == G.CONSUMER_GROUP_METADATA and decoded is None:
                loaded.consumer_groups.pop(fields.group, None)
            elif group is not None:
                group.apply(kind, fields, decoded)
            elif decoded is not None:
                group = loaded.consumer_groups[fields.group] = ConsumerGroup(fields.group)
                group.apply(kind, fields, decoded)
    for group_id, value in metadata.items():
        if value is not None:
            loaded.groups[group_id] = Group.from_record(group_id, value)
    for group_id in store.groups:
        if group_id not in loaded.groups and group_id not in loaded.consumer_groups:
            loaded.groups[group_id] = Group(group_id, generation=0)  # a simple group
    loaded.offsets = store.groups
    return loaded


def offsets_records(plog):
    """Every (key, value) of a ``__consumer_offsets`` log, in order (control
    batches hold no group records)."""
    for data in plog.verified_batches():
        header = batch_header(data, 0)
        if header.is_control:
            continue
        yield from key_values(batch_payload(data, 0, header.size), header.records_count)


def load_partition(plog) -> LoadedPartition:
    return replay(offsets_records(plog))
