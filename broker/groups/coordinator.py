"""One shard of the group coordinator (Kafka's ``GroupCoordinatorShard``): the
groups and offsets of one ``__consumer_offsets`` partition, as a pure,
synchronous state machine run by the coordinator runtime (``broker.runtime``).

It is a thin facade over Kafka's two managers: membership
(``GroupMetadataManager``, ``membership.py``) and committed offsets
(``OffsetMetadataManager``, ``offset_manager.py``).  What needs both lives
here, as in Kafka's shard: DeleteGroups, the timers' dispatch, loading.

Every operation takes ``now`` (milliseconds) and an opaque ``ticket`` that
stands for the request waiting for its answer, changes the state, and returns
an ``Outcome`` (``broker.runtime.outcome``): the answers to give, and the
records to append to the shard's partition, each with the continuation to
call once the append is durable (or has failed).  No I/O, no clock; the
timers (session expiry, join and initial delays, pending members, pending
syncs, offset expiry) are armed in the runtime's one ``Deadlines`` heap.
Responses are plain dicts with the fields of the newest version; the API
handlers shape them for the version asked.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable

import structlog

from kcoord.broker.groups.common import (
    CoordinatorConfig,
    JoinRequest,
    chunked_writes,
    map_write_error,
    sync_answer,
)
from kcoord.broker.groups.consumer_group import ConsumerGroup
from kcoord.broker.groups.consumer_membership import ConsumerGroupManager, HeartbeatRequest
from kcoord.broker.groups.group import Group, GroupState
from kcoord.broker.groups.loader import LoadedPartition
from kcoord.broker.groups.membership import GroupMetadataManager
from kcoord.broker.groups.offset_manager import OffsetMetadataManager
from kcoord.broker.runtime.outcome import Outcome, Write
from kcoord.broker.runtime.timers import Deadlines
from kcoord.protocol import group_records as G
from kcoord.protocol.errors import ErrorCode as E

log = structlog.get_logger("kcoord.groups")

S = GroupState


class GroupCoordinator:
    """Built with ``refusal``, it is the stand-in the runtime asks for a
    partition it does not serve: every operation answers that error, shaped as
    its API answers it, after its own front checks."""

    def __init__(self, config: CoordinatorConfig | None = None, *, now: int = 0,
                 new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
                 partition: int = 0, timers=None, refusal: E | None = None):
        self.config = config or CoordinatorConfig()
        self.partition = partition
        self.timers = timers if timers is not None else Deadlines()
        self.membership = GroupMetadataManager(self.config, self.timers, new_uuid=new_uuid,
                                               refusal=refusal)
        self.offset_manager = OffsetMetadataManager(self.config, self.membership,
                                                    refusal=refusal)
        self.membership.on_forget = self.offset_manager.forget
        self.consumer = ConsumerGroupManager(self.config, self.timers, self.membership.groups,
                                             refusal=refusal)
        self.offset_manager.consumer = self.consumer
        self.consumer.adopt = self.membership.adopt
        if refusal is None:
            self.timers.schedule(("offset-expiry",),
                                 now + self.config.offsets_retention_check_interval_ms)

    @property
    def groups(self) -> dict[str, Group]:
        return self.membership.groups

    @property
    def offsets(self):
        return self.offset_manager.offsets

    @property
    def refusal(self) -> E | None:
        return self.membership.refusal

    @refusal.setter
    def refusal(self, code: E | None) -> None:
        self.membership.refusal = self.offset_manager.refusal = self.consumer.refusal = code

    # == the requests: each goes to the manager that owns it =========================

    def join(self, ticket, req: JoinRequest, now: int) -> Outcome:
        group = self.groups.get(req.group_id)
        config = self.config
        if isinstance(group, ConsumerGroup) and self.refusal is None and req.group_id and \
                config.min_session_timeout_ms <= req.session_timeout_ms \
                <= config.max_session_timeout_ms:
            if group.members:
                # a classic member joins a consumer group (online migration)
                return self.consumer.classic_join(ticket, group, req, now)
            if req.member_id == "":
                # An empty consumer group gives way to the classic group
                # (GroupMetadataManager.maybeDeleteEmptyConsumerGroup); its offsets stay.
                out = Outcome()
                out.writes.append(Write(self.consumer.deletion_records(group),
                                        functools.partial(self._conversion_written, group)))
                self.consumer.forget(group)
                log.info("consumer_group.deleted", group_id=group.group_id,
                         reason="a classic member joins the empty consumer group")
                return out.merge(self.membership.join(ticket, req, now))
        return self.membership.join(ticket, req, now)

    @staticmethod
    def _conversion_written(group: ConsumerGroup, error: E, now: int) -> Outcome:
        if error is not E.NONE:
            log.error("consumer_group.write_failed", group_id=group.group_id, error=error.name,
                      record="group deletion",
                      reason="the empty consumer group's tombstones could not be written "
                             "while a classic member took the group over")
        return Outcome()

    def sync(self, ticket, group_id, generation, member_id, instance_id, protocol_type,
             protocol_name, assignments, now: int) -> Outcome:
        if self._is_consumer(group_id):
            group = self.groups[group_id]
            if not group.members:
                return Outcome().answer(ticket, sync_answer(E.UNKNOWN_MEMBER_ID))
            return self.consumer.classic_sync(ticket, group, generation, member_id, instance_id,
                                              protocol_type, protocol_name, now)
        return self.membership.sync(ticket, group_id, generation, member_id, instance_id,
                                    protocol_type, protocol_name, assignments, now)

    def heartbeat(self, group_id, generation, member_id, instance_id, now: int) -> E:
        if self._is_consumer(group_id):
            return self.consumer.classic_heartbeat(self.groups[group_id], generation, member_id,
                                                   instance_id, now)
        return self.membership.heartbeat(group_id, generation, member_id, instance_id, now)

    def leave(self, group_id, members, now: int):
        if self._is_consumer(group_id):
            return self.consumer.classic_leave(self.groups[group_id], members, now)
        return self.membership.leave(group_id, members, now)

    def describe(self, group_id: str) -> dict:
        if self._is_consumer(group_id):
            return self.consumer.describe_classic(group_id)
        return self.membership.describe(group_id)

    def list_groups(self, states: list[str], types: list[str]) -> list[dict]:
        return self.membership.list_groups(states, types) + \
            self.consumer.list_groups(states, types)

    def _is_consumer(self, group_id: str) -> bool:
        return self.refusal is None and isinstance(self.groups.get(group_id), ConsumerGroup)

    # == the consumer group protocol (KIP-848) ==========================================

    def consumer_heartbeat(self, ticket, req: HeartbeatRequest, now: int) -> Outcome:
        return self.consumer.heartbeat(ticket, req, now)

    def consumer_describe(self, group_ids: list[str], version: int) -> list[dict]:
        return [self.consumer.describe(g, version) for g in group_ids]

    def commit(self, ticket, group_id, generation, member_id, instance_id, offsets,
               now: int, *, version: int = 9, retention_ms: int = -1) -> Outcome:
        return self.offset_manager.commit(ticket, group_id, generation, member_id, instance_id,
                                          offsets, now, version=version,
                                          retention_ms=retention_ms)

    def txn_commit(self, ticket, group_id, producer_id, producer_epoch, generation, member_id,
                   instance_id, offsets, version, now: int) -> Outcome:
        return self.offset_manager.txn_commit(ticket, group_id, producer_id, producer_epoch,
                                              generation, member_id, instance_id, offsets, now,
                                              version)

    def complete_txn(self, ticket, producer_id, producer_epoch, commit, coordinator_epoch,
                     now: int) -> Outcome:
        return self.offset_manager.complete_txn(ticket, producer_id, producer_epoch, commit,
                                                coordinator_epoch, now)

    def unstable_offsets(self, group_id: str) -> set:
        return self.offset_manager.unstable(group_id)

    def fetch_offsets(self, group_id: str, topics, member_id: str | None = None,
                      member_epoch: int = -1):
        return self.offset_manager.fetch_offsets(group_id, topics, member_id, member_epoch)

    def delete_offsets(self, ticket, group_id: str, partitions, now: int) -> Outcome:
        return self.offset_manager.delete_offsets(ticket, group_id, partitions, now)

    def delete_topic_offsets(self, topics: set[str], now: int) -> Outcome:
        return self.offset_manager.delete_topic_offsets(topics, now)

    def expire_offsets(self, now: int) -> Outcome:
        return self.offset_manager.expire_offsets(now)

    def unload(self) -> Outcome:
        return self.membership.unload()

    # == DeleteGroups (GroupCoordinatorShard.deleteGroups) ===============================

    def delete_groups(self, ticket, group_ids: list[str], now: int) -> Outcome:
        """The answer: ``{group id: error}`` once every deleted group's tombstones
        are durable."""
        out = Outcome()
        answer: dict[str, E] = {}
        deleting: list[Group] = []
        consumer_deleting: list[ConsumerGroup] = []
        refusal = self.refusal
        for group_id in dict.fromkeys(group_ids):
            if refusal is not None:
                answer[group_id] = refusal
                continue
            group = self.groups.get(group_id)
            if isinstance(group, ConsumerGroup):
                if group.members:
                    answer[group_id] = E.NON_EMPTY_GROUP
                else:
                    answer[group_id] = E.NONE
                    consumer_deleting.append(group)
            elif group is None or group.state is S.DEAD:
                answer[group_id] = E.GROUP_ID_NOT_FOUND
            elif group.state is not S.EMPTY:
                answer[group_id] = E.NON_EMPTY_GROUP
            else:
                answer[group_id] = E.NONE
                deleting.append(group)
        if not deleting and not consumer_deleting:
            return out.answer(ticket, answer)
        deletion = _Deletion(ticket, answer, len(deleting) + len(consumer_deleting))
        for group in consumer_deleting:
            records, seq, partitions = self.offset_manager.delete_all(group.group_id)
            records.extend(self.consumer.deletion_records(group))
            self.consumer.forget(group)
            group.dead = True
            log.info("group.deleted", group_id=group.group_id, group_epoch=group.group_epoch,
                     reason="DeleteGroups")
            out.writes.extend(chunked_writes(records, functools.partial(
                self._consumer_group_deleted, deletion, group, seq, partitions)))
        for group in deleting:
            records, seq, partitions = self.offset_manager.delete_all(group.group_id)
            records.append((G.group_metadata_key(group.group_id), None))
            since = group.current_state_timestamp
            group.transition_to(S.DEAD, now)
            log.info("group.deleted", group_id=group.group_id, generation=group.generation,
                     reason="DeleteGroups")
            out.writes.extend(chunked_writes(records, functools.partial(
                self._group_deleted, deletion, group, seq, partitions, since)))
        return out

    def _group_deleted(self, deletion: "_Deletion", group: Group, seq: int, partitions,
                       since: int, error: E, now: int) -> Outcome:
        """A deleted group's tombstones are durable, or failed: then the group is
        what the log has, Empty with the offsets the log holds."""
        latest = self.offset_manager.deleted_all(group.group_id, seq, partitions, error)
        if error is not E.NONE:
            deletion.answer[group.group_id] = map_write_error(error)
            if group.state is S.DEAD and self.groups.get(group.group_id) is group:
                group.state, group.current_state_timestamp = S.EMPTY, since
                self.offsets.apply(group.group_id, latest)
                log.warning("group.write_failed", group_id=group.group_id,
                            generation=group.generation, error=error.name,
                            record="group deletion", state=group.state.value,
                            reason="the tombstones could not be written; the group "
                                   "stays Empty")
        else:
            self.membership.forget_group(group)
        deletion.waiting -= 1
        if deletion.waiting == 0:
            return Outcome().answer(deletion.ticket, deletion.answer)
        return Outcome()

    def _consumer_group_deleted(self, deletion: "_Deletion", group: ConsumerGroup, seq: int,
                                partitions, error: E, now: int) -> Outcome:
        latest = self.offset_manager.deleted_all(group.group_id, seq, partitions, error)
        if error is not E.NONE:
            deletion.answer[group.group_id] = map_write_error(error)
            if group.group_id not in self.groups:
                group.dead = False
                self.groups[group.group_id] = group
                self.offsets.apply(group.group_id, latest)
                log.warning("group.write_failed", group_id=group.group_id,
                            error=error.name, record="group deletion",
                            reason="the tombstones could not be written; the group "
                                   "stays Empty")
        else:
            self.offset_manager.forget(group.group_id)
        deletion.waiting -= 1
        if deletion.waiting == 0:
            return Outcome().answer(deletion.ticket, deletion.answer)
        return Outcome()

    # == timers ============================================================================

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def tick(self, now: int) -> Outcome:
        """Fire every timer due on a shard that owns its ``Deadlines`` (a shard
        run by the runtime shares the runtime's heap, and the runtime calls
        ``fire``).  One at a time, earliest first, as the runtime does."""
        out = Outcome()
        mark = self.timers.mark()
        while (due := self.timers.pop_next_due(now, mark)) is not None:
            out.merge(self.fire(*due, now))
        return out

    def fire(self, key, payload, now: int) -> Outcome | None:
        if key[0] == "offset-expiry":  # the periodic sweep, armed again at once
            self.timers.schedule(key, now + self.config.offsets_retention_check_interval_ms)
            return self.offset_manager.expire_offsets(now)
        if key[0] in ("cg-session", "cg-revoke", "cg-regex", "cg-join", "cg-sync"):
            return self.consumer.fire(key, payload, now)
        return self.membership.fire(key, payload, now)

    # == loading ==========================================================================

    def install(self, loaded: LoadedPartition, now: int) -> Outcome:
        """Take over the groups and offsets replayed from the partition's log."""
        if loaded.skipped:
            log.warning("groups.records_skipped", partition=self.partition,
                        records=loaded.skipped, reason="unknown record types")
        if loaded.unreadable:
            log.warning("groups.records_skipped", partition=self.partition,
                        records=loaded.unreadable, reason="undecodable keys or values")
        for group_id, held in loaded.offsets.items():
            if held:
                self.offsets.groups[group_id] = held
        self.offset_manager.pending_txn = loaded.pending_txn
        self.offset_manager.written_at = loaded.written_at
        self.consumer.install(loaded.consumer_groups, now)
        return self.membership.install(loaded.groups, now)


class _Deletion:
    """A DeleteGroups waiting for its groups' tombstones."""

    __slots__ = ("ticket", "answer", "waiting")

    def __init__(self, ticket, answer: dict[str, E], waiting: int):
        self.ticket = ticket
        self.answer = answer
        self.waiting = waiting
