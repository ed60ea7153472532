"""Loading a ``__consumer_offsets`` partition (Kafka's ``CoordinatorLoaderImpl``
and the shard's ``replay``): its records, read with the verified read that
passes over no byte, folded into the groups and offsets a new shard takes
over.  Pure but for the read: the runtime runs it in a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kcoord.broker.groups.consumer_group import ConsumerGroup
from kcoord.broker.groups.group import Group
from kcoord.broker.groups.offsets import OffsetAndMetadata, OffsetStore
from kcoord.protocol import group_records as G
from kcoord.protocol.records import CorruptRecordError, batch_header, batch_payload, key_values
from kcoord.protocol.records.decode import _zigzag_at
from kcoord.storage.producer_load import marker_of
from kcoord.storage.producer_state import COMMIT


class TxnRecords:
    """Records of a transactional batch: offsets a producer committed in its
    transaction (TxnOffsetCommit), pending until its end marker."""

    __slots__ = ("producer_id", "records")

    def __init__(self, producer_id: int, records: list):
        self.producer_id = producer_id
        self.records = records


class PlainBatch:
    """The records of a batch outside transactions, still encoded: the replay
    walks them and folds each in the same pass (``_fold_plain``)."""

    __slots__ = ("payload", "count")

    def __init__(self, payload: bytes, count: int):
        self.payload = payload
        self.count = count


class TxnMarker:
    """The end marker of a producer's transaction."""

    __slots__ = ("producer_id", "commit")

    def __init__(self, producer_id: int, commit: bool):
        self.producer_id = producer_id
        self.commit = commit


@dataclass
class LoadedPartition:
    groups: dict[str, Group] = field(default_factory=dict)
    consumer_groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    offsets: dict[str, dict] = field(default_factory=dict)
    # producer id -> group -> {(topic, partition): (offset, order)}:
    # transactional offsets whose transaction has not ended yet
    pending_txn: dict[int, dict[str, dict]] = field(default_factory=dict)
    # group -> {(topic, partition): order}: where in the log each committed
    # offset's record is (negative, in log order), for a later transaction's
    # commit to keep a newer one
    written_at: dict[str, dict] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0  # unknown record types (share and streams groups)
    unreadable: int = 0

    def counts(self) -> dict[str, int]:
        return {"groups": len(self.groups), "records": self.records}


def replay(records: Iterable) -> LoadedPartition:
    """Rebuild the groups and offsets of one ``__consumer_offsets`` partition from
    its records, in log order: the last record of a key wins, tombstones remove
    (GroupMetadataManager.loadGroupsAndOffsets).  ``records``: what
    ``offsets_batches`` gives, or (key, value) tuples in the place of a
    ``PlainBatch``.  Pure: safe in a worker thread."""
    loaded = LoadedPartition()
    # The last record of each key is all that counts: keep the raw bytes of the
    # last one per key (no decoding), then decode only those.  Offset-commit keys
    # v0 and v1 have the same body: one logical key.
    # A consumer group's records are folded in the order of their last
    # occurrence (a key written again moves to the end), so that a group deleted
    # and made again comes back as the new one.
    latest: dict[bytes, bytes | None] = {}
    order: dict[bytes, int] = {}  # an offset key's record: its place in the log
    pending: dict[int, dict[bytes, tuple[bytes | None, int]]] = {}

    def keep(key: bytes, value, at: int) -> None:
        if len(key) < 2:  # not even a version: unreadable, once per key when decoded
            latest[key] = value
            return
        if key[:2] == b"\x00\x00":
            key = b"\x00\x01" + key[2:]
        elif key[0] != 0 or key[1] > 2:
            latest.pop(key, None)
        if key[:2] == b"\x00\x01":
            if at < order.get(key, -1):
                return  # a transaction's offset older than the one committed since
            order[key] = at
            if value is None:  # a tombstone also drops what transactions hold
                for held in pending.values():
                    held.pop(key, None)
        latest[key] = value

    count = 0  # records so far: the place of the current one in the log
    for item in records:
        if type(item) is PlainBatch:
            count = _fold_plain(item.payload, item.count, latest, order, pending, count)
        elif type(item) is tuple:
            # keep(key, value, count) written out: this runs for every record.
            # A record outside transactions is the newest of its key, so the
            # check of an older transactional offset never applies here.
            key, value = item
            count += 1
            if key is None:
                continue
            try:
                if key[0] == 0 and key[1] < 2:
                    if key[1] == 0:
                        key = b"\x00\x01" + key[2:]
                    order[key] = count
                    if value is None and pending:
                        for held in pending.values():
                            held.pop(key, None)
                elif key[0] != 0 or key[1] > 2:
                    latest.pop(key, None)
            except IndexError:  # not even a version: unreadable, counted once per key
                pass  # (as any other key that does not decode)
            latest[key] = value
        elif isinstance(item, TxnRecords):
            held = pending.setdefault(item.producer_id, {})
            for key, value in item.records:
                count += 1
                if key is not None:
                    if key[:2] == b"\x00\x00":
                        key = b"\x00\x01" + key[2:]
                    held[key] = (value, count)
        else:  # a marker: the transaction's offsets count from here, or never
            held = pending.pop(item.producer_id, {})
            if item.commit:
                for key, (value, at) in held.items():
                    keep(key, value, at)
    loaded.records = count
    total = count + 1
    for producer_id, held in pending.items():
        by_group: dict[str, dict] = {}
        for key, (value, at) in held.items():
            try:
                kind, fields = G.decode_key(key)
                decoded = G.decode_value(kind, value)
            except Exception:  # noqa: BLE001 - an undecodable record costs itself
                loaded.unreadable += 1
                continue
            if kind == G.OFFSET_COMMIT and decoded is not None:
                by_group.setdefault(fields.group, {})[(fields.topic, fields.partition)] = (
                    OffsetAndMetadata(decoded.offset, decoded.leader_epoch, decoded.metadata,
                                      decoded.commit_timestamp, decoded.expire_timestamp),
                    at - total)
        loaded.pending_txn[producer_id] = by_group
    store = OffsetStore()
    metadata: dict[str, Any] = {}
    for key, value in latest.items():
        if value is None and key[:2] == b"\x00\x01":
            continue  # a deleted offset: nothing to decode
        try:
            kind, fields, decoded = store.replay(key, value)
            if kind == G.OFFSET_COMMIT:
                loaded.written_at.setdefault(fields.group, {})[
                    (fields.topic, fields.partition)] = order.get(key, 0) - total
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


