"""Committed offsets (Kafka's ``OffsetMetadataManager``): OffsetCommit,
OffsetFetch, OffsetDelete, a deleted topic's offsets, a deleted group's
tombstones and the expiry sweep, for the groups of one shard.  It asks the
membership (``GroupMetadataManager``) whether a member may commit, as Kafka's
does.  Pure: no I/O, no clock (``now`` is given).

A commit becomes visible once durable, unless a later write of the same
partition (a deletion) was issued meanwhile, so the live state is always
what replaying the log gives; a failed write leaves the partitions as the
log holds them, as Kafka's coordinator reverts to the log.
"""

from __future__ import annotations

import functools
import itertools
import structlog

from kcoord.broker.groups.common import (
    CoordinatorConfig,
    chunked_writes,
    java_length,
    java_long,
    map_write_error,
)
from kcoord.broker.groups.consumer_group import ConsumerGroup
from kcoord.broker.groups.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from kcoord.broker.groups.membership import GroupMetadataManager
from kcoord.broker.groups.offsets import OffsetAndMetadata, OffsetStore
from kcoord.broker.runtime.outcome import Outcome, Write
from kcoord.protocol import group_records as G
from kcoord.protocol.errors import ErrorCode as E

log = structlog.get_logger("kcoord.groups")

S = GroupState


