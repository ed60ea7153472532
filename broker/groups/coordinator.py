"""The group coordinator core: Kafka's classic group protocol and offset
management as a pure, synchronous state machine (Kafka's GroupMetadataManager
and OffsetMetadataManager), one shard per ``__consumer_offsets`` partition.

Every operation takes ``now`` (milliseconds) and an opaque ``ticket`` that
stands for the request waiting for its answer, changes the state, and returns
an ``Outcome`` (``broker.runtime.outcome``): the answers to give, and the
records to append to the shard's partition (``Write``), each with the
continuation to call once the append is durable (or has failed).  The core
performs no I/O and never reads a clock; the coordinator runtime
(``broker.runtime``) appends, waits, answers and runs the timers (session
expiry, join and initial delays, pending members, pending syncs, offset
expiry), which the shard arms in the runtime's one ``Deadlines`` heap.

Where Kafka's legacy (3.9) and new (4.x) coordinators differ, this is the new
one (``GroupMetadataManager``/``OffsetMetadataManager`` in
``group-coordinator``): the checks at the front of a request come in its
order, a group created by JoinGroup is persisted at once, the initial delay
is extended whenever a rebalance started from Empty, several members leaving
together trigger one rebalance, and DeleteGroups answers once its tombstones
are durable.

Responses are plain dicts with the fields of the newest version; the API
handlers shape them for the version asked.
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from broker.groups.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from broker.groups.loader import LoadedPartition
from broker.groups.offsets import OffsetAndMetadata, OffsetStore
from broker.runtime.outcome import Outcome, Write
from broker.runtime.timers import Deadlines
from protocol import group_records as G
from protocol.errors import ErrorCode as E
from protocol.wire import MAX_STRING_BYTES

log = structlog.get_logger("kcoord.groups")

S = GroupState
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's hard-coded join timeout of a new member
WRITE_CHUNK_BYTES = 256 * 1024  # well under __consumer_offsets' max.message.bytes (1 MiB)
CLASSIC = "classic"


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


class GroupCoordinator:
    """One shard of the group coordinator: the groups and offsets of one
    ``__consumer_offsets`` partition (the runtime routes each group to the
    shard of its partition).  Built with ``refusal``, it is the stand-in the
    runtime asks for a partition it does not serve: every operation answers
    that error, shaped as its API answers it, after its own front checks."""

    def __init__(self, config: CoordinatorConfig | None = None, *, now: int = 0,
                 new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
                 partition: int = 0, timers=None, refusal: E | None = None):
        self.config = config or CoordinatorConfig()
        self.partition = partition
        self.refusal = refusal
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.timers = timers if timers is not None else Deadlines()
        self._new_uuid = new_uuid
        # Offset writes not yet durable: group -> {partition: sequence of the
        # latest write}.  A commit becomes visible once durable unless a later
        # write (a deletion) of the same partition was issued meanwhile, so the
        # live state is always what replaying the log gives.
        self._in_flight: dict[str, dict[tuple[str, int], int]] = {}
        # What the log holds for those partitions: a failed write leaves them so,
        # as Kafka's coordinator reverts to the log when an append fails.
        self._logged: dict[str, dict[tuple[str, int], OffsetAndMetadata | None]] = {}
        self._write_seq = itertools.count(1)
        # group -> generation whose assignment is being written
        self._assigning: dict[str, int] = {}
        if refusal is None:
            self.timers.schedule(("offset-expiry",),
                                 now + self.config.offsets_retention_check_interval_ms)

    # == the check in front of every request ======================================

    def _refusal(self, group_id: str) -> E | None:
        """Why this shard cannot serve the group: its partition is still loading,
        or its log could not be loaded (Kafka's coordinator is then not this
        broker's)."""
        return self.refusal

    def _writes(self, records, done=None) -> list[Write]:
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

    def _group_record(self, group: Group, assignment=None) -> tuple[bytes, bytes]:
        return (G.group_metadata_key(group.group_id),
                G.group_metadata_value(group.metadata_record(assignment)))

    # == timers =======================================================================

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
        kind = key[0]
        if kind == "session":
            return self._session_expired(key[1], key[2], now)
        if kind == "join":
            return self._join_timer(key[1], payload, now)
        if kind == "sync":
            return self._pending_sync_expired(key[1], payload, now)
        # "offset-expiry": the periodic sweep, armed again at once.
        self.timers.schedule(key, now + self.config.offsets_retention_check_interval_ms)
        return self.expire_offsets(now)

    def _arm_session(self, group: Group, member: Member, now: int, timeout: int | None = None):
        self.timers.schedule(("session", group.group_id, member.member_id),
                             now + (member.session_timeout_ms if timeout is None else timeout))

    def _cancel_session(self, group: Group, member_id: str) -> None:
        self.timers.cancel(("session", group.group_id, member_id))

    def _session_expired(self, group_id: str, member_id: str, now: int) -> Outcome | None:
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return None
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            log.info("group.pending_member_expired", group_id=group_id, member_id=member_id,
                     generation=group.generation, state=group.state.value,
                     reason="did not join again with the member id it was given "
                            "within its session timeout")
            if group.state is S.PREPARING_REBALANCE and group.has_all_members_joined():
                return self._complete_join(
                    group, now, f"pending member {member_id} expired and every member "
                                "has joined")
            return None
        member = group.members.get(member_id)
        if member is None:
            return None
        if not member.is_new and (member.awaiting_join is not None or
                                  member.awaiting_sync is not None):
            return None  # members waiting in a rebalance count as alive
        log.info("group.member_expired", group_id=group_id, member_id=member_id,
                 generation=group.generation, state=group.state.value,
                 reason="new member did not complete its join in time" if member.is_new
                 else f"no heartbeat within the session timeout ({member.session_timeout_ms} ms)")
        return self._remove_member_and_update(group, member, now,
                                              f"member {member_id} expired")

    def _remove_member_and_update(self, group: Group, member: Member, now: int,
                                  reason: str) -> Outcome:
        out = Outcome()
        self._drop_member(group, member, out)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            out.merge(self._rebalance_or_complete(group, reason, now))
        elif group.state is S.PREPARING_REBALANCE and group.has_all_members_joined():
            out.merge(self._complete_join(
                group, now, f"{reason} and every remaining member has joined"))
        return out

    def _drop_member(self, group: Group, member: Member, out: Outcome) -> None:
        """Remove a member; its parked JoinGroup is answered UNKNOWN_MEMBER_ID, and
        its parked SyncGroup too (Kafka leaves that one unanswered)."""
        if member.awaiting_join is not None:
            out.answer(member.awaiting_join, join_error(E.UNKNOWN_MEMBER_ID))
            group.set_awaiting_join(member, None)
        if member.awaiting_sync is not None:
            out.answer(member.awaiting_sync, sync_answer(E.UNKNOWN_MEMBER_ID))
            member.awaiting_sync = None
        self._cancel_session(group, member.member_id)
        group.remove_member(member.member_id)

    # == rebalancing ==================================================================

    def _rebalance_or_complete(self, group: Group, reason: str, now: int) -> Outcome:
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            return self._prepare_rebalance(group, reason, now)
        return self._maybe_complete_join(group, now)

    def _prepare_rebalance(self, group: Group, reason: str, now: int) -> Outcome:
        out = Outcome()
        if group.state is S.COMPLETING_REBALANCE:
            self._propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS, out, now)
        group.pending_sync.clear()
        self.timers.cancel(("sync", group.group_id))
        initial = group.state is S.EMPTY
        old_state = group.state
        group.transition_to(S.PREPARING_REBALANCE, now)
        log.info("group.rebalance_started", group_id=group.group_id,
                 generation=group.generation, previous_state=old_state.value,
                 members=len(group.members), reason=reason)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timers.schedule(("join", group.group_id), now + delay,
                                 ("initial", delay, remaining))
            return out
        if group.has_all_members_joined():
            return out.merge(self._complete_join(
                group, now, f"{reason} and every member has joined"))
        self.timers.schedule(("join", group.group_id), now + group.rebalance_timeout_ms(),
                             ("normal",))
        return out

    def _maybe_complete_join(self, group: Group, now: int) -> Outcome | None:
        if group.state is not S.PREPARING_REBALANCE:
            return None
        if group.previous_state is S.EMPTY:
            return None  # the initial delay never completes early
        if not group.has_all_members_joined():
            return None
        return self._complete_join(group, now, "every member has joined")

    def _join_timer(self, group_id: str, payload, now: int) -> Outcome | None:
        group = self.groups.get(group_id)
        if group is None or group.state is not S.PREPARING_REBALANCE:
            return None
        if payload[0] == "initial":
            _, delay, remaining = payload
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                self.timers.schedule(("join", group_id), now + next_delay,
                                     ("initial", next_delay, max(remaining - delay, 0)))
                log.info("group.initial_delay_extended", group_id=group_id,
                         generation=group.generation, delay_ms=next_delay,
                         reason="a new member joined during group.initial.rebalance.delay.ms")
                return None
            return self._complete_join(
                group, now, f"group.initial.rebalance.delay.ms ({payload[1]} ms) is over")
        return self._complete_join(
            group, now, f"the rebalance timeout ({group.rebalance_timeout_ms()} ms) is over")

    def _complete_join(self, group: Group, now: int, reason: str) -> Outcome:
        """The join phase ends: a new generation (GroupMetadataManager.completeClassicGroupJoin)."""
        out = Outcome()
        self.timers.cancel(("join", group.group_id))
        gone = [m for m in group.members.values()
                if m.awaiting_join is None and m.group_instance_id is None]
        for member in gone:
            self._cancel_session(group, member.member_id)
            group.remove_member(member.member_id)
            log.info("group.member_removed", group_id=group.group_id,
                     member_id=member.member_id, generation=group.generation,
                     state=group.state.value,
                     reason=f"did not join again before the join phase ended ({reason})")
        if group.state is S.DEAD:
            return out
        if group.members and not self._elect_joined_leader(group):
            log.warning("group.rebalance_stalled", group_id=group.group_id,
                        generation=group.generation, members=len(group.members),
                        reason="no member joined again; waiting for their sessions to expire")
            self.timers.schedule(("join", group.group_id), now + group.rebalance_timeout_ms(),
                                 ("normal",))
            return out
        group.generation += 1
        group.pending_sync.clear()
        if not group.members:
            group.protocol_name = None
            group.subscribed = group.subscribed_topics()
            group.transition_to(S.EMPTY, now)
            log.info("group.empty", group_id=group.group_id, generation=group.generation,
                     reason=f"no members left when the join phase ended ({reason})")
            out.writes.append(Write([self._group_record(group, {})]))
            return out
        group.protocol_name = group.select_protocol()
        group.subscribed = group.subscribed_topics()
        group.transition_to(S.COMPLETING_REBALANCE, now)
        log.info("group.generation_started", group_id=group.group_id,
                 generation=group.generation, protocol=group.protocol_name,
                 leader=group.leader_id, members=len(group.members),
                 reason=f"the join phase ended: {reason}; waiting for the leader's "
                        "assignment (SyncGroup)")
        everyone = self._member_list(group)
        for member in group.members.values():
            if member.awaiting_join is not None:
                out.answer(member.awaiting_join, self._join_success(
                    group, member.member_id,
                    everyone if member.member_id == group.leader_id else []))
                group.set_awaiting_join(member, None)
            self._arm_session(group, member, now)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self.timers.schedule(("sync", group.group_id), now + group.rebalance_timeout_ms(),
                             group.generation)
        return out

    @staticmethod
    def _elect_joined_leader(group: Group) -> bool:
        leader = group.members.get(group.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for member in group.members.values():
            if member.awaiting_join is not None:
                group.leader_id = member.member_id
                return True
        return False

    @staticmethod
    def _member_list(group: Group) -> list[dict]:
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(group.protocol_name)} for m in group.members.values()]

    @staticmethod
    def _join_success(group: Group, member_id: str, members, *, leader=None,
                      skip_assignment=False) -> dict:
        return {"error_code": E.NONE, "generation_id": group.generation,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader": group.leader_id if leader is None else leader,
                "skip_assignment": skip_assignment, "member_id": member_id,
                "members": members}

    def _pending_sync_expired(self, group_id: str, generation: int, now: int):
        group = self.groups.get(group_id)
        if group is None or group.generation != generation:
            return None
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
            return None
        late = sorted(group.pending_sync)
        for member_id in late:
            self._cancel_session(group, member_id)
            group.remove_member(member_id)
            log.info("group.member_removed", group_id=group_id, member_id=member_id,
                     generation=generation, state=group.state.value,
                     reason=f"no SyncGroup within the rebalance timeout "
                            f"({group.rebalance_timeout_ms()} ms)")
        return self._prepare_rebalance(group, f"members {late} did not sync in time", now)

    def _propagate_assignment_error(self, group: Group, code: E, out: Outcome,
                                    now: int) -> None:
        """Every parked SyncGroup answered with ``code``; as Kafka's propagateAssignment,
        each answered member's session starts again (an expiry ignored while it
        waited must not leave it without one)."""
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync is not None:
                out.answer(member.awaiting_sync, sync_answer(code))
                member.awaiting_sync = None
                self._arm_session(group, member, now)

    # == JoinGroup =====================================================================

    def join(self, ticket, req: JoinRequest, now: int) -> Outcome:
        out = Outcome()
        if not req.group_id:
            return out.answer(ticket, join_error(E.INVALID_GROUP_ID, req.member_id))
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return out.answer(ticket, join_error(E.INVALID_SESSION_TIMEOUT, req.member_id))
        if (refusal := self._refusal(req.group_id)) is not None:
            return out.answer(ticket, join_error(refusal, req.member_id))
        new_member = req.member_id == ""
        group = self.groups.get(req.group_id)
        created = group is None
        if group is None:
            if not new_member:
                return out.answer(ticket, join_error(E.UNKNOWN_MEMBER_ID, req.member_id))
            group = self.groups[req.group_id] = Group(req.group_id)
            log.info("group.created", group_id=req.group_id, generation=group.generation,
                     reason="first JoinGroup")
        if not self._accept_joining_member(group, req.member_id):
            member = group.members.get(req.member_id)
            why = f"group.max.size ({self.config.max_group_size}) reached"
            if member is not None:
                log.info("group.member_removed", group_id=group.group_id,
                         member_id=req.member_id, generation=group.generation,
                         state=group.state.value, reason=why)
                self._drop_member(group, member, out)
            else:
                log.info("group.join_refused", group_id=group.group_id,
                         member_id=req.member_id, group_instance_id=req.group_instance_id,
                         client_id=req.client_id, generation=group.generation,
                         state=group.state.value, reason=why)
            group.pending_members.discard(req.member_id)
            out.answer(ticket, join_error(E.GROUP_MAX_SIZE_REACHED))
        elif new_member:
            self._join_new_member(ticket, group, req, now, out)
        else:
            self._join_known_member(ticket, group, req, now, out)
        if created and not out.writes:
            # The new coordinator persists a group created by JoinGroup at once
            # (generation 0, no members), so that it exists durably.
            record = (G.group_metadata_key(group.group_id), G.group_metadata_value(
                {"protocol_type": "", "generation": 0, "protocol": None, "leader": None,
                 "current_state_timestamp": now, "members": []}))
            out.writes.append(Write([record],
                                          self._created_group_write_done(group)))
        return out

    def _created_group_write_done(self, group: Group):
        def done(error: E, now: int) -> Outcome:
            out = Outcome()
            if error is E.NONE:
                return out
            # Kafka reverts the creation: the group and its parked joins are gone.
            log.warning("group.write_failed", group_id=group.group_id, error=error.name,
                        record="new empty group", generation=group.generation,
                        reason="the new group could not be stored: it is dropped and its "
                               "joins answered with the error")
            for member in list(group.members.values()):
                if member.awaiting_join is not None:
                    out.answer(member.awaiting_join, join_error(map_write_error(error)))
                    group.set_awaiting_join(member, None)
            if group.state is not S.DEAD:
                group.transition_to(S.DEAD, now)
            self._forget_group(group)
            return out
        return done

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self.config.max_group_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.state is S.PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join is not None) or \
                group.awaiting_join_count() < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(self, ticket, group: Group, req: JoinRequest, now: int, out: Outcome):
        if group.state is S.DEAD:
            out.answer(ticket, join_error(E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            out.answer(ticket, join_error(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        member_id = f"{prefix}-{self._new_uuid()}"
        if not fits_string(member_id):
            # Every answer and record carrying the member id would be unencodable
            # (DescribeGroups of the group would fail for as long as it lived):
            # refused here, with the error Kafka answers such a join with.
            source = "client id" if req.group_instance_id is None else "group.instance.id"
            log.warning("group.join_refused", group_id=group.group_id,
                        prefix_bytes=len(prefix.encode()), generation=group.generation,
                        state=group.state.value,
                        reason=f"the member id made of its {source} would be longer "
                               f"than {MAX_STRING_BYTES} bytes")
            out.answer(ticket, join_error(E.UNKNOWN_SERVER_ERROR))
            return
        if req.group_instance_id is not None:
            old = group.static_members.get(req.group_instance_id)
            if old is not None:
                out.merge(self._replace_static_member(ticket, group, req, old, member_id, now))
                return
            out.merge(self._add_member(ticket, group, req, member_id, now))
            return
        if req.version >= 4:
            # KIP-394: the member id is handed out first; the client joins again with it.
            group.pending_members.add(member_id)
            self.timers.schedule(("session", group.group_id, member_id),
                                 now + req.session_timeout_ms)
            log.info("group.member_id_required", group_id=group.group_id, member_id=member_id,
                     client_id=req.client_id, generation=group.generation,
                     state=group.state.value,
                     reason="a new member must join again with the member id it is given "
                            "(KIP-394)")
            out.answer(ticket, join_error(E.MEMBER_ID_REQUIRED, member_id))
            return
        out.merge(self._add_member(ticket, group, req, member_id, now))

    def _join_known_member(self, ticket, group: Group, req: JoinRequest, now: int,
                           out: Outcome):
        member_id = req.member_id
        if group.state is S.DEAD:
            out.answer(ticket, join_error(E.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            out.answer(ticket, join_error(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            out.merge(self._add_member(ticket, group, req, member_id, now))
            return
        error = self._validate_member(group, member_id, req.group_instance_id)
        if error is not E.NONE:
            out.answer(ticket, join_error(error, member_id))
            return
        member = group.members[member_id]
        if group.state is S.PREPARING_REBALANCE:
            out.merge(self._update_member_and_rebalance(
                ticket, group, member, req, now, "member re-joined during the rebalance"))
        elif group.state is S.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # A lost JoinGroup answer: the current generation again.
                out.answer(ticket, self._join_success(
                    group, member_id,
                    self._member_list(group) if member_id == group.leader_id else []))
            else:
                out.merge(self._update_member_and_rebalance(
                    ticket, group, member, req, now, f"member {member_id} changed its metadata"))
        elif group.state is S.STABLE:
            if member_id == group.leader_id:
                out.merge(self._update_member_and_rebalance(
                    ticket, group, member, req, now, f"leader {member_id} re-joined"))
            elif not member.matches(req.protocols):
                out.merge(self._update_member_and_rebalance(
                    ticket, group, member, req, now, f"member {member_id} changed its metadata"))
            else:
                out.answer(ticket, self._join_success(group, member_id, []))
        else:
            out.answer(ticket, join_error(E.UNKNOWN_MEMBER_ID, member_id))

    @staticmethod
    def _validate_member(group: Group, member_id: str, instance_id: str | None) -> E:
        """ClassicGroup.validateMember: FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID."""
        if instance_id is not None:
            mapped = group.static_members.get(instance_id)
            if mapped is None:
                return E.UNKNOWN_MEMBER_ID
            if mapped != member_id:
                return E.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        return E.NONE

    def _park_join(self, group: Group, member: Member, ticket, out: Outcome) -> None:
        # A second JoinGroup replaces the first (Kafka never answers that one; here
        # it is told to re-join, so that no connection waits forever).
        if member.awaiting_join is not None and member.awaiting_join is not ticket:
            out.answer(member.awaiting_join, join_error(E.REBALANCE_IN_PROGRESS,
                                                        member.member_id))
        group.set_awaiting_join(member, ticket)

    def _update_member_and_rebalance(self, ticket, group: Group, member: Member,
                                     req: JoinRequest, now: int, reason: str) -> Outcome:
        log.info("group.member_rejoined", group_id=group.group_id, member_id=member.member_id,
                 group_instance_id=member.group_instance_id, generation=group.generation,
                 state=group.state.value, reason=reason, client_reason=req.reason)
        group.update_protocols(member, list(req.protocols))
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        out = Outcome()
        self._park_join(group, member, ticket, out)
        return out.merge(self._rebalance_or_complete(group, reason, now))

    def _add_member(self, ticket, group: Group, req: JoinRequest, member_id: str,
                    now: int) -> Outcome:
        member = Member(member_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                        req.session_timeout_ms, req.protocol_type, list(req.protocols),
                        group_instance_id=req.group_instance_id, is_new=True)
        if group.state is S.PREPARING_REBALANCE and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add_member(member)
        group.pending_members.discard(member_id)
        out = Outcome()
        self._park_join(group, member, ticket, out)
        if group.state is S.PREPARING_REBALANCE:
            why = "new member joins the rebalance in progress; it waits for the join phase"
        else:
            why = (f"new member of a {group.state.value} group: a rebalance starts and "
                   "it waits for the join phase")
        log.info("group.member_joined", group_id=group.group_id, member_id=member_id,
                 group_instance_id=req.group_instance_id, client_id=req.client_id,
                 generation=group.generation, state=group.state.value, reason=why,
                 client_reason=req.reason)
        # A new member cannot heartbeat before its join is answered: it gets the
        # long new-member timeout instead of its session timeout.
        self._arm_session(group, member, now, NEW_MEMBER_JOIN_TIMEOUT_MS)
        return out.merge(self._rebalance_or_complete(group, f"new member {member_id} joined", now))

    def _replace_static_member(self, ticket, group: Group, req: JoinRequest, old_id: str,
                               new_id: str, now: int) -> Outcome:
        """KIP-345: a static member restarted; its record moves to a new member id."""
        out = Outcome()
        current_leader = group.leader_id
        member = group.members[old_id]
        if member.awaiting_join is not None:
            out.answer(member.awaiting_join, join_error(E.FENCED_INSTANCE_ID, old_id))
            group.set_awaiting_join(member, None)
        if member.awaiting_sync is not None:
            out.answer(member.awaiting_sync, sync_answer(E.FENCED_INSTANCE_ID))
            member.awaiting_sync = None
        self._move_member(group, member, new_id)
        self._cancel_session(group, old_id)
        self._arm_session(group, member, now)
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_protocols(member, list(req.protocols))
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        self._park_join(group, member, ticket, out)
        log.info("group.static_member_replaced", group_id=group.group_id,
                 group_instance_id=req.group_instance_id, old_member_id=old_id,
                 member_id=new_id, generation=group.generation, state=group.state.value,
                 reason=f"a new instance joined with group.instance.id "
                        f"{req.group_instance_id!r}: member {old_id} is fenced",
                 client_reason=req.reason)
        if group.state is S.STABLE:
            if group.select_protocol() != group.protocol_name:
                return out.merge(self._rebalance_or_complete(
                    group, f"static member {new_id} changed the group's protocol", now))
            def done(error: E, now: int) -> Outcome:
                result = Outcome()
                if member.awaiting_join is not ticket:
                    return result
                group.set_awaiting_join(member, None)
                if error is not E.NONE:
                    log.warning("group.write_failed", group_id=group.group_id,
                                error=error.name, record="static member replacement",
                                member_id=new_id, generation=group.generation,
                                reason=f"the replacement could not be stored: member "
                                       f"{old_id} keeps group.instance.id "
                                       f"{req.group_instance_id!r}")
                    if group.members.get(new_id) is member:
                        group.update_protocols(member, old[0])
                        member.rebalance_timeout_ms, member.session_timeout_ms = old[1], old[2]
                        self._move_member(group, member, old_id)
                        self._cancel_session(group, new_id)
                        self._arm_session(group, member, now)
                    answer = join_error(map_write_error(error))
                    answer.update(generation_id=group.generation,
                                  protocol_type=group.protocol_type,
                                  protocol_name=group.protocol_name, leader=current_leader)
                    return result.answer(ticket, answer)
                if req.version >= 9:
                    is_leader = group.leader_id == new_id
                    return result.answer(ticket, self._join_success(
                        group, new_id, self._member_list(group) if is_leader else [],
                        skip_assignment=is_leader))
                return result.answer(ticket, self._join_success(group, new_id, [],
                                                                leader=current_leader))

            out.writes.append(Write([self._group_record(group)], done))
            return out
        if group.state is S.COMPLETING_REBALANCE:
            return out.merge(self._prepare_rebalance(
                group, f"static member {new_id} replaced {old_id} during the sync phase", now))
        return out.merge(self._maybe_complete_join(group, now))

    @staticmethod
    def _move_member(group: Group, member: Member, new_id: str) -> None:
        old_id = member.member_id
        was_leader = group.leader_id == old_id
        pending_sync = old_id in group.pending_sync
        group.remove_member(old_id)
        member.member_id = new_id
        group.add_member(member)
        if was_leader:
            group.leader_id = new_id
        if pending_sync:
            group.pending_sync.add(new_id)

    # == SyncGroup ======================================================================

    def sync(self, ticket, group_id: str, generation: int, member_id: str,
             instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
             assignments: Iterable[tuple[str, bytes]], now: int) -> Outcome:
        out = Outcome()
        if not group_id:
            return out.answer(ticket, sync_answer(E.INVALID_GROUP_ID))
        if (refusal := self._refusal(group_id)) is not None:
            return out.answer(ticket, sync_answer(refusal))
        group = self.groups.get(group_id)
        if group is None or group.state is S.EMPTY:
            return out.answer(ticket, sync_answer(E.UNKNOWN_MEMBER_ID))
        if group.state is S.DEAD:
            return out.answer(ticket, sync_answer(E.COORDINATOR_NOT_AVAILABLE))
        error = self._validate_member(group, member_id, instance_id)
        if error is E.NONE and generation != group.generation:
            error = E.ILLEGAL_GENERATION
        if error is E.NONE and (
                (protocol_type is not None and protocol_type != group.protocol_type) or
                (protocol_name is not None and protocol_name != group.protocol_name)):
            error = E.INCONSISTENT_GROUP_PROTOCOL
        if error is not E.NONE:
            return out.answer(ticket, sync_answer(error))
        if group.state is S.PREPARING_REBALANCE:
            return out.answer(ticket, sync_answer(E.REBALANCE_IN_PROGRESS))
        member = group.members[member_id]
        self._sync_received(group, member_id)
        if group.state is S.STABLE:
            self._arm_session(group, member, now)
            return out.answer(ticket, sync_answer(E.NONE, member.assignment,
                                                  group.protocol_type, group.protocol_name))
        if member.awaiting_sync is not None:  # replaced: told to re-join, never left waiting
            out.answer(member.awaiting_sync, sync_answer(E.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = ticket  # CompletingRebalance
        if member_id != group.leader_id or self._assigning.get(group_id) == generation:
            # Followers wait for the leader; a leader that repeats its SyncGroup
            # waits for the assignment already being written.
            return out
        # Members the leader left out get an empty assignment (read with .get below).
        assignment = {m: bytes(a) for m, a in assignments if m in group.members}
        missing = [m for m in group.members if m not in assignment]
        if missing:
            log.warning("group.empty_assignments", group_id=group_id, members=missing,
                        generation=group.generation,
                        reason="the leader's assignment leaves these members out: they "
                               "get an empty one")
        log.info("group.assignment_received", group_id=group_id, member_id=member_id,
                 leader=member_id, generation=group.generation, members=len(group.members),
                 reason="the leader sent its assignment; every member gets its own once "
                        "it is durable")

        self._assigning[group_id] = generation

        def done(error: E, now: int) -> Outcome:
            result = Outcome()
            if self._assigning.get(group_id) == generation:
                del self._assigning[group_id]
            if group.state is not S.COMPLETING_REBALANCE or group.generation != generation:
                return result
            if error is not E.NONE:
                code = map_write_error(error)
                log.warning("group.write_failed", group_id=group_id, error=error.name,
                            record="assignment", generation=generation,
                            reason="the assignment could not be stored: the members are "
                                   "told the error and the group rebalances")
                self._propagate_assignment_error(group, code, result, now)
                return result.merge(self._rebalance_or_complete(
                    group, f"the assignment could not be stored ({code.name})", now))
            for m in group.members.values():
                m.assignment = assignment.get(m.member_id, b"")
                if m.awaiting_sync is not None:
                    result.answer(m.awaiting_sync, sync_answer(
                        E.NONE, m.assignment, group.protocol_type, group.protocol_name))
                    m.awaiting_sync = None
                    self._arm_session(group, m, now)
            group.transition_to(S.STABLE, now)
            log.info("group.stable", group_id=group_id, generation=group.generation,
                     members=len(group.members), protocol=group.protocol_name,
                     leader=group.leader_id,
                     reason="the leader's assignment is durable; every member gets its own")
            return result

        out.writes.append(Write([self._group_record(group, assignment)], done))
        return out

    def _sync_received(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
            self.timers.cancel(("sync", group.group_id))

    # == Heartbeat ======================================================================

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None, now: int) -> E:
        if not group_id:
            return E.INVALID_GROUP_ID
        if (refusal := self._refusal(group_id)) is not None:
            # Kafka answers blindly while the group is loading
            return E.NONE if refusal is E.COORDINATOR_LOAD_IN_PROGRESS else refusal
        group = self.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, instance_id)
        if error is not E.NONE:
            return error
        if generation != group.generation:
            return E.ILLEGAL_GENERATION
        if group.state is S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self._arm_session(group, group.members[member_id], now)
        if group.state is S.PREPARING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # == LeaveGroup =====================================================================

    def leave(self, group_id: str, members: list[tuple[str, str | None, str | None]],
              now: int) -> tuple[E, list[E], Outcome]:
        """``members``: (member id, instance id, reason).  Returns the top-level
        error, one error per member, and what else happens."""
        out = Outcome()
        if not group_id:
            return E.INVALID_GROUP_ID, [], out
        if (refusal := self._refusal(group_id)) is not None:
            return refusal, [], out
        group = self.groups.get(group_id)
        if group is None:
            # Kafka 4.x answers each member, not the request.
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members), out
        if group.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, [], out
        errors = []
        left = []
        for member_id, instance_id, reason in members:
            if member_id == "":
                mapped = group.static_members.get(instance_id) if instance_id is not None \
                    else None
                if mapped is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                target = mapped
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._cancel_session(group, member_id)
                log.info("group.pending_member_left", group_id=group_id, member_id=member_id,
                         generation=group.generation, state=group.state.value,
                         reason="LeaveGroup before its second JoinGroup",
                         client_reason=reason)
                errors.append(E.NONE)
                left.append(member_id)
                continue
            else:
                error = self._validate_member(group, member_id, instance_id)
                if error is not E.NONE:
                    errors.append(error)
                    continue
                target = member_id
            log.info("group.member_left", group_id=group_id, member_id=target,
                     group_instance_id=instance_id, generation=group.generation,
                     state=group.state.value,
                     reason=f"LeaveGroup: {reason}" if reason
                     else "LeaveGroup (the client gave no reason)", client_reason=reason)
            self._drop_member(group, group.members[target], out)
            errors.append(E.NONE)
            left.append(target)
        if left:
            if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                out.merge(self._prepare_rebalance(group, f"members {left} left", now))
            elif group.state is S.PREPARING_REBALANCE:
                out.merge(self._maybe_complete_join(group, now))
        return E.NONE, errors, out

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
        error = self._validate_commit(group, generation, member_id, instance_id)
        if error is not E.NONE:
            return every(error)
        if group.state in (S.STABLE, S.PREPARING_REBALANCE) and member_id in group.members:
            self._arm_session(group, group.members[member_id], now)
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

        def done(error: E, now: int) -> Outcome:
            result = Outcome()
            latest = self._settle(group_id, seq, stored, error)
            if self.groups.get(group_id) is group:
                self.offsets.apply(group_id, latest)
            if error is not E.NONE:
                code = map_write_error(error)
                return result.answer(ticket, {tp: code if tp in stored else c
                                              for tp, c in answer.items()})
            return result.answer(ticket, answer)

        out.writes.append(Write(records, done))
        return out

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
        changes = {tp: None for tp in partitions}

        def settled(error: E, now: int) -> Outcome:
            latest = self._settle(group_id, seq, changes, error)
            if group_id in self.groups:
                self.offsets.apply(group_id, latest)
            return done(error, now) if done is not None else Outcome()

        return self._writes(self._offset_tombstones(group_id, partitions), settled)

    def _validate_commit(self, group: Group, generation: int, member_id: str,
                         instance_id: str | None) -> E:
        if group.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state is S.EMPTY:
            return E.NONE  # a simple consumer or an admin client
        if generation >= 0 or member_id or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error is not E.NONE:
                return error
            if generation != group.generation:
                return E.ILLEGAL_GENERATION
        elif group.state is not S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        if group.state is S.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # == OffsetFetch ====================================================================

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None
                      ) -> tuple[E, list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]]:
        """(group error, [(topic, [(partition, offset or None)])]); ``topics``
        None asks for every committed partition."""
        if (refusal := self._refusal(group_id)) is not None:
            return refusal, []
        group = self.groups.get(group_id)
        held = self.offsets.offsets(group_id) if group is not None and \
            group.state is not S.DEAD else {}
        if topics is None:
            by_topic: dict[str, list] = {}
            for (topic, partition), committed in held.items():
                by_topic.setdefault(topic, []).append((partition, committed))
            return E.NONE, [(t, sorted(ps, key=lambda p: p[0])) for t, ps in by_topic.items()]
        return E.NONE, [(topic, [(p, held.get((topic, p))) for p in partitions])
                        for topic, partitions in topics]

    # == DescribeGroups / ListGroups ======================================================

    def describe(self, group_id: str) -> dict:
        if (refusal := self._refusal(group_id)) is not None:
            return {"error_code": refusal, "group_id": group_id,
                    "group_state": "", "protocol_type": "", "protocol_data": "", "members": []}
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return {"error_code": E.NONE, "group_id": group_id, "group_state": S.DEAD.value,
                    "protocol_type": "", "protocol_data": "", "members": []}
        stable = group.state is S.STABLE
        return {
            "error_code": E.NONE, "group_id": group_id, "group_state": group.state.value,
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol_name or "") if stable else "",
            "members": [{
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                "member_assignment": m.assignment,  # shown in every state (describeNoMetadata)
            } for m in group.members.values()],
        }

    def list_groups(self, states: list[str], types: list[str]) -> list[dict]:
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        if wanted_types and CLASSIC not in wanted_types:
            return []
        return [
            {"group_id": g.group_id, "protocol_type": g.protocol_type or "",
             "group_state": g.state.value, "group_type": CLASSIC}
            for g in self.groups.values()
            if g.state is not S.DEAD and
            (not wanted_states or g.state.value.lower() in wanted_states)]

    # == DeleteGroups / OffsetDelete ========================================================

    def delete_groups(self, ticket, group_ids: list[str], now: int) -> Outcome:
        """The answer: ``{group id: error}`` once the tombstones are durable."""
        out = Outcome()
        answer: dict[str, E] = {}
        deleting: list[Group] = []
        for group_id in dict.fromkeys(group_ids):
            if (refusal := self._refusal(group_id)) is not None:
                answer[group_id] = refusal
                continue
            group = self.groups.get(group_id)
            if group is None or group.state is S.DEAD:
                answer[group_id] = E.GROUP_ID_NOT_FOUND
            elif group.state is not S.EMPTY:
                answer[group_id] = E.NON_EMPTY_GROUP
            else:
                answer[group_id] = E.NONE
                deleting.append(group)
        if not deleting:
            return out.answer(ticket, answer)
        remaining = {"writes": 0}

        def finish(group: Group, settle, since: int, records_ok: E, now: int) -> Outcome:
            result = Outcome()
            latest = settle(records_ok)
            if records_ok is not E.NONE:
                answer[group.group_id] = map_write_error(records_ok)
                if group.state is S.DEAD and self.groups.get(group.group_id) is group:
                    # The deletion did not happen: the group as the log has it.
                    group.state, group.current_state_timestamp = S.EMPTY, since
                    self.offsets.apply(group.group_id, latest)
                    log.warning("group.write_failed", group_id=group.group_id,
                                generation=group.generation, error=records_ok.name,
                                record="group deletion", state=group.state.value,
                                reason="the tombstones could not be written; the group "
                                       "stays Empty")
            else:
                self._forget_group(group)
            remaining["writes"] -= 1
            if remaining["writes"] == 0:
                result.answer(ticket, answer)
            return result

        for group in deleting:
            records, settle = self._tombstones(group)
            since = group.current_state_timestamp
            group.transition_to(S.DEAD, now)
            log.info("group.deleted", group_id=group.group_id, generation=group.generation,
                     reason="DeleteGroups")
            remaining["writes"] += 1
            out.writes.extend(self._writes(records, functools.partial(
                finish, group, settle, since)))
        return out

    def _tombstones(self, group: Group) -> tuple[list[tuple[bytes, None]], Callable[[E], dict]]:
        """The tombstones of a deleted group, and what to call once they are durable
        (or failed): it gives the offsets the log then holds."""
        partitions = sorted(self._held_or_pending(group.group_id))
        seq = self._issue(group.group_id, partitions)  # commits in flight stay deleted
        records = self._offset_tombstones(group.group_id, partitions)
        records.append((G.group_metadata_key(group.group_id), None))
        return records, lambda error: self._settle(group.group_id, seq,
                                                   {tp: None for tp in partitions}, error)

    def _forget_group(self, group: Group) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        self.offsets.groups.pop(group.group_id, None)
        for member_id in [*group.members, *group.pending_members]:
            self._cancel_session(group, member_id)
        self.timers.cancel(("join", group.group_id))
        self.timers.cancel(("sync", group.group_id))

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
        if group.state is S.EMPTY:
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

        def done(error: E, now: int) -> Outcome:
            if error is not E.NONE:
                return Outcome().answer(ticket, (map_write_error(error), {}))
            return Outcome().answer(ticket, (E.NONE, answer))

        out.writes.extend(self._delete_offsets_now(group_id, deleted, done))
        return out

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
                self._forget_group(group)
                records.append((G.group_metadata_key(group.group_id), None))
                log.info("group.deleted", group_id=group.group_id, generation=group.generation,
                         reason="empty and all its offsets expired")
            if records:
                out.writes.extend(self._writes(records, functools.partial(
                    self._expiry_written, group, seq, expired, since)))
        return out

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

    def unload(self) -> Outcome:
        """The broker stops: parked requests are answered NOT_COORDINATOR, as
        when Kafka unloads a partition, so their clients look elsewhere."""
        out = Outcome()
        for group in self.groups.values():
            for member in group.members.values():
                if member.awaiting_join is not None:
                    out.answer(member.awaiting_join,
                               join_error(E.NOT_COORDINATOR, member.member_id))
                    group.set_awaiting_join(member, None)
                if member.awaiting_sync is not None:
                    out.answer(member.awaiting_sync, sync_answer(E.NOT_COORDINATOR))
                    member.awaiting_sync = None
        return out

    # == loading (CoordinatorLoader and replay) ===============================================

    def install(self, loaded: LoadedPartition, now: int) -> Outcome:
        """Take over the groups and offsets replayed from the partition's log."""
        out = Outcome()
        if loaded.skipped:
            log.warning("groups.records_skipped", partition=self.partition,
                        records=loaded.skipped, reason="unknown record types")
        if loaded.unreadable:
            log.warning("groups.records_skipped", partition=self.partition,
                        records=loaded.unreadable, reason="undecodable keys or values")
        for group_id, held in loaded.offsets.items():
            if held:
                self.offsets.groups[group_id] = held
        for group_id, group in loaded.groups.items():
            self.groups[group_id] = group
            for member in group.members.values():
                self._arm_session(group, member, now)
            if len(group.members) > self.config.max_group_size:
                out.merge(self._prepare_rebalance(
                    group, "loaded with more members than group.max.size", now))
        return out