def plain_records(plog):
    """Every (key, value) of a coordinator's log, in order (control batches hold
    no records of its own)."""
    for data in plog.verified_batches():
        header = batch_header(data, 0)
        if header.is_control:
            continue
        yield from key_values(batch_payload(data, header=header), header.records_count)


def offsets_records(plog):
    """Every (key, value) of a ``__consumer_offsets`` log, in order; the records
    of a transactional batch as one ``TxnRecords``, an end marker as a
    ``TxnMarker``."""
    for item in offsets_batches(plog):
        if type(item) is PlainBatch:
            yield from key_values(item.payload, item.count)
        else:
            yield item


def offsets_batches(plog):
    """``offsets_records`` with the records of a batch outside transactions
    still encoded, as one ``PlainBatch``: what the replay reads."""
    for data in plog.verified_batches():
        header = batch_header(data, 0)
        if header.is_control:
            if header.producer_id >= 0:
                marker = marker_of(data)
                if marker is not None:
                    yield TxnMarker(header.producer_id, marker[0] == COMMIT)
            continue
        payload = batch_payload(data, header=header)
        if header.is_transactional and header.producer_id >= 0:
            yield TxnRecords(header.producer_id, key_values(payload, header.records_count))
        else:
            yield PlainBatch(payload, header.records_count)


def _fold_plain(data: bytes, records: int, latest: dict, order: dict, pending: dict,
                count: int) -> int:
    """The ``records`` records of a batch outside transactions (its decompressed
    ``data``) walked and folded into ``latest`` and ``order`` in one pass: the
    tuple step of ``replay`` written out inside ``key_values``'s walk, as
    1M records at start-up make both the hot loop.  Returns ``count`` past them;
    raises ``CorruptRecordError`` where ``key_values`` would."""
    zz = _zigzag_at
    pos = 0
    end = len(data)
    try:
        for _ in range(records):
            b = data[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                length, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                length, pos = zz(data, pos)
            stop = pos + length
            if length < 0 or stop > end:
                raise CorruptRecordError("record length exceeds the batch")
            pos += 1  # attributes
            b = data[pos]
            pos = pos + 1 if b < 0x80 else zz(data, pos, 63)[1]  # timestamp delta
            b = data[pos]
            if b < 0x80:  # offset delta
                pos += 1
            else:
                pos = pos + 2 if data[pos + 1] < 0x80 else zz(data, pos)[1]
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = zz(data, pos)
            if n >= 0:
                key = data[pos : pos + n]
                pos += n
            else:
                key = None
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = zz(data, pos)
            if n >= 0:
                value = data[pos : pos + n]
                pos += n
            else:
                value = None
            if pos >= stop:  # the header count is still to come
                raise CorruptRecordError("record length does not match its content")
            pos = stop
            count += 1
            if key is None:
                continue
            try:
                if key[0] == 0 and key[1] < 2:
                    if key[1] == 0:
                        key = b"\x00\x01" + key[2:]
                    order[key] = count
                    if value is None and pending:
                        for held in pending.values():
                            held.pop(key, None)
                elif key[0] != 0 or key[1] > 2:
                    latest.pop(key, None)
            except IndexError:  # not even a version: unreadable, counted once per key
                pass
            latest[key] = value
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last record")
    return count


def load_partition(plog) -> LoadedPartition:
    return replay(offsets_batches(plog))