class OffsetMetadataManager:
    def __init__(self, config: CoordinatorConfig, membership: GroupMetadataManager, *,
                 refusal: E | None = None):
        self.config = config
        self.membership = membership
        self.groups = membership.groups  # the same dict: a commit may create a simple group
        self.refusal = refusal
        self.consumer = None  # the shard's ConsumerGroupManager, set by the shard
        self.offsets = OffsetStore()
        # Offset writes not yet durable: group -> {partition: sequence of the
        # latest write}.
        self._in_flight: dict[str, dict[tuple[str, int], int]] = {}
        # What the log holds for those partitions.
        self._logged: dict[str, dict[tuple[str, int], OffsetAndMetadata | None]] = {}
        self._write_seq = itertools.count(1)
        # Transactional offsets (TxnOffsetCommit) waiting for their transaction's
        # end marker: producer id -> group -> {partition: (offset, write order)}.
        self.pending_txn: dict[int, dict[str, dict[tuple[str, int], tuple]]] = {}
        # The write order (the log's order: writes are appended as issued) of the
        # record each committed offset came from, for a transaction's commit to
        # keep a later one (OffsetMetadataManager compares record offsets).
        # Loaded offsets have negative orders, below every new write.
        self.written_at: dict[str, dict[tuple[str, int], int]] = {}

    def _refusal(self, group_id: str) -> E | None:
        return self.refusal

    def forget(self, group_id: str) -> None:
        """A deleted group's offsets go with it."""
        self.offsets.groups.pop(group_id, None)
        self.written_at.pop(group_id, None)

    # == OffsetCommit ===================================================================

    def commit(self, ticket, group_id: str, generation: int, member_id: str,
               instance_id: str | None, offsets: dict[tuple[str, int], OffsetAndMetadata],
               now: int, *, version: int = 9, retention_ms: int = -1) -> Outcome:
        """``offsets`` holds the partitions that passed the topic checks; the answer
        is ``{(topic, partition): error}`` for them."""
        out = Outcome()

        def every(code: E) -> Outcome:
            return out.answer(ticket, {tp: code for tp in offsets})

        if (refusal := self._refusal(group_id)) is not None:
            return every(refusal)
        group = self.groups.get(group_id)
        created = group is None
        if group is None:
            if generation >= 0:
                return every(E.GROUP_ID_NOT_FOUND if version >= 9 else E.ILLEGAL_GENERATION)
            # Kept only if something is written: a commit refused for every
            # partition (OFFSET_METADATA_TOO_LARGE) leaves no group behind, as
            # Kafka lists none.
            group = Group(group_id)
        if isinstance(group, ConsumerGroup):
            error = validate_consumer_commit(group, generation, member_id, version, offsets,
                                             self.consumer.metadata.lookup)
        else:
            error = self.membership.validate_offset_commit(group, generation, member_id,
                                                           instance_id)
        if error is not E.NONE:
            return every(error)
        if isinstance(group, Group) and group.state in (S.STABLE, S.PREPARING_REBALANCE) and \
                member_id in group.members:
            self.membership.arm_session(group, group.members[member_id], now)
        answer = {}
        stored = {}
        # now + retention as a Java long: a huge retention wraps, as in Kafka.
        expire = java_long(now + retention_ms) if retention_ms != -1 else -1
        for tp, committed in offsets.items():
            if java_length(committed.metadata) > self.config.offset_metadata_max_bytes:
                answer[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            answer[tp] = E.NONE
            stored[tp] = OffsetAndMetadata(
                committed.offset, committed.leader_epoch if expire == -1 else -1,
                committed.metadata, now, expire)
        if not stored:
            return out.answer(ticket, answer)
        if created:
            self.groups[group_id] = group
            log.info("group.created", group_id=group_id, generation=group.generation,
                     reason="offset commit of a simple consumer")

        records = OffsetStore.commit_records(group_id, stored)
        seq = self._issue(group_id, stored)

        out.writes.append(Write(records, functools.partial(
            self._committed, ticket, group, seq, stored, answer)))
        return out

    def _committed(self, ticket, group: Group, seq: int, stored: dict, answer: dict,
                   error: E, now: int) -> Outcome:
        """A commit is durable, or failed: the offsets become what the log holds,
        unless a later write of the same partitions was issued meanwhile."""
        group_id = group.group_id
        latest = self._settle(group_id, seq, stored, error)
        if group_id in self.groups:  # the same group, or what it became (KIP-848)
            self.offsets.apply(group_id, latest)
            if error is E.NONE:
                orders = self.written_at.setdefault(group_id, {})
                for tp in latest:
                    orders[tp] = seq
        if error is not E.NONE:
            code = map_write_error(error)
            answer = {tp: code if tp in stored else c for tp, c in answer.items()}
        return Outcome().answer(ticket, answer)

    def _issue(self, group_id: str, partitions) -> int:
        """Register an offset write of ``partitions``; returns its sequence."""
        seq = next(self._write_seq)
        pending = self._in_flight.setdefault(group_id, {})
        logged = self._logged.setdefault(group_id, {})
        for tp in partitions:
            if tp not in pending:
                logged[tp] = self.offsets.get(group_id, *tp)
            pending[tp] = seq
        return seq

    def _settle(self, group_id: str, seq: int, changes: dict, error: E = E.NONE) -> dict:
        """A write is durable (or failed): for the partitions no later write
        overrides, what the log now holds, to make live."""
        pending = self._in_flight.get(group_id, {})
        logged = self._logged.get(group_id, {})
        if error is E.NONE:
            logged.update((tp, v) for tp, v in changes.items() if tp in logged)
        latest = {tp: logged.pop(tp, None) for tp in changes if pending.get(tp) == seq}
        for tp in latest:
            del pending[tp]
        if not pending:
            self._in_flight.pop(group_id, None)
            self._logged.pop(group_id, None)
        return latest

    def _held_or_pending(self, group_id: str):
        """The partitions with a committed offset or one being written."""
        return set(self.offsets.groups.get(group_id, ())) | set(self._in_flight.get(group_id, ()))

    def _delete_offsets_now(self, group_id: str, partitions, done=None) -> list[Write]:
        """Tombstones for ``partitions`` (those held or being written), applied to
        the live state at once; a commit still in flight will not bring them back."""
        partitions = list(partitions)
        seq = self._issue(group_id, partitions)
        self.offsets.apply(group_id, {tp: None for tp in partitions})
        self._forget_pending(group_id, partitions)
        return chunked_writes(self._offset_tombstones(group_id, partitions), functools.partial(
            self._offsets_deleted, group_id, seq, partitions, done))

    def _offsets_deleted(self, group_id: str, seq: int, partitions, done, error: E,
                         now: int) -> Outcome:
        latest = self._settle(group_id, seq, dict.fromkeys(partitions), error)
        if group_id in self.groups:
            self.offsets.apply(group_id, latest)
        return done(error, now) if done is not None else Outcome()

    # == TxnOffsetCommit and the end of transactions ====================================

    def txn_commit(self, ticket, group_id: str, producer_id: int, producer_epoch: int,
                   generation: int, member_id: str, instance_id: str | None,
                   offsets: dict[tuple[str, int], OffsetAndMetadata], now: int,
                   version: int) -> Outcome:
        """TxnOffsetCommit: the offsets are written in a batch of the producer's
        transaction and count once it commits (OffsetMetadataManager.
        commitTransactionalOffset).  Answers ``{(topic, partition): error}``."""
        out = Outcome()

        def every(code: E) -> Outcome:
            return out.answer(ticket, {tp: code for tp in offsets})

        if (refusal := self._refusal(group_id)) is not None:
            return every(refusal)
        group = self.groups.get(group_id)
        anonymous = generation == -1 and not member_id and instance_id is None
        if group is None:
            if generation >= 0:
                return every(E.GROUP_ID_NOT_FOUND if version >= 6 else E.ILLEGAL_GENERATION)
        elif not anonymous:
            if isinstance(group, ConsumerGroup):
                error = validate_consumer_commit(group, generation, member_id, 9, offsets,
                                                 self.consumer.metadata.lookup)
            else:
                error = self.membership.validate_offset_commit(group, generation, member_id,
                                                               instance_id, transactional=True)
            if error is not E.NONE:
                return every(error)
        elif isinstance(group, Group) and group.state is S.DEAD:
            return every(E.COORDINATOR_NOT_AVAILABLE)
        answer, stored = {}, {}
        for tp, committed in offsets.items():
            if java_length(committed.metadata) > self.config.offset_metadata_max_bytes:
                answer[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            answer[tp] = E.NONE
            stored[tp] = OffsetAndMetadata(committed.offset, committed.leader_epoch,
                                           committed.metadata, now, -1)
        if not stored:
            return out.answer(ticket, answer)
        seq = next(self._write_seq)
        out.writes.append(Write(OffsetStore.commit_records(group_id, stored), functools.partial(
            self._txn_written, ticket, group_id, producer_id, stored, answer, seq),
            producer=(producer_id, producer_epoch)))
        return out

    def _txn_written(self, ticket, group_id: str, producer_id: int, stored: dict, answer: dict,
                     seq: int, error: E, now: int) -> Outcome:
        if error is not E.NONE:
            code = map_write_error(error)
            return Outcome().answer(ticket, {tp: code if tp in stored else c
                                             for tp, c in answer.items()})
        self.pending_txn.setdefault(producer_id, {}).setdefault(group_id, {}).update(
            (tp, (committed, seq)) for tp, committed in stored.items())
        if group_id not in self.groups:
            self.groups[group_id] = Group(group_id)  # a simple group, as OffsetCommit makes
            log.info("group.created", group_id=group_id, generation=0,
                     reason="transactional offset commit of a simple consumer")
        return Outcome().answer(ticket, answer)

    def complete_txn(self, ticket, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, now: int) -> Outcome:
        """The end marker of a producer's transaction: its offsets count from now
        on (commit) or never (abort), once the marker is durable."""
        if self.refusal is not None:
            return Outcome().answer(ticket, self.refusal)
        return Outcome(writes=[Write([], functools.partial(
            self._txn_completed, ticket, producer_id, commit),
            marker=(producer_id, producer_epoch, commit, coordinator_epoch))])

    def _txn_completed(self, ticket, producer_id: int, commit: bool, error: E,
                       now: int) -> Outcome:
        if error is not E.NONE:
            return Outcome().answer(ticket, error)
        pending = self.pending_txn.pop(producer_id, {})
        if commit:
            for group_id, offsets in pending.items():
                if group_id not in self.groups:
                    self.groups[group_id] = Group(group_id)  # a simple group, as a commit makes
                orders = self.written_at.setdefault(group_id, {})
                # an offset written after the transaction's own stays
                # (OffsetMetadataManager.replayEndTransactionMarker)
                newer = {tp: committed for tp, (committed, seq) in offsets.items()
                         if seq > orders.get(tp, -(1 << 62))}
                self.offsets.apply(group_id, newer)
                for tp in newer:
                    orders[tp] = offsets[tp][1]
        return Outcome().answer(ticket, E.NONE)

    def _forget_pending(self, group_id: str, partitions) -> None:
        """A deletion's tombstones also drop the transactional offsets pending for
        those partitions (Kafka's replay of an offset tombstone)."""
        for by_group in self.pending_txn.values():
            held = by_group.get(group_id)
            if held:
                for tp in partitions:
                    held.pop(tp, None)

    def unstable(self, group_id: str) -> set[tuple[str, int]]:
        """The group's partitions with transactional offsets not yet ended
        (OffsetFetch with require_stable answers them UNSTABLE_OFFSET_COMMIT)."""
        found: set[tuple[str, int]] = set()
        for by_group in self.pending_txn.values():
            found.update(by_group.get(group_id, ()))
        return found

    # == OffsetFetch ====================================================================

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[E, list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]]:
        """(group error, [(topic, [(partition, offset or None)])]); ``topics``
        None asks for every committed partition.  A consumer group's member
        fetches with its epoch (OffsetFetch v9)."""
        if (refusal := self._refusal(group_id)) is not None:
            return refusal, []
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            error = validate_consumer_fetch(group, member_id, member_epoch)
            if error is not E.NONE:
                return error, []
        held = self.offsets.offsets(group_id) if group is not None and \
            (isinstance(group, ConsumerGroup) or group.state is not S.DEAD) else {}
        if topics is None:
            by_topic: dict[str, list] = {}
            for (topic, partition), committed in held.items():
                by_topic.setdefault(topic, []).append((partition, committed))
            return E.NONE, [(t, sorted(ps, key=lambda p: p[0])) for t, ps in by_topic.items()]
        return E.NONE, [(topic, [(p, held.get((topic, p))) for p in partitions])
                        for topic, partitions in topics]

    # == DeleteGroups / OffsetDelete ========================================================

    def delete_all(self, group_id: str) -> tuple[list[tuple[bytes, None]], int, list]:
        """The offset tombstones of a group being deleted (Kafka's
        ``deleteAllOffsets``), its write's sequence and the partitions: commits
        still in flight stay deleted.  ``deleted_all`` settles the write."""
        partitions = sorted(self._held_or_pending(group_id))
        seq = self._issue(group_id, partitions)
        self._forget_pending(group_id, partitions)
        return self._offset_tombstones(group_id, partitions), seq, partitions

    def deleted_all(self, group_id: str, seq: int, partitions, error: E) -> dict:
        """The offsets the log holds once the deletion's write is durable (or failed)."""
        return self._settle(group_id, seq, {tp: None for tp in partitions}, error)

    def delete_offsets(self, ticket, group_id: str,
                       partitions: list[tuple[str, int]], now: int) -> Outcome:
        """OffsetDelete: answer ``(group error, {(topic, partition): error})``."""
        out = Outcome()
        if (refusal := self._refusal(group_id)) is not None:
            return out.answer(ticket, (refusal, {}))
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return out.answer(ticket, (E.GROUP_ID_NOT_FOUND, {}))
        answer: dict[tuple[str, int], E] = {}
        if isinstance(group, ConsumerGroup):
            deleted = []
            for tp in partitions:  # ConsumerGroup.validateOffsetDelete
                if group.members and group.is_subscribed_to(tp[0]):
                    answer[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    answer[tp] = E.NONE
                    deleted.append(tp)
        elif group.state is S.EMPTY:
            deleted = list(partitions)
            answer = {tp: E.NONE for tp in partitions}
        elif group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return out.answer(ticket, (E.NON_EMPTY_GROUP, {}))
        else:
            subscribed = group.subscribed
            deleted = []
            for tp in partitions:
                if subscribed is None or tp[0] in subscribed:
                    answer[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    answer[tp] = E.NONE
                    deleted.append(tp)
        present = self._held_or_pending(group_id)
        deleted = [tp for tp in deleted if tp in present]
        if not deleted:
            return out.answer(ticket, (E.NONE, answer))

        out.writes.extend(self._delete_offsets_now(group_id, deleted, functools.partial(
            self._offset_delete_answer, ticket, answer)))
        return out

    @staticmethod
    def _offset_delete_answer(ticket, answer: dict, error: E, now: int) -> Outcome:
        if error is not E.NONE:
            return Outcome().answer(ticket, (map_write_error(error), {}))
        return Outcome().answer(ticket, (E.NONE, answer))

    def delete_topic_offsets(self, topics: set[str], now: int) -> Outcome:
        """A deleted topic's committed offsets get tombstones in every group."""
        out = Outcome()
        for group_id in set(self.offsets.groups) | set(self._in_flight):
            gone = [tp for tp in self._held_or_pending(group_id) if tp[0] in topics]
            if gone:
                out.writes.extend(self._delete_offsets_now(group_id, sorted(gone)))
        return out

    @staticmethod
    def _offset_tombstones(group_id: str, partitions) -> list[tuple[bytes, None]]:
        return [(G.offset_commit_key(group_id, t, p), None) for t, p in partitions]

    # == offset expiry (OffsetMetadataManager.cleanupExpiredOffsets) ==========================

    def expire_offsets(self, now: int) -> Outcome:
        out = Outcome()
        retention = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            if isinstance(group, ConsumerGroup):
                if group.group_id not in self._in_flight:
                    out.merge(self._expire_consumer_group(group, now))
                continue
            if group.state is S.DEAD or group.group_id in self._in_flight:
                continue
            held = self.offsets.groups.get(group.group_id, {})
            expired = [tp for tp, o in held.items()
                       if self._offset_expired(group, tp, o, now, retention)]
            records = self._offset_tombstones(group.group_id, expired)
            seq = self._issue(group.group_id, expired) if expired else None
            since = group.current_state_timestamp
            if expired:
                self.offsets.apply(group.group_id, {tp: None for tp in expired})
                log.info("group.offsets_expired", group_id=group.group_id,
                         generation=group.generation, state=group.state.value,
                         partitions=len(expired), reason=self._expiry_reason(group))
            if group.state is S.EMPTY and not self.offsets.has_offsets(group.group_id):
                group.transition_to(S.DEAD, now)
                self.membership.forget_group(group)  # its offsets with it (forget)
                records.append((G.group_metadata_key(group.group_id), None))
                log.info("group.deleted", group_id=group.group_id, generation=group.generation,
                         reason="empty and all its offsets expired")
            if records:
                out.writes.extend(chunked_writes(records, functools.partial(
                    self._expiry_written, group, seq, expired, since)))
        return out

    def _expire_consumer_group(self, group: ConsumerGroup, now: int) -> Outcome:
        """A consumer group's offsets expire when it no longer subscribes to their
        topic and they are older than the retention (or past their explicit
        expiry); an empty group without offsets is deleted then
        (GroupMetadataManager.cleanupGroupMetadata)."""
        out = Outcome()
        retention = self.config.offsets_retention_ms
        held = self.offsets.groups.get(group.group_id, {})
        expired = [tp for tp, o in held.items()
                   if not group.is_subscribed_to(tp[0]) and
                   (now >= o.expire_timestamp if o.expire_timestamp != -1
                    else now - o.commit_timestamp >= retention)]
        records = self._offset_tombstones(group.group_id, expired)
        seq = self._issue(group.group_id, expired) if expired else None
        if expired:
            self.offsets.apply(group.group_id, {tp: None for tp in expired})
            log.info("group.offsets_expired", group_id=group.group_id,
                     group_epoch=group.group_epoch, state=group.state.value,
                     partitions=len(expired),
                     reason=f"the group does not subscribe to their topics and they were "
                            f"committed longer ago than offsets.retention.minutes "
                            f"({retention} ms), or past their explicit expiry time")
        if not group.members and not group.pending and \
                not self.offsets.has_offsets(group.group_id):
            records.extend(self.consumer.deletion_records(group))
            self.consumer.forget(group)
            group.dead = True
            log.info("group.deleted", group_id=group.group_id, group_epoch=group.group_epoch,
                     reason="empty and all its offsets expired")
        if records:
            out.writes.extend(chunked_writes(records, functools.partial(
                self._consumer_expiry_written, group, seq, expired)))
        return out

    def _consumer_expiry_written(self, group: ConsumerGroup, seq, expired, error: E,
                                 now: int) -> Outcome:
        latest = self._settle(group.group_id, seq, dict.fromkeys(expired), error) \
            if seq is not None else {}
        if error is not E.NONE and group.dead and group.group_id not in self.groups:
            group.dead = False
            self.groups[group.group_id] = group
        if self.groups.get(group.group_id) is group:
            self.offsets.apply(group.group_id, latest)
        return Outcome()

    def _expiry_reason(self, group: Group) -> str:
        retention = f"offsets.retention.minutes ({self.config.offsets_retention_ms} ms)"
        if group.protocol_type is None:
            return f"committed by a simple consumer longer ago than {retention}, " \
                   "or past their explicit expiry time"
        if group.state is S.EMPTY:
            return f"the group has been Empty longer than {retention}, " \
                   "or past their explicit expiry time"
        return f"the group no longer subscribes to their topics and they were committed " \
               f"longer ago than {retention}, or past their explicit expiry time"

    def _expiry_written(self, group: Group, seq: int, expired, since: int, error: E,
                        now: int) -> Outcome:
        """The tombstones of an expiry sweep are durable, or failed: then the group
        and offsets stay as the log has them, as Kafka reverts to the log."""
        latest = self._settle(group.group_id, seq, dict.fromkeys(expired), error) \
            if seq is not None else {}
        if error is not E.NONE and group.state is S.DEAD and group.group_id not in self.groups:
            group.state, group.current_state_timestamp = S.EMPTY, since
            self.groups[group.group_id] = group
        if self.groups.get(group.group_id) is group:
            self.offsets.apply(group.group_id, latest)
        return Outcome()

    @staticmethod
    def _offset_expired(group: Group, tp, committed: OffsetAndMetadata, now: int,
                        retention: int) -> bool:
        if group.protocol_type is None:
            clock = committed.commit_timestamp  # a simple group
        elif group.state is S.EMPTY:
            clock = group.current_state_timestamp if group.current_state_timestamp != -1 \
                else committed.commit_timestamp
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.state is S.STABLE:
            subscribed = group.subscribed
            if subscribed is None or tp[0] in subscribed:
                return False
            clock = committed.commit_timestamp
        else:
            return False
        if committed.expire_timestamp != -1:
            return now >= committed.expire_timestamp
        return now - clock >= retention


def validate_consumer_commit(group: ConsumerGroup, member_epoch: int, member_id: str,
                             version: int, partitions=(), lookup=None) -> E:
    """ConsumerGroup.validateOffsetCommit (Kafka 4.4): an admin or a consumer
    outside the group (a negative epoch) commits only to an empty group; a
    member commits with OffsetCommit v9 or later (any version for a member
    that speaks the classic protocol, whose generation is its epoch), with its
    current epoch, or an older one for partitions it was given at or before
    that epoch (their assignment epochs), so a commit racing an epoch bump is
    not refused.  A classic member is refused ILLEGAL_GENERATION where a
    consumer-protocol one is refused STALE_MEMBER_EPOCH."""
    if member_epoch < 0 and not group.members:
        return E.NONE
    member = group.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    stale = E.ILLEGAL_GENERATION if member.uses_classic else E.STALE_MEMBER_EPOCH
    if version < 9 and not member.uses_classic:
        return E.UNSUPPORTED_VERSION
    if member_epoch == member.member_epoch:
        return E.NONE
    if member_epoch > member.member_epoch:
        return stale
    for topic, partition in partitions:
        found = lookup(topic) if lookup is not None else None
        given = member.assignment_epoch(found[0], partition) if found is not None else None
        if given is None or member_epoch < given:
            return stale
    return E.NONE


def validate_consumer_fetch(group: ConsumerGroup, member_id: str | None,
                            member_epoch: int) -> E:
    """ConsumerGroup.validateOffsetFetch: without a member (an admin), any fetch;
    a member fetches with its current epoch (a classic member's generation)."""
    if member_id is None and member_epoch < 0:
        return E.NONE
    member = group.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return E.ILLEGAL_GENERATION if member.uses_classic else E.STALE_MEMBER_EPOCH
    return E.NONE
