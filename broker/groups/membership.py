"""Classic group membership (Kafka's ``GroupMetadataManager``, classic groups):
JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups and ListGroups,
the rebalance and its timers, for the groups of one shard.

Where Kafka's legacy (3.9) and new (4.x) coordinators differ, this is the new
one: the checks at the front of a request come in its order, a group created
by JoinGroup is persisted at once, the initial delay is extended whenever a
rebalance started from Empty, and several members leaving together trigger
one rebalance.  Pure: no I/O, no clock (``now`` is given).
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from collections.abc import Callable, Iterable

import structlog

from kcoord.broker.groups.common import (
    CLASSIC,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    CoordinatorConfig,
    JoinRequest,
    fits_string,
    join_error,
    map_write_error,
    sync_answer,
)
from kcoord.broker.groups.group import Group, GroupState, Member, shared_number
from kcoord.broker.runtime.outcome import Outcome, Write
from kcoord.protocol import group_records as G
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.wire import MAX_STRING_BYTES

log = structlog.get_logger("kcoord.groups")

S = GroupState


class GroupMetadataManager:
    def __init__(self, config: CoordinatorConfig, timers, *,
                 new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
                 refusal: E | None = None):
        self.config = config
        self.timers = timers
        self.refusal = refusal
        self.groups: dict[str, Group] = {}
        self._new_uuid = new_uuid
        # group -> generation whose assignment is being written
        self._assigning: dict[str, int] = {}
        # Called with a group id when a group is forgotten (its offsets go too).
        self.on_forget: Callable[[str], None] | None = None

    def _refusal(self, group_id: str) -> E | None:
        return self.refusal

    def classic(self, group_id: str) -> Group | None:
        """The classic group of that id (the shard's groups also hold consumer groups)."""
        group = self.groups.get(group_id)
        return group if isinstance(group, Group) else None

    def fire(self, key, payload, now: int) -> Outcome | None:
        kind = key[0]
        if kind == "sessions":
            return self._sessions_due(key[1], now)
        if kind == "session":
            return self._pending_member_expired(key[1], key[2], now)
        if kind == "join":
            return self._join_timer(key[1], payload, now)
        return self._pending_sync_expired(key[1], payload, now)  # "sync"

    def install(self, groups: dict[str, Group], now: int) -> Outcome:
        """Take over the groups replayed from the partition's log."""
        out = Outcome()
        for group_id, group in groups.items():
            self.groups[group_id] = group
            for member in group.members.values():
                self.arm_session(group, member, now)
            if len(group.members) > self.config.max_group_size:
                out.merge(self._prepare_rebalance(
                    group, "loaded with more members than group.max.size", now))
        return out

    def adopt(self, group: Group, reason: str | None, now: int) -> Outcome:
        """Take over a classic group made from a consumer group (online
        downgrade): its members' sessions start now, and a rebalance follows
        when ``reason`` says why (GroupMetadataManager.convertToClassicGroup)."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self.arm_session(group, member, now)
        if reason is None:
            return Outcome()
        return self._prepare_rebalance(group, reason, now)

    def _group_record(self, group: Group, assignment=None) -> tuple[bytes, bytes]:
        return (G.group_metadata_key(group.group_id),
                G.group_metadata_value(group.metadata_record(assignment)))

    # == timers =======================================================================

    def arm_session(self, group: Group, member: Member, now: int, timeout: int | None = None):
        """The member's session (re)starts: it ends at ``now`` plus its session
        timeout (or ``timeout``).  A group's members share one timer, armed for
        their earliest deadline: moving a deadline later (a heartbeat) touches
        no timer, and a timer that finds nobody due arms itself for the next."""
        when = now + (member.session_timeout_ms if timeout is None else timeout)
        seq = self.timers.next_seq()
        member.session_deadline = when
        member.session_seq = seq
        key = ("sessions", group.group_id)
        armed = self.timers.deadline(key)
        if armed is None or when < armed:
            self.timers.schedule(key, when, seq=seq)

    def _cancel_session(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is not None:
            member.session_deadline = None
        self.timers.cancel(("session", group.group_id, member_id))  # a pending member's

    def _sessions_due(self, group_id: str, now: int) -> Outcome | None:
        """The group's session timer: the members whose deadlines have passed
        expire, earliest first, as far as no other timer's deadline comes
        before theirs (that one fires first, as it would with a timer per
        member); then the timer is armed for the next deadline."""
        group = self.classic(group_id)
        if group is None or group.state is S.DEAD:
            return None
        due = sorted((m.session_deadline, m.session_seq, m) for m in group.members.values()
                     if m.session_deadline is not None and m.session_deadline <= now)
        out = Outcome()
        for deadline, seq, member in due:
            # Expiring one member may end the join phase, which starts the
            # others' sessions again (or removes them, which ends theirs):
            # only a session still as it was counts.
            if member.session_deadline is None or member.session_seq != seq:
                continue
            following = self.timers.peek()
            if following is not None and following < (deadline, seq):
                break
            member.session_deadline = None
            try:
                out.merge(self._session_expired(group, member, now))
            except Exception:  # as a timer of its own would: the others still expire
                log.exception("group.session_expiry_failed", group_id=group_id,
                              member_id=member.member_id, generation=group.generation)
        self._arm_sessions(group)
        return out

    def _arm_sessions(self, group: Group) -> None:
        key = ("sessions", group.group_id)
        earliest = min(((m.session_deadline, m.session_seq) for m in group.members.values()
                        if m.session_deadline is not None), default=None)
        if earliest is None:
            self.timers.cancel(key)
        else:
            self.timers.schedule(key, earliest[0], seq=earliest[1])

    def _pending_member_expired(self, group_id: str, member_id: str,
                                now: int) -> Outcome | None:
        group = self.classic(group_id)
        if group is None or group.state is S.DEAD or member_id not in group.pending_members:
            return None  # gone, or joined since: a member's session is the group's timer
        group.drop_pending_member(member_id)
        log.info("group.pending_member_expired", group_id=group_id, member_id=member_id,
                 generation=group.generation, state=group.state.value,
                 reason="did not join again with the member id it was given "
                        "within its session timeout")
        if group.state is S.PREPARING_REBALANCE and group.has_all_members_joined():
            return self._complete_join(
                group, now, f"pending member {member_id} expired and every member "
                            "has joined")
        return None

    def _session_expired(self, group: Group, member: Member, now: int) -> Outcome | None:
        group_id, member_id = group.group_id, member.member_id
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
        group.clear_pending_sync()
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
                group, now, f"{reason} and every member has joined" if group.members else reason))
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
        return self._complete_join(group, now, "every member has joined" if group.members
                                   else "no member is left to wait for")

    def _join_timer(self, group_id: str, payload, now: int) -> Outcome | None:
        group = self.classic(group_id)
        if group is None or group.state is not S.PREPARING_REBALANCE:
            return None
        if payload[0] == "initial":
            _, delay, remaining = payload
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                self.timers.schedule(("join", group_id), now + next_delay,
                                     ("initial", next_delay, max(remaining - delay, 0)))
                if next_delay > 0:  # (with no delay, the join phase just ends in a later turn)
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
        group.clear_pending_sync()
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
            self.arm_session(group, member, now)
            member.is_new = False
            group.add_pending_sync(member.member_id)
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
        group = self.classic(group_id)
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
                self.arm_session(group, member, now)

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
        group = self.classic(req.group_id)
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
            group.drop_pending_member(req.member_id)
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
            out.writes.append(Write([record], functools.partial(self._group_created, group)))
        return out

    def _group_created(self, group: Group, error: E, now: int) -> Outcome:
        """A group created by JoinGroup is durable, or its record failed: then Kafka
        reverts the creation, and the group and its parked joins are gone."""
        out = Outcome()
        if error is E.NONE:
            return out
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
        self.forget_group(group)
        return out

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
            group.add_pending_member(member_id)
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
        member.rebalance_timeout_ms = shared_number(req.rebalance_timeout_ms)
        member.session_timeout_ms = shared_number(req.session_timeout_ms)
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
        if member_id in group.pending_members:
            group.drop_pending_member(member_id)
            self.timers.cancel(("session", group.group_id, member_id))
        out = Outcome()
        self._park_join(group, member, ticket, out)
        if group.state is S.PREPARING_REBALANCE:
            why = "new member joins the rebalance in progress; it waits for the join phase"
        else:
            article = "an" if group.state.value[0] in "AEIOU" else "a"
            why = (f"new member of {article} {group.state.value} group: a rebalance starts and "
                   "it waits for the join phase")
        log.info("group.member_joined", group_id=group.group_id, member_id=member_id,
                 group_instance_id=req.group_instance_id, client_id=req.client_id,
                 generation=group.generation, state=group.state.value, reason=why,
                 client_reason=req.reason)
        # A new member cannot heartbeat before its join is answered: it gets the
        # long new-member timeout instead of its session timeout.
        self.arm_session(group, member, now, NEW_MEMBER_JOIN_TIMEOUT_MS)
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
        self.arm_session(group, member, now)
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_protocols(member, list(req.protocols))
        member.rebalance_timeout_ms = shared_number(req.rebalance_timeout_ms)
        member.session_timeout_ms = shared_number(req.session_timeout_ms)
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
            replaced = _StaticReplacement(ticket, req, member, old_id, new_id, old,
                                          current_leader)
            out.writes.append(Write([self._group_record(group)], functools.partial(
                self._static_member_replaced, group, replaced)))
            return out
        if group.state is S.COMPLETING_REBALANCE:
            return out.merge(self._prepare_rebalance(
                group, f"static member {new_id} replaced {old_id} during the sync phase", now))
        return out.merge(self._maybe_complete_join(group, now))

    def _static_member_replaced(self, group: Group, r: "_StaticReplacement", error: E,
                                now: int) -> Outcome:
        """A static member's replacement is durable, or failed: then the old member
        keeps its group.instance.id, as the log has it."""
        result = Outcome()
        member, ticket = r.member, r.ticket
        if member.awaiting_join is not ticket:
            return result
        group.set_awaiting_join(member, None)
        if error is not E.NONE:
            log.warning("group.write_failed", group_id=group.group_id,
                        error=error.name, record="static member replacement",
                        member_id=r.new_id, generation=group.generation,
                        reason=f"the replacement could not be stored: member "
                               f"{r.old_id} keeps group.instance.id "
                               f"{r.req.group_instance_id!r}")
            if group.members.get(r.new_id) is member:
                group.update_protocols(member, r.old[0])
                member.rebalance_timeout_ms, member.session_timeout_ms = r.old[1], r.old[2]
                self._move_member(group, member, r.old_id)
                self._cancel_session(group, r.new_id)
                self.arm_session(group, member, now)
            answer = join_error(map_write_error(error))
            answer.update(generation_id=group.generation,
                          protocol_type=group.protocol_type,
                          protocol_name=group.protocol_name, leader=r.current_leader)
            return result.answer(ticket, answer)
        if r.req.version >= 9:
            is_leader = group.leader_id == r.new_id
            return result.answer(ticket, self._join_success(
                group, r.new_id, self._member_list(group) if is_leader else [],
                skip_assignment=is_leader))
        return result.answer(ticket, self._join_success(group, r.new_id, [],
                                                        leader=r.current_leader))

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
            group.add_pending_sync(new_id)

    # == SyncGroup ======================================================================

    def sync(self, ticket, group_id: str, generation: int, member_id: str,
             instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
             assignments: Iterable[tuple[str, bytes]], now: int) -> Outcome:
        out = Outcome()
        if not group_id:
            return out.answer(ticket, sync_answer(E.INVALID_GROUP_ID))
        if (refusal := self._refusal(group_id)) is not None:
            return out.answer(ticket, sync_answer(refusal))
        group = self.classic(group_id)
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
            self.arm_session(group, member, now)
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

        out.writes.append(Write([self._group_record(group, assignment)], functools.partial(
            self._assignment_written, group, generation, assignment)))
        return out

    def _assignment_written(self, group: Group, generation: int, assignment: dict[str, bytes],
                            error: E, now: int) -> Outcome:
        """The leader's assignment is durable: every member waiting gets its own and
        the group is Stable.  If it failed, the members are told and the group
        rebalances.  Either is moot if the generation moved on meanwhile."""
        result = Outcome()
        group_id = group.group_id
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
                self.arm_session(group, m, now)
        group.transition_to(S.STABLE, now)
        log.info("group.stable", group_id=group_id, generation=group.generation,
                 members=len(group.members), protocol=group.protocol_name,
                 leader=group.leader_id, **_assignment_fields(group),
                 reason="the leader's assignment is durable; every member gets its own")
        return result

    def _sync_received(self, group: Group, member_id: str) -> None:
        group.drop_pending_sync(member_id)
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
        group = self.classic(group_id)
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
        self.arm_session(group, group.members[member_id], now)
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
        group = self.classic(group_id)
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
                group.drop_pending_member(member_id)
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

    def validate_offset_commit(self, group: Group, generation: int, member_id: str,
                               instance_id: str | None, *, transactional: bool = False) -> E:
        """ClassicGroup.validateOffsetCommit; a transactional commit (TxnOffsetCommit)
        is not held back by a rebalance."""
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
        elif group.state is not S.EMPTY and not transactional:
            return E.UNKNOWN_MEMBER_ID
        if group.state is S.COMPLETING_REBALANCE and not transactional:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # == DescribeGroups / ListGroups ======================================================

    def describe(self, group_id: str) -> dict:
        if (refusal := self._refusal(group_id)) is not None:
            return {"error_code": refusal, "group_id": group_id,
                    "group_state": "", "protocol_type": "", "protocol_data": "", "members": []}
        group = self.classic(group_id)
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
            if isinstance(g, Group) and g.state is not S.DEAD and
            (not wanted_states or g.state.value.lower() in wanted_states)]

    def forget_group(self, group: Group) -> None:
        if self.classic(group.group_id) is group:
            del self.groups[group.group_id]
        if self.on_forget is not None:
            self.on_forget(group.group_id)
        for member_id in [*group.members, *group.pending_members]:
            self._cancel_session(group, member_id)
        self.timers.cancel(("join", group.group_id))
        self.timers.cancel(("sync", group.group_id))
        self.timers.cancel(("sessions", group.group_id))

    def unload(self) -> Outcome:
        """The broker stops: parked requests are answered NOT_COORDINATOR, as
        when Kafka unloads a partition, so their clients look elsewhere."""
        out = Outcome()
        for group in self.groups.values():
            if not isinstance(group, Group):
                continue
            for member in group.members.values():
                if member.awaiting_join is not None:
                    out.answer(member.awaiting_join,
                               join_error(E.NOT_COORDINATOR, member.member_id))
                    group.set_awaiting_join(member, None)
                if member.awaiting_sync is not None:
                    out.answer(member.awaiting_sync, sync_answer(E.NOT_COORDINATOR))
                    member.awaiting_sync = None
        return out


@dataclass(slots=True)
class _StaticReplacement:
    """A static member's replacement waiting for its record: what to answer, and
    what to restore if the record fails."""
    ticket: object
    req: JoinRequest
    member: Member
    old_id: str
    new_id: str
    old: tuple  # (protocols, rebalance timeout, session timeout) before the replacement
    current_leader: str | None


LOGGED_ASSIGNMENTS = 100  # members whose assignment group.stable lists


def _assignment_fields(group: Group) -> dict:
    """What ``group.stable`` says of the assignment: each member's partitions
    (``{member: {topic: [partitions]}}``) in a consumer group, each member's
    assignment size in bytes otherwise; a group of more than
    ``LOGGED_ASSIGNMENTS`` members is only counted (DescribeGroups lists it)."""
    if len(group.members) > LOGGED_ASSIGNMENTS:
        return {"assignment_omitted": f"{len(group.members)} members: more than "
                                      f"{LOGGED_ASSIGNMENTS}, see DescribeGroups"}
    if group.protocol_type != "consumer":
        return {"assignment_bytes": {m.member_id: len(m.assignment)
                                     for m in group.members.values()}}
    assignment = {}
    for m in group.members.values():
        try:
            owned = G.consumer_assignment(m.assignment)["assigned_partitions"] \
                if m.assignment else []
        except Exception:  # a client's own encoding: its size is all there is to say
            assignment[m.member_id] = f"{len(m.assignment)} bytes, not the consumer protocol's"
            continue
        assignment[m.member_id] = {t["topic"]: sorted(t["partitions"]) for t in owned}
    return {"assignment": assignment}
