"""Consumer groups of the KIP-848 protocol (Kafka's ``GroupMetadataManager``,
its consumer-group half): ConsumerGroupHeartbeat (join, heartbeat, leave,
static leave), the target assignment computed here by a server-side
assignor, each member's reconciliation towards it (``reconcile``, Kafka's
``CurrentAssignmentBuilder``), session and revocation timeouts, and
ConsumerGroupDescribe, for the groups of one shard.

An operation computes the records Kafka would write and folds them into the
group at once (``ConsumerGroup.apply``, the same fold as a load), so the live
state is always what replaying the log gives; the answer waits until the
records are durable, and a failed write puts the group back as it was.
Pure: no I/O, no clock (``now`` is given); the topics come from
``metadata``, the shard's view of the broker's topics.
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import structlog

from kcoord.broker.groups import assignors
from kcoord.broker.groups import migration
from kcoord.broker.groups.common import (
    CoordinatorConfig,
    JoinRequest,
    join_error,
    map_write_error,
    sync_answer,
)
from kcoord.broker.groups.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
    describe_assignment,
    topic_partitions,
)
from kcoord.broker.groups.reconciliation import (
    FencedMember,
    epochs_of_assigned,
    is_subset,
    reconcile,
    reconcile_reason,
)
from kcoord.broker.groups.subscriptions import (  # noqa: F401 (StaticImage, the hashes: re-exported)
    TOPIC_HASHES,
    InvalidRegex,
    StaticImage,
    TopicImage,
    check_regex,
    compiled_regex,
    group_hash,
    topic_hash,
)
from kcoord.broker.groups.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from kcoord.broker.runtime.outcome import Outcome, Write
from kcoord.protocol import group_records as G
from kcoord.protocol.errors import ErrorCode as E

log = structlog.get_logger("kcoord.groups")

CS = ConsumerGroupState
_REGEX_SAME, _REGEX_UPDATED, _REGEX_RESOLVED = 0, 1, 2
_REGEX_MIN_REFRESH_MS = 10_000  # GroupMetadataManager: at most one refresh per 10 s
_REGEX_REFRESH_MS = 600_000  # group.consumer.regex.refresh.interval.ms


class _Pending:
    """A write of a group not yet durable: its records, what undoes them, and the
    empty classic group it took over, if any."""

    __slots__ = ("records", "undo", "replaced")

    def __init__(self, records: list, undo: list, replaced):
        self.records = records
        self.undo = undo
        self.replaced = replaced


class HeartbeatError(Exception):
    """A ConsumerGroupHeartbeat refused with an error code and Kafka's message."""

    def __init__(self, code: E, message: str | None = None):
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: list[dict] | None = None  # [{"topic_id", "partitions"}] or None: unchanged
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    # The topics among those given that the member may DESCRIBE (an authorizer's
    # answer for the request's principal and host); None: every topic.
    describable: Callable[[Iterable[str]], set[str]] | None = None


def heartbeat_error(code: E, message: str | None = None) -> dict:
    return {"error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


class ConsumerGroupManager:
    def __init__(self, config: CoordinatorConfig, timers, groups: dict, *,
                 new_member_id: Callable[[], str] | None = None,
                 refusal: E | None = None):
        self.config = config
        self.timers = timers
        # Every group of the shard, classic and consumer, by id (one namespace,
        # as Kafka's GroupMetadataManager.groups); this manager owns the
        # ConsumerGroup entries.
        self.groups = groups
        self.refusal = refusal
        self._resolutions: dict[str, tuple[int, frozenset[str]]] = {}
        self.metadata: TopicImage = StaticImage()
        self._new_member_id = new_member_id or _new_member_id
        # Called with a group id when a group is deleted (its offsets go too).
        self.on_forget: Callable[[str], None] | None = None
        # Takes over a classic group made from a consumer group (online
        # downgrade): ``adopt(group, rebalance reason or None, now) -> Outcome``
        # (GroupMetadataManager.adopt, set by the shard).
        self.adopt: Callable[[Group, str | None, int], Outcome] | None = None
        # how many leading records of the operation in progress are already
        # folded into its group (a classic group's conversion, ``_upgrade``)
        self._prefolded = 0

    @property
    def metadata(self) -> TopicImage:
        """The broker's topics as the groups see them (Kafka's metadata image)."""
        return self._metadata

    @metadata.setter
    def metadata(self, image: TopicImage) -> None:
        self._metadata = image
        # regular expression -> (metadata version, the topic names it matched)
        self._resolutions = {}

    def group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    # == ConsumerGroupHeartbeat ==========================================================

    def heartbeat(self, ticket, req: HeartbeatRequest, now: int) -> Outcome:
        out = Outcome()
        try:
            self._validate(req)
            if self.refusal is not None:
                raise HeartbeatError(self.refusal)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(ticket, req, now)
            group, records, answer = self._heartbeat(req, now)
            return self._write(out, ticket, group, records, answer)
        except HeartbeatError as error:
            return out.answer(ticket, heartbeat_error(error.code, error.message))
        finally:
            # the records a classic group's conversion folded in at once belong
            # to this operation only, written or not
            self._prefolded = 0

    def _write(self, out: Outcome, ticket, group: ConsumerGroup, records: list,
               answer, on_durable: Callable[[int], None] | None = None,
               error_answer: Callable[[E], dict] | None = None, now: int = 0) -> Outcome:
        """Fold ``records`` into the group now and answer once they are durable
        (``on_durable`` runs then).

        A failed write is undone, and so is every later write of the group
        still in flight, whose records are then folded in again on top (Kafka
        reverts to the last committed state): the group is always what the
        log holds plus what is being written."""
        prefolded, self._prefolded = self._prefolded, 0
        if not records:
            if on_durable is not None:
                on_durable(now)
            return out.answer(ticket, answer)
        before = self.groups.get(group.group_id)
        replaced = before if before is not group else None  # a classic group it takes over
        self.groups[group.group_id] = group
        if isinstance(replaced, Group) and replaced.members:
            _release_parked(replaced, out)
        folded, encoded = [], []
        for i, (kind, member_id, value) in enumerate(records):
            if kind == G.GROUP_METADATA:  # a classic group gives way
                encoded.append((G.group_metadata_key(group.group_id), None))
                continue
            if i >= prefolded:
                folded.append((kind, {"member_id": member_id,
                                      "regular_expression": member_id}, value))
            encoded.append(_record(group.group_id, kind, member_id, value))
        pending = _Pending(folded, [group.apply_undoable(*r) for r in folded], replaced)
        group.pending.append(pending)
        if group.dead:
            self.forget(group)

        def done(error: E, now: int) -> Outcome:
            if error is E.NONE:
                if pending in group.pending:
                    group.pending.remove(pending)
                if on_durable is not None:
                    on_durable(now)
                return Outcome().answer(ticket, answer)
            self._undo(group, pending, error, now)
            code = map_write_error(error)
            return Outcome().answer(ticket, error_answer(code) if error_answer is not None
                                    else heartbeat_error(code))

        out.writes.append(Write(encoded, done))
        return out

    def _undo(self, group: ConsumerGroup, failed: "_Pending", error: E, now: int) -> None:
        log.warning("consumer_group.write_failed", group_id=group.group_id, error=error.name,
                    reason="the group's records could not be written; it is back to what "
                           "the log holds")
        if failed not in group.pending:
            return
        if failed.replaced is not None:
            # the write that took the group over from a classic group: every
            # later one builds on it, and the classic group is back as it was,
            # its members' sessions from now
            group.pending.clear()
            self.forget(group)
            if self.adopt is not None:
                self.adopt(failed.replaced, None, now)
            else:
                self.groups[group.group_id] = failed.replaced
            return
        at = group.pending.index(failed)
        later = group.pending[at + 1:]
        for p in reversed(later):
            group.undo(p.undo)
        group.undo(failed.undo)
        del group.pending[at]
        for p in later:
            p.undo = [group.apply_undoable(*r) for r in p.records]
        group.metadata_seen = None  # looked at again at the next heartbeat
        if not group.pending and not group.members and group.group_epoch == 1 and \
                self.groups.get(group.group_id) is group:
            # the group's first write: it never was
            del self.groups[group.group_id]
        elif not group.dead and group.group_id not in self.groups:
            self.groups[group.group_id] = group
        # timers cancelled or armed for what was undone follow the group as it is
        self._arm_members(group, now)

    def _arm_members(self, group: ConsumerGroup, now: int, loaded: bool = False) -> None:
        """The session timer of every member, and the revocation timer of those
        that must revoke (after a load or an undone write).  After a load every
        member gets the group's session timeout and, if it must revoke, its
        revocation timer, whichever protocol it speaks, as Kafka's onLoaded
        arms them."""
        for member_id, member in group.members.items():
            self._arm_session(group.group_id, member_id, now, None if loaded else member)
            if member.state is MemberState.UNREVOKED_PARTITIONS and \
                    (loaded or not member.uses_classic):
                self.timers.schedule(("cg-revoke", group.group_id, member_id),
                                     now + max(member.rebalance_timeout_ms, 0),
                                     member.member_epoch)

    def _validate(self, req: HeartbeatRequest) -> None:
        """GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        def invalid(message: str):
            raise HeartbeatError(E.INVALID_REQUEST, message)

        epoch = req.member_epoch
        if (req.version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and \
                _blank(req.member_id):
            invalid("MemberId can't be empty.")
        if _blank(req.group_id):
            invalid("GroupId can't be empty.")
        if _blank(req.instance_id):
            invalid("InstanceId can't be empty.")
        if _blank(req.rack_id):
            invalid("RackId can't be empty.")
        if epoch == 0:
            if req.rebalance_timeout_ms == -1:
                invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                        "when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            invalid("MemberEpoch is invalid.")
        names = self.config.consumer_assignors
        if req.server_assignor is not None and req.server_assignor not in names:
            raise HeartbeatError(
                E.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(_java_hash_order(names))}.")

    # -- join / heartbeat ------------------------------------------------------------------

    def _get_group(self, group_id: str, create: bool, records: list,
                   now: int) -> ConsumerGroup:
        """GroupMetadataManager.getOrMaybeCreateConsumerGroup."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id)
        if isinstance(group, ConsumerGroup):
            return group
        if create and group.state in (GroupState.EMPTY, GroupState.DEAD):
            # An empty classic group (committed offsets only, or left by all its
            # members) gives way; its offsets stay (maybeDeleteEmptyClassicGroup).
            records.append((G.GROUP_METADATA, None, None))
            log.info("group.converted", group_id=group_id, reason="a consumer-protocol "
                     "member joins the empty classic group: it becomes a consumer group")
            return ConsumerGroup(group_id)
        if create:
            return self._upgrade(group, records, now)
        raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _upgrade(self, classic: Group, records: list, now: int) -> ConsumerGroup:
        """A consumer-protocol member joins a running classic group: the group
        becomes a consumer group whose members are the classic ones, each with
        what it owns (GroupMetadataManager.convertToConsumerGroup); its records
        are folded in at once, for the join to go on from there."""
        gid = classic.group_id
        why = None
        if not self.config.upgrade_enabled:
            why = "online upgrade is disabled"
        elif classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            why = "the group does not use the consumer embedded protocol"
        elif len(classic.members) > self.config.consumer_max_size:
            why = "the group size exceeds the consumer group maximum size"
        if why is not None:
            log.info("group.upgrade_refused", group_id=gid, reason=why)
            raise HeartbeatError(
                E.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {gid} to consumer group because {why}.")
        try:
            members = migration.consumer_members_of(classic, self.metadata)
        except migration.MigrationRefused as error:
            log.warning("group.upgrade_refused", group_id=gid, reason=str(error))
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, str(error)) from None
        except migration.MigrationFailed as error:  # Kafka's conversion throws
            log.error("group.upgrade_failed", group_id=gid, reason=str(error))
            raise HeartbeatError(E.UNKNOWN_SERVER_ERROR) from None
        names = set()
        for m in members:
            names.update(m.subscribed_topic_names)
        converted = migration.upgrade_records(classic, members, self._metadata_hash(names))
        group = ConsumerGroup(gid)
        for kind, member_id, value in converted[1:]:
            group.apply(kind, {"member_id": member_id}, value)
        group.metadata_seen = self.metadata.version
        records.extend(converted)
        self._prefolded = len(converted)
        for member in members:
            self._arm_session(gid, member.member_id, now, member)
        log.info("group.converted", group_id=gid, generation=classic.generation,
                 members=len(members), to="consumer",
                 reason="a consumer-protocol member joins the running classic group "
                        "(online upgrade)")
        return group

    def _heartbeat(self, req: HeartbeatRequest, now: int):
        """GroupMetadataManager.consumerGroupHeartbeat (join or heartbeat)."""
        create = req.member_epoch == 0
        records: list[tuple[str, str | None, dict | None]] = []
        group = self._get_group(req.group_id, create, records, now)
        if len(group.members) >= self.config.consumer_max_size and \
                group.static_member(req.instance_id) is None and \
                (not req.member_id or req.member_id not in group.members):
            raise HeartbeatError(
                E.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config.consumer_max_size} members.")
        member_id = req.member_id or self._new_member_id()
        replaced = None  # a static member's previous incarnation, replaced by records
        if req.instance_id is None:
            member = self._dynamic_member(group, member_id, req, create)
        else:
            member, replaced = self._static_member(group, member_id, req, create, records)
        updated = member.with_(
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None
            else member.server_assignor,
            subscribed_topic_names=tuple(sorted(set(req.subscribed_topic_names)))
            if req.subscribed_topic_names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex
            if req.subscribed_topic_regex is not None else member.subscribed_topic_regex,
            client_id=req.client_id, client_host=req.client_host, classic=None)
        reconciled = self._advance(group, member, replaced, updated, req.owned, records, now,
                                   describable=req.describable)
        self._arm_session(group.group_id, member_id, now)
        answer = {"error_code": E.NONE, "error_message": None, "member_id": member_id,
                  "member_epoch": reconciled.member_epoch,
                  "heartbeat_interval_ms": self.config.heartbeat_interval_ms(group.group_id),
                  "assignment": None}
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1 and req.owned is not None and
            (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        if full or reconciled.assigned != member.assigned or \
                epochs_of_assigned(reconciled) != epochs_of_assigned(member):
            answer["assignment"] = {"topic_partitions": topic_partitions(reconciled.assigned)}
        return group, records, answer

    def _advance(self, group: ConsumerGroup, member: ConsumerMember,
                 replaced: ConsumerMember | None, updated: ConsumerMember, owned,
                 records: list, now: int, *,
                 describable: Callable[[Iterable[str]], set[str]] | None = None,
                 ) -> ConsumerMember:
        """What every join or heartbeat does once the member is known, whichever
        protocol it speaks: its metadata record, the group epoch bumped when the
        subscriptions or the topics changed, the target assignment recomputed
        when the epoch is ahead of it, and the member reconciled towards its
        target (``owned``: the partitions it says it owns, None: unchanged;
        ``describable``: the member's topic rights, for a regular expression).
        Returns the member as reconciled."""
        member_id = updated.member_id
        counted = replaced or member  # whose subscription the group counts today
        if not updated.same_metadata(member) or \
                (member_id not in group.members and replaced is None):
            records.append((G.CONSUMER_GROUP_MEMBER_METADATA, member_id,
                            updated.metadata_record()))
        names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        regex_status = self._update_regex(group, member, updated, records, now, describable)
        assignor_changed = counted.server_assignor != updated.server_assignor and \
            self._preferred_assignor(group, None, None) != \
            self._preferred_assignor(group, counted, updated)
        subscription_changed = names_changed or regex_status != _REGEX_SAME
        bump = names_changed or regex_status == _REGEX_RESOLVED or assignor_changed or \
            (updated.uses_classic and regex_status != _REGEX_SAME)
        group_epoch = group.group_epoch
        subscribed: set[str] | None = None
        if bump or group.metadata_seen != self.metadata.version:
            subscribed = self._subscribed_names(group, counted, updated)
            metadata_hash = self._metadata_hash(subscribed)
            if metadata_hash != group.metadata_hash:
                bump = True
            if bump:
                group_epoch += 1
                records.append((G.CONSUMER_GROUP_METADATA, None,
                                {"epoch": group_epoch, "metadata_hash": metadata_hash}))
                log.info("consumer_group.epoch_bumped", group_id=group.group_id,
                         group_epoch=group_epoch, member_id=member_id,
                         reason=self._bump_reason(group, member, updated,
                                                  subscription_changed, assignor_changed))
            if group.has_partition_metadata_record:
                records.append((G.CONSUMER_GROUP_PARTITION_METADATA, None, None))
            group.metadata_seen = self.metadata.version
        if group_epoch > group.assignment_epoch and self._may_assign(group, now):
            if subscribed is None:
                subscribed = self._subscribed_names(group, counted, updated)
            target = self._update_target(group, group_epoch, counted, updated, subscribed,
                                         records, now)
            target_epoch = group_epoch
        else:
            target_epoch = group.assignment_epoch
            target = self._target_of(group, updated)
        return self._maybe_reconcile(group, updated, target_epoch, target, owned,
                                     subscription_changed, records, now)

    # -- regular expressions (KIP-848 v1) ------------------------------------------------

    def _update_regex(self, group: ConsumerGroup, member: ConsumerMember,
                      updated: ConsumerMember, records: list, now: int,
                      describable: Callable[[Iterable[str]], set[str]] | None) -> int:
        """GroupMetadataManager.maybeUpdateRegularExpressions: a new expression is
        checked, a resolution no member needs any more is tombstoned, and a
        resolution is asked for when one is missing or may be out of date; it is
        made as Kafka makes it, after the answer (a timer at once,
        ``_resolve_regexes``)."""
        old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
        status, require = _REGEX_SAME, False
        counts = dict(group.regex_counts)
        if old != new:
            status = _REGEX_UPDATED
            if old and counts.get(old, 0) == 1 and member.member_id in group.members:
                records.append((G.CONSUMER_GROUP_REGULAR_EXPRESSION, old, None))
            if new:
                if counts.get(new, 0) == 0:
                    try:
                        check_regex(new)
                    except InvalidRegex as error:
                        raise HeartbeatError(E.INVALID_REGULAR_EXPRESSION, str(error)) from None
                    require = True
                elif new in group.resolved:
                    status = _REGEX_RESOLVED
            elif old:
                status = _REGEX_RESOLVED
            if old and member.member_id in group.members:
                counts[old] = counts.get(old, 0) - 1
            if new:
                counts[new] = counts.get(new, 0) + 1
        subscribed = {r for r, n in counts.items() if n > 0}
        if not require and not subscribed:
            return status
        key = ("cg-regex", group.group_id)
        last = max((t for _topics, _v, t in group.resolved.values()), default=None)
        if key in self.timers or (last is not None and now <= last + _REGEX_MIN_REFRESH_MS):
            return status
        version = min((v for _topics, v, _t in group.resolved.values()), default=-1)
        require = require or len(subscribed) != len(group.resolved) or \
            version < getattr(self.metadata, "created_version", 0) or \
            (last is not None and now > last + _REGEX_REFRESH_MS)
        if require:
            # resolved with the rights of the member whose heartbeat asked for it,
            # as Kafka resolves with that request's context
            self.timers.schedule(key, now, describable)
        return status

    def _resolve_regexes(self, group: ConsumerGroup, now: int,
                         describable: Callable[[Iterable[str]], set[str]] | None = None,
                         ) -> Outcome | None:
        """GroupMetadataManager.handleRegularExpressionsResult: every expression the
        members use, matched against every topic name and kept to the topics the
        asking member may DESCRIBE (TopicRegexResolver); a changed resolution or
        metadata hash moves the group's epoch on."""
        records: list = []
        bump = False
        resolved = dict(group.resolved)
        version = self.metadata.version
        for regex in sorted(group.regex_counts):
            topics = self._matching(regex, version)
            if describable is not None and topics:
                topics = frozenset(describable(topics))
            previous = resolved.get(regex)
            if previous is None or previous[0] != topics:
                bump = True
            resolved[regex] = (topics, version, now)
            records.append((G.CONSUMER_GROUP_REGULAR_EXPRESSION, regex,
                            {"topics": sorted(topics), "version": version, "timestamp": now}))
            log.info("consumer_group.regex_resolved", group_id=group.group_id, regex=regex,
                     topics=sorted(topics)[:100], matched=len(topics),
                     reason="a member subscribes to it")
        if not records:
            return None
        subscribed = set(group.subscribed_names)
        for regex in group.regex_counts:
            subscribed |= resolved[regex][0]
        metadata_hash = self._metadata_hash(subscribed)
        if bump or metadata_hash != group.metadata_hash:
            epoch = group.group_epoch + 1
            records.append((G.CONSUMER_GROUP_METADATA, None,
                            {"epoch": epoch, "metadata_hash": metadata_hash}))
            log.info("consumer_group.epoch_bumped", group_id=group.group_id,
                     group_epoch=epoch, reason="a regular expression's topics changed")
        return self._write(Outcome(), None, group, records, None)

    def _matching(self, regex: str, version: int) -> frozenset[str]:
        """The topic names an expression matches, computed once per expression and
        metadata version for every group of the shard: many groups subscribing
        with one expression cost one pass over the topics, not one each."""
        cached = self._resolutions.get(regex)
        if cached is not None and cached[0] == version:
            return cached[1]
        pattern = compiled_regex(regex)
        topics = frozenset(n for n in self.metadata.topic_names()
                           if pattern is not None and pattern.fullmatch(n))
        if len(self._resolutions) >= 10_000:
            self._resolutions.clear()
        self._resolutions[regex] = (version, topics)
        return topics

    def _may_assign(self, group: ConsumerGroup, now: int) -> bool:
        """The target is recomputed at most once per
        ``group.consumer.assignment.interval.ms`` (Kafka 4.4, KIP-1263): until
        then the group stays Assigning and a later heartbeat computes it."""
        interval = self.config.assignment_interval_ms(group.group_id)
        return group.assignment_timestamp == 0 or interval == 0 or \
            now >= group.assignment_timestamp + interval

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest,
                        create: bool) -> ConsumerMember:
        member = group.members.get(member_id)
        if member is None:
            if not create:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group "
                                     f"{group.group_id}.")
            log.info("consumer_group.member_joined", group_id=group.group_id,
                     member_id=member_id, reason="ConsumerGroupHeartbeat with epoch 0")
            return ConsumerMember(member_id)
        self._check_epoch(member, req)
        return member

    def _static_member(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest,
                       create: bool, records: list, classic: bool = False
                       ) -> tuple[ConsumerMember, ConsumerMember | None]:
        existing = group.static_member(req.instance_id)
        if create:
            if existing is None:
                log.info("consumer_group.member_joined", group_id=group.group_id,
                         member_id=member_id, instance_id=req.instance_id,
                         reason="ConsumerGroupHeartbeat with epoch 0 (static member)")
                return group.members.get(member_id) or ConsumerMember(member_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not classic and \
                    not existing.uses_classic:
                raise HeartbeatError(
                    E.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {req.instance_id} cannot "
                    f"join the group because the instance id is owned by "
                    f"{existing.member_id} member.")
            new = existing.with_(member_id=member_id, member_epoch=0, previous_member_epoch=0,
                                 pending_revocation={},
                                 epochs={k: 0 for k in existing.epochs
                                         if k[1] in existing.assigned.get(k[0], ())})
            self._replace_member(group, existing, new, records)
            log.info("consumer_group.member_joined", group_id=group.group_id,
                     member_id=member_id, instance_id=req.instance_id,
                     replaced=existing.member_id,
                     reason="a static member came back with its instance id")
            return new, existing
        if existing is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID,
                                 f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise HeartbeatError(
                E.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {req.instance_id} was fenced "
                f"by member {existing.member_id}.")
        if not classic:
            self._check_epoch(existing, req)
        return existing, None

    @staticmethod
    def _check_epoch(member: ConsumerMember, req: HeartbeatRequest) -> None:
        """GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid: a join
        (epoch 0) is always accepted; otherwise the member's epoch, or its previous
        one with a subset of its partitions (the answer it lost)."""
        received = req.member_epoch
        if received == 0:
            return
        if received > member.member_epoch:
            raise HeartbeatError(
                E.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member must "
                f"abandon all its partitions and rejoin.")
        if received < member.member_epoch:
            if received != member.previous_member_epoch or \
                    not is_subset(req.owned, member.assigned):
                raise HeartbeatError(
                    E.FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a smaller member epoch ({received}) than "
                    f"the one known by the group coordinator ({member.member_epoch}). The "
                    f"member must abandon all its partitions and rejoin.")

    def _replace_member(self, group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember,
                        records: list) -> None:
        """A static member's new incarnation takes over the old one's target and
        current assignment (GroupMetadataManager.replaceMember)."""
        self._remove_member_records(old.member_id, records)
        records.append((G.CONSUMER_GROUP_MEMBER_METADATA, new.member_id,
                        new.metadata_record()))
        records.append((G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, new.member_id,
                        {"topic_partitions": topic_partitions(
                            group.target.get(old.member_id, {}))}))
        records.append((G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, new.member_id,
                        new.assignment_record()))
        # the old incarnation's timers stay: if this write fails it is back, and
        # if it does not, they find no member when they fire

    @staticmethod
    def _remove_member_records(member_id: str, records: list) -> None:
        records.append((G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, member_id, None))
        records.append((G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, member_id, None))
        records.append((G.CONSUMER_GROUP_MEMBER_METADATA, member_id, None))

    # -- subscriptions and the target assignment --------------------------------------------

    @staticmethod
    def _subscribed_names(group: ConsumerGroup, old: ConsumerMember | None,
                          new: ConsumerMember | None) -> set[str]:
        """The topic names the group subscribes to once ``old`` becomes ``new``, by
        name or by a resolved regular expression
        (ConsumerGroup.computeSubscribedTopicNames)."""
        counts = dict(group.subscribed_names)
        regexes = dict(group.regex_counts)
        if old is not None and old.member_id in group.members:
            for name in old.subscribed_topic_names:
                counts[name] -= 1
            if old.subscribed_topic_regex:
                regexes[old.subscribed_topic_regex] -= 1
        if new is not None:
            for name in new.subscribed_topic_names:
                counts[name] = counts.get(name, 0) + 1
            if new.subscribed_topic_regex:
                regexes[new.subscribed_topic_regex] = \
                    regexes.get(new.subscribed_topic_regex, 0) + 1
        names = {name for name, n in counts.items() if n > 0}
        for regex, n in regexes.items():
            if n > 0 and regex in group.resolved:
                names |= group.resolved[regex][0]
        return names

    def _metadata_hash(self, names: set[str]) -> int:
        """Kafka 4.4's hash of the subscribed topics (KIP-1101,
        ``Utils.computeGroupHash`` over ``Utils.computeTopicHash``): it changes
        when one of them is created, deleted, recreated or grows, and the
        group's epoch is bumped then."""
        hashes = {}
        for name in names:
            found = self.metadata.lookup(name)
            if found is not None:
                key = (name, found[0], found[1])
                cached = TOPIC_HASHES.get(key)
                if cached is None:
                    if len(TOPIC_HASHES) >= 10_000:
                        TOPIC_HASHES.clear()
                    cached = TOPIC_HASHES[key] = topic_hash(found[0], name, found[1])
                hashes[name] = cached
        return group_hash(hashes)

    @staticmethod
    def _bump_reason(group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember,
                     names_changed: bool, assignor_changed: bool) -> str:
        if old.member_id not in group.members:
            return "a member joined"
        if names_changed:
            return f"the member now subscribes to {list(new.subscribed_topic_names)}"
        if assignor_changed:
            return f"the group's preferred assignor is now {new.server_assignor}"
        return "the subscribed topics' metadata changed"

    def _preferred_assignor(self, group: ConsumerGroup, old: ConsumerMember | None,
                            new: ConsumerMember | None) -> str:
        """The server assignor most members ask for once ``old`` becomes ``new``;
        the first configured one if none asks
        (ModernGroup.computePreferredServerAssignor)."""
        counts = group.assignor_counts
        if (old is not None and old.member_id in group.members and old.server_assignor) or \
                (new is not None and new.server_assignor):
            counts = Counter(counts)
            if old is not None and old.member_id in group.members and old.server_assignor:
                counts[old.server_assignor] -= 1
            if new is not None and new.server_assignor:
                counts[new.server_assignor] += 1
        best = max(((n, name) for name, n in counts.items() if n > 0), default=None)
        return best[1] if best is not None else self.config.consumer_assignors[0]

    def _topics(self, names: set[str]) -> dict[uuid.UUID, tuple[str, int]]:
        topics = {}
        for name in names:
            found = self.metadata.lookup(name)
            if found is not None:
                topics[found[0]] = (name, found[1])
        return topics

    def _update_target(self, group: ConsumerGroup, group_epoch: int, member: ConsumerMember,
                       updated: ConsumerMember, subscribed: set[str], records: list,
                       now: int) -> Assignment:
        """The assignor's new target for the whole group, its changes written as
        records (TargetAssignmentBuilder.build); returns ``updated``'s target."""
        members = dict(group.members)
        targets = dict(group.target)
        previous = group.static_members.get(updated.instance_id) \
            if updated.instance_id is not None else None
        if previous is not None and previous != updated.member_id:
            # a static member's new incarnation takes over the old one's target
            members.pop(previous, None)
            targets.setdefault(updated.member_id, targets.pop(previous, {}))
        members[updated.member_id] = updated
        topics = self._topics(subscribed)
        name_to_id = {name: topic_id for topic_id, (name, _n) in topics.items()}
        specs = {
            member_id: assignors.MemberSpec(
                subscribed=frozenset(name_to_id[n] for n in group.topics_of(m)
                                     if n in name_to_id),
                assigned=targets.get(member_id, {}), instance_id=m.instance_id,
                rack_id=m.rack_id)
            for member_id, m in members.items()}
        # Homogeneous when every member subscribes to the same names, existing
        # or not (ConsumerGroup.subscriptionType): the assignor's builder differs.
        named = {m.subscribed_topic_names for m in members.values()}
        patterns = {m.subscribed_topic_regex for m in members.values()}
        homogeneous = patterns == {""} and len(named) <= 1 or \
            len(patterns) == 1 and "" not in patterns and named == {()}
        assignor = self._preferred_assignor(group, member, updated)
        try:
            result = assignors.assign(assignor, specs, topics, homogeneous=homogeneous)
        except assignors.PartitionAssignorError as error:
            log.error("consumer_group.assignment_failed", group_id=group.group_id,
                      group_epoch=group_epoch, assignor=assignor, error=str(error))
            raise HeartbeatError(E.UNKNOWN_SERVER_ERROR) from None
        for member_id in specs:
            new = {t: frozenset(p) for t, p in result.get(member_id, {}).items() if p}
            if targets.get(member_id) != new:
                records.append((G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, member_id,
                                {"topic_partitions": topic_partitions(new)}))
        records.append((G.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, None,
                        {"assignment_epoch": group_epoch, "assignment_timestamp": now}))
        log.info("consumer_group.target_assignment", group_id=group.group_id,
                 group_epoch=group_epoch, assignor=assignor, members=len(specs),
                 **self._assignment_field(result),
                 reason="the group epoch is ahead of the target assignment")
        return {t: frozenset(p) for t, p in result.get(updated.member_id, {}).items() if p}

    def _assignment_field(self, result: Mapping[str, Mapping[uuid.UUID, frozenset]]) -> dict:
        if len(result) > 100:
            return {"assignment_omitted": f"{len(result)} members: see ConsumerGroupDescribe"}
        names = {}
        for assignment in result.values():
            for topic_id in assignment:
                if topic_id not in names:
                    names[topic_id] = self.metadata.name_of(topic_id) or str(topic_id)
        return {"assignment": {m: describe_assignment(a, names) for m, a in result.items()}}

    @staticmethod
    def _target_of(group: ConsumerGroup, member: ConsumerMember) -> Assignment:
        target = group.target.get(member.member_id)
        if target is None and member.instance_id is not None:
            previous = group.static_members.get(member.instance_id)
            if previous is not None:
                target = group.target.get(previous)
        return target or {}

    # -- reconciliation (CurrentAssignmentBuilder) -----------------------------------------

    def _maybe_reconcile(self, group: ConsumerGroup, member: ConsumerMember, target_epoch: int,
                         target: Assignment, owned: list[dict] | None,
                         subscription_changed: bool, records: list, now: int) -> ConsumerMember:
        """GroupMetadataManager.maybeReconcile."""
        if not subscription_changed and member.state is MemberState.STABLE and \
                member.member_epoch == target_epoch:
            return member  # ConsumerGroupMember.isReconciledTo
        subscribed = self._topic_ids(group.topics_of(member))
        try:
            updated = reconcile(member, target_epoch, target, subscribed,
                                group.partition_epoch, owned, subscription_changed)
        except FencedMember as error:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, str(error)) from None
        if updated.same_assignment(member):
            return member
        records.append((G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, member.member_id,
                        updated.assignment_record()))
        names = {}
        for assignment in (updated.assigned, updated.pending_revocation):
            for topic_id in assignment:
                names[topic_id] = self.metadata.name_of(topic_id) or str(topic_id)
        log.info("consumer_group.member_reconciled", group_id=group.group_id,
                 member_id=member.member_id, member_epoch=updated.member_epoch,
                 previous_member_epoch=updated.previous_member_epoch,
                 state=updated.state.name,
                 assigned=describe_assignment(updated.assigned, names),
                 pending_revocation=describe_assignment(updated.pending_revocation, names),
                 reason=reconcile_reason(updated))
        if updated.uses_classic:
            pass  # a classic member revokes by joining again (the join timeout)
        elif updated.state is MemberState.UNREVOKED_PARTITIONS:
            self.timers.schedule(("cg-revoke", group.group_id, member.member_id),
                                 now + max(updated.rebalance_timeout_ms, 0),
                                 updated.member_epoch)
        else:
            self.timers.cancel(("cg-revoke", group.group_id, member.member_id))
        return updated

    def _topic_ids(self, names) -> frozenset[uuid.UUID]:
        ids = []
        for name in names:
            found = self.metadata.lookup(name)
            if found is not None:
                ids.append(found[0])
        return frozenset(ids)

    # -- leaving and fencing -----------------------------------------------------------------

    def _leave(self, ticket, req: HeartbeatRequest, now: int) -> Outcome:
        """GroupMetadataManager.consumerGroupLeave (epoch -1, or -2 for a static
        member that will come back)."""
        group = self.groups.get(req.group_id)
        if group is None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        if not isinstance(group, ConsumerGroup):
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND,
                                 f"Group {req.group_id} is not a consumer group.")
        answer = {"error_code": E.NONE, "error_message": None, "member_id": req.member_id,
                  "member_epoch": req.member_epoch, "heartbeat_interval_ms": 0,
                  "assignment": None}
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID,
                                     f"Member {req.member_id} is not a member of group "
                                     f"{group.group_id}.")
            return self._fence(group, [member], "the member left the group", now,
                               ticket, answer)
        member = group.static_member(req.instance_id)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise HeartbeatError(
                E.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced "
                f"by member {member.member_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            leaving = member.with_(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                   pending_revocation={},
                                   epochs={k: 0 for k in member.epochs
                                           if k[1] in member.assigned.get(k[0], ())})
            log.info("consumer_group.static_member_left", group_id=group.group_id,
                     member_id=member.member_id, instance_id=req.instance_id,
                     reason="epoch -2: it keeps its assignment until its session expires "
                            "or it comes back")
            answer["member_epoch"] = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            answer["member_id"] = member.member_id
            return self._write(Outcome(), ticket, group,
                               [(G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, member.member_id,
                                 leaving.assignment_record())], answer)
        return self._fence(group, [member], "the static member left the group", now,
                           ticket, answer)

    def _fence(self, group: ConsumerGroup, members: list[ConsumerMember], reason: str,
               now: int, ticket=None, answer=None,
               error_answer: Callable[[E], dict] | None = None) -> Outcome:
        """The members' records go and the group's epoch moves on
        (GroupMetadataManager.consumerGroupFenceMembers); if every member left
        speaks the classic protocol, the group becomes a classic group again
        instead (online downgrade)."""
        remaining = len(group.members) - len(members)
        if remaining > 0 and group.all_classic_except(members):
            if not self.config.downgrade_enabled:
                log.info("group.downgrade_refused", group_id=group.group_id,
                         reason="the online downgrade is disabled")
            elif remaining > self.config.max_group_size:
                log.info("group.downgrade_refused", group_id=group.group_id,
                         reason="its size is greater than the classic group max size")
            else:
                return self._downgrade(
                    group, {m.member_id for m in members}, None,
                    f"Downgrade group {group.group_id} from consumer to classic for member "
                    f"leaving.", now, ticket, answer, error_answer)
        records: list = []
        for member in members:
            self._remove_member_records(member.member_id, records)
        counts = Counter(m.subscribed_topic_regex for m in members if m.subscribed_topic_regex)
        for regex, n in counts.items():
            if group.regex_counts.get(regex, 0) == n and regex in group.resolved:
                records.append((G.CONSUMER_GROUP_REGULAR_EXPRESSION, regex, None))
        counts = Counter(group.subscribed_names)
        regexes = Counter(group.regex_counts)
        for m in members:
            counts.subtract(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                regexes[m.subscribed_topic_regex] -= 1
        subscribed = {name for name, n in counts.items() if n > 0}
        for regex, n in regexes.items():
            if n > 0 and regex in group.resolved:
                subscribed |= group.resolved[regex][0]
        epoch = group.group_epoch + 1
        records.append((G.CONSUMER_GROUP_METADATA, None,
                        {"epoch": epoch, "metadata_hash": self._metadata_hash(subscribed)}))
        if remaining == 0:  # the last ones: the group is Empty
            records.append((G.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, None,
                            {"assignment_epoch": epoch, "assignment_timestamp": 0}))
        for member in members:
            self._cancel_timers(group.group_id, member.member_id)
            log.info("consumer_group.member_removed", group_id=group.group_id,
                     member_id=member.member_id, instance_id=member.instance_id,
                     member_epoch=member.member_epoch, group_epoch=epoch, reason=reason)
        return self._write(Outcome(), ticket, group, records, answer,
                           error_answer=error_answer)

    def _downgrade(self, group: ConsumerGroup, leaving: set[str],
                   joining: ConsumerMember | None, reason: str | None, now: int,
                   ticket=None, answer=None,
                   error_answer: Callable[[E], dict] | None = None) -> Outcome:
        """The consumer group becomes a classic group of its remaining members,
        all of which speak the classic protocol, each with its target assignment
        (GroupMetadataManager.convertToClassicGroup); a rebalance follows when
        ``reason`` is given.  The classic group takes over at once; if its
        records cannot be written the consumer group is back."""
        gid = group.group_id
        error_answer = error_answer or heartbeat_error
        try:
            classic = migration.classic_group_of(group, leaving, joining, self.metadata, now)
        except migration.MigrationRefused as error:
            log.warning("group.downgrade_refused", group_id=gid, reason=str(error))
            return Outcome().answer(ticket, error_answer(E.GROUP_ID_NOT_FOUND)) \
                if ticket is not None else Outcome()
        records = self.deletion_records(group, joining)
        records.append((G.group_metadata_key(gid), G.group_metadata_value(
            classic.metadata_record())))
        self.forget(group)
        log.info("group.converted", group_id=gid, generation=classic.generation,
                 members=len(classic.members), to="classic",
                 reason="every remaining member speaks the classic protocol "
                        "(online downgrade)")
        out = self.adopt(classic, reason, now)

        def done(error: E, now: int) -> Outcome:
            if error is E.NONE:
                return Outcome().answer(ticket, answer) if ticket is not None else Outcome()
            log.warning("group.write_failed", group_id=gid, error=error.name,
                        record="downgrade",
                        reason="the classic group's records could not be written; the "
                               "consumer group is back")
            out = Outcome()
            if self.groups.get(gid) is classic:
                _release_parked(classic, out)  # JoinGroups parked on it meanwhile
                self.groups[gid] = group
                group.metadata_seen = None
                self._arm_members(group, now)
            return out.answer(ticket, error_answer(map_write_error(error))) \
                if ticket is not None else out

        out.writes.append(Write(records, done))
        return out

    def _arm_session(self, group_id: str, member_id: str, now: int,
                     member: ConsumerMember | None = None) -> None:
        """A member's session: a classic member's own session timeout, the
        group's for the others."""
        timeout = member.classic.session_timeout_ms \
            if member is not None and member.classic is not None \
            else self.config.session_timeout_ms(group_id)
        self.timers.schedule(("cg-session", group_id, member_id), now + timeout)

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("cg-session", "cg-revoke", "cg-join", "cg-sync"):
            self.timers.cancel((kind, group_id, member_id))

    def fire(self, key, payload, now: int) -> Outcome | None:
        if key[0] == "cg-regex":
            group = self.group(key[1])
            return None if group is None else self._resolve_regexes(group, now, payload)
        kind, group_id, member_id = key
        group = self.group(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return None
        if kind == "cg-session":
            timeout = member.classic.session_timeout_ms if member.classic is not None \
                else self.config.session_timeout_ms(group_id)
            reason = f"no heartbeat within the session timeout ({timeout} ms)"
        elif kind == "cg-join":
            reason = "the classic member failed to join within the rebalance timeout"
        elif kind == "cg-sync":
            reason = "the member failed to sync within timeout"
        else:  # "cg-revoke"
            if member.member_epoch != payload or \
                    member.state is not MemberState.UNREVOKED_PARTITIONS:
                return None
            reason = f"it did not revoke its partitions within its rebalance timeout " \
                     f"({member.rebalance_timeout_ms} ms)"
        return self._fence(group, [member], reason, now)

    # == classic members in a consumer group (online migration) ==============================

    def classic_join(self, ticket, group: ConsumerGroup, req: JoinRequest, now: int) -> Outcome:
        """A JoinGroup to a consumer group with members
        (GroupMetadataManager.classicGroupJoinToConsumerGroup): the member joins
        as a consumer group member that speaks the classic protocol; the answer
        carries its epoch as the generation, and its assignment follows in
        SyncGroup."""
        out = Outcome()
        self._prefolded = 0
        member_id = req.member_id or self._new_member_id()
        try:
            if self.config.consumer_migration_policy == "disabled":
                raise HeartbeatError(
                    E.INCONSISTENT_GROUP_PROTOCOL,
                    f"Cannot join the consumer group {group.group_id} with the classic "
                    f"protocol because the group migration is disabled.")
            self._check_size(group, member_id, req.group_instance_id)
            if not group.supports_classic_protocols(req.protocol_type,
                                                    [n for n, _m in req.protocols]):
                raise HeartbeatError(E.INCONSISTENT_GROUP_PROTOCOL,
                                     f"Member {member_id}'s protocols are not supported.")
            if req.member_id == "" and req.group_instance_id is None and req.version >= 4:
                log.info("consumer_group.member_id_required", group_id=group.group_id,
                         member_id=member_id,
                         reason="a dynamic classic member joins with no member id")
                return out.answer(ticket, join_error(E.MEMBER_ID_REQUIRED, member_id))
            try:
                subscription = G.consumer_subscription(req.protocols[0][1])
            except migration.MALFORMED:
                raise HeartbeatError(
                    E.INCONSISTENT_GROUP_PROTOCOL,
                    "Malformed embedded consumer protocol in subscription deserialization.") \
                    from None
            records: list = []
            replaced = None
            if req.group_instance_id is None:
                member = group.members.get(member_id)
                if member is None:
                    member = ConsumerMember(member_id)
                    log.info("consumer_group.member_joined", group_id=group.group_id,
                             member_id=member_id, protocol="classic",
                             reason="JoinGroup to a consumer group")
            else:
                member, replaced = self._static_member(
                    group, member_id, HeartbeatRequest(
                        group.group_id, member_id, -1, instance_id=req.group_instance_id),
                    req.member_id == "", records, classic=True)
            existing = group.static_member(req.group_instance_id)
            # the group's last consumer-protocol member, a static one, is replaced
            # by a classic one (validateOnlineDowngradeWithReplacedMember)
            downgrade = existing is not None and not existing.uses_classic and \
                group.classic_members == len(group.members) - 1 and \
                self.config.downgrade_enabled and \
                len(group.members) <= self.config.max_group_size
            updated = member.with_(
                instance_id=req.group_instance_id if req.group_instance_id is not None
                else member.instance_id,
                rack_id=subscription.get("rack_id") if subscription.get("rack_id") is not None
                else member.rack_id,
                rebalance_timeout_ms=req.rebalance_timeout_ms
                if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
                subscribed_topic_names=tuple(sorted(set(subscription["topics"]))),
                subscribed_topic_regex="", client_id=req.client_id,
                client_host=req.client_host,
                classic=ClassicMetadata(req.session_timeout_ms,
                                        tuple((n, bytes(m)) for n, m in req.protocols)))
            owned = migration.owned_of(subscription, self.metadata)
            reconciled = self._advance(group, member, replaced, updated, owned, records, now)
        except HeartbeatError as error:
            log.info("consumer_group.join_refused", group_id=group.group_id,
                     member_id=member_id, error=error.code.name, reason=error.message)
            return out.answer(ticket, join_error(error.code, req.member_id))
        answer = {"error_code": E.NONE, "generation_id": reconciled.member_epoch,
                  "protocol_type": CONSUMER_PROTOCOL_TYPE,
                  "protocol_name": updated.classic.protocols[0][0], "leader": "",
                  "skip_assignment": False, "member_id": member_id, "members": []}
        if downgrade:
            # the records of the join are not written: the group's tombstones
            # and the classic group's record replace them
            rebalance = any(r[0] == G.CONSUMER_GROUP_METADATA for r in records) or \
                group.assignment_epoch < group.group_epoch
            if rebalance:  # not reconciled: the generation it joined with (0)
                reconciled = updated.with_(member_epoch=member.member_epoch)
                answer["generation_id"] = member.member_epoch
            return self._downgrade(
                group, set(), reconciled,
                f"Downgrade group {group.group_id} from consumer to classic with stale "
                f"assignment." if rebalance else None, now, ticket, answer,
                lambda code: join_error(code, req.member_id))
        gid = group.group_id

        def joined(now: int) -> None:
            self.timers.cancel(("cg-join", gid, member_id))
            self.timers.schedule(("cg-session", gid, member_id), now + req.session_timeout_ms)
            self.timers.schedule(("cg-sync", gid, member_id), now + req.rebalance_timeout_ms)

        try:
            return self._write(out, ticket, group, records, answer, on_durable=joined,
                               error_answer=lambda code: join_error(code, req.member_id),
                               now=now)
        finally:
            self._prefolded = 0

    def _check_size(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> None:
        """GroupMetadataManager.throwIfConsumerGroupIsFull."""
        if group.static_member(instance_id) is not None:
            return
        if len(group.members) >= self.config.consumer_max_size and \
                (not member_id or member_id not in group.members):
            raise HeartbeatError(
                E.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config.consumer_max_size} members.")

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                        generation: int) -> ConsumerMember:
        """validateConsumerGroupMember, then the member must speak the classic
        protocol and give its epoch as its generation."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group "
                                     f"{group.group_id}.")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise HeartbeatError(
                    E.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a "
                                         f"member of group {group.group_id}.")
            if member.member_id != member_id:
                raise HeartbeatError(E.FENCED_INSTANCE_ID)
        if not member.uses_classic:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID,
                                 f"Member {member.member_id} does not use the classic protocol.")
        if member.member_epoch != generation:
            raise HeartbeatError(
                E.ILLEGAL_GENERATION,
                f"The request generation id {generation} is not equal to the member epoch "
                f"{member.member_epoch} of member {member.member_id}.")
        return member

    def _ask_to_rejoin(self, group: ConsumerGroup, member: ConsumerMember, now: int) -> None:
        """scheduleConsumerGroupJoinTimeoutIfAbsent: a classic member told to join
        again must do so within its rebalance timeout."""
        key = ("cg-join", group.group_id, member.member_id)
        if key not in self.timers:
            self.timers.schedule(key, now + max(member.rebalance_timeout_ms, 0))

    def classic_sync(self, ticket, group: ConsumerGroup, generation: int, member_id: str,
                     instance_id: str | None, protocol_type: str | None,
                     protocol_name: str | None, now: int) -> Outcome:
        """A SyncGroup of a classic member of a consumer group
        (classicGroupSyncToConsumerGroup): its assignment is what it may own now."""
        out = Outcome()
        try:
            member = self._classic_member(group, member_id, instance_id, generation)
            if not member.classic.protocols:  # a record that lists none
                raise HeartbeatError(E.UNKNOWN_SERVER_ERROR)
            name = member.classic.protocols[0][0]
            if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise HeartbeatError(E.INCONSISTENT_GROUP_PROTOCOL)
            if protocol_name is not None and protocol_name != name:
                raise HeartbeatError(E.INCONSISTENT_GROUP_PROTOCOL)
            if group.assignment_epoch > member.member_epoch and \
                    member.state is not MemberState.UNREVOKED_PARTITIONS:
                self._ask_to_rejoin(group, member, now)
                raise HeartbeatError(E.REBALANCE_IN_PROGRESS)
            try:
                assignment = migration.assignment_bytes(member, self.metadata)
            except migration.MALFORMED:
                raise HeartbeatError(E.UNKNOWN_SERVER_ERROR) from None
        except HeartbeatError as error:
            return out.answer(ticket, sync_answer(error.code))
        self.timers.cancel(("cg-sync", group.group_id, member.member_id))
        self._arm_session(group.group_id, member.member_id, now, member)
        return out.answer(ticket, sync_answer(E.NONE, assignment, protocol_type, protocol_name))

    def classic_heartbeat(self, group: ConsumerGroup, generation: int, member_id: str,
                          instance_id: str | None, now: int) -> E:
        """A Heartbeat of a classic member of a consumer group
        (classicGroupHeartbeatToConsumerGroup): REBALANCE_IN_PROGRESS when its
        assignment moved on, when it must revoke partitions, or when the ones
        it waited for are free."""
        try:
            member = self._classic_member(group, member_id, instance_id, generation)
        except HeartbeatError as error:
            return error.code
        self._arm_session(group.group_id, member.member_id, now, member)
        if member.member_epoch < group.assignment_epoch or \
                member.state is MemberState.UNREVOKED_PARTITIONS or \
                (member.state is MemberState.UNRELEASED_PARTITIONS and
                 not group.waiting_on_unreleased(member)):
            self._ask_to_rejoin(group, member, now)
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def classic_leave(self, group: ConsumerGroup, members, now: int):
        """A LeaveGroup to a consumer group (classicGroupLeaveToConsumerGroup):
        every member named leaves at once, whichever protocol it speaks."""
        errors, leaving = [], {}
        for member_id, instance_id, _reason in members:
            if instance_id is None:
                member = group.members.get(member_id)
                errors.append(E.NONE if member is not None else E.UNKNOWN_MEMBER_ID)
            else:
                member = group.static_member(instance_id)
                if member is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                elif member_id != "" and member.member_id != member_id:
                    errors.append(E.FENCED_INSTANCE_ID)
                    member = None
                else:
                    errors.append(E.NONE)
            if member is not None:
                leaving[member.member_id] = member
        out = self._fence(group, list(leaving.values()), "LeaveGroup", now) \
            if leaving else Outcome()
        return E.NONE, errors, out

    # == reading ==============================================================================

    def describe(self, group_id: str, version: int) -> dict:
        """One group of ConsumerGroupDescribe (GroupMetadataManager.consumerGroupDescribe)."""
        answer = {"group_id": group_id, "error_message": None, "group_state": "",
                  "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                  "members": []}
        if not group_id:
            return {**answer, "error_code": E.INVALID_GROUP_ID, "group_id": ""}
        if self.refusal is not None:
            return {**answer, "error_code": self.refusal}
        group = self.groups.get(group_id)
        if group is None or getattr(group, "dead", False):
            return {**answer, "error_code": E.GROUP_ID_NOT_FOUND,
                    "error_message": f"Group {group_id} not found."}
        if not isinstance(group, ConsumerGroup):
            return {**answer, "error_code": E.GROUP_ID_NOT_FOUND,
                    "error_message": f"Group {group_id} is not a consumer group."}
        names: dict[uuid.UUID, str] = {}

        def assignment(a: Assignment, b: Assignment | None = None) -> dict:
            items = []
            merged = dict(a)
            for topic_id, parts in (b or {}).items():
                merged[topic_id] = merged.get(topic_id, frozenset()) | parts
            for topic_id, parts in merged.items():
                name = names.get(topic_id)
                if name is None:
                    name = names[topic_id] = self.metadata.name_of(topic_id) or ""
                if name and parts:
                    items.append({"topic_id": topic_id, "topic_name": name,
                                  "partitions": sorted(parts)})
            return {"topic_partitions": items}

        return {**answer, "error_code": E.NONE, "group_state": group.state.value,
                "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                "assignor_name": self._preferred_assignor(group, None, None),
                "members": [{
                    "member_id": m.member_id, "instance_id": m.instance_id,
                    "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscribed_topic_regex,
                    "assignment": assignment(m.assigned, m.pending_revocation),
                    "target_assignment": assignment(group.target.get(m.member_id, {})),
                    "member_type": 0 if m.uses_classic else 1,
                } for m in group.members.values()]}

    def describe_classic(self, group_id: str) -> dict:
        """DescribeGroups (v0-5) of a consumer group: Kafka 4.x describes only
        classic groups, and answers as for a group it does not know (Dead)."""
        return {"error_code": E.NONE, "group_id": group_id, "group_state": "Dead",
                "protocol_type": "", "protocol_data": "", "members": []}

    def list_groups(self, states: list[str], types: list[str]) -> list[dict]:
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        if wanted_types and "consumer" not in wanted_types:
            return []
        return [{"group_id": g.group_id, "protocol_type": "consumer",
                 "group_state": g.state.value, "group_type": "consumer"}
                for g in self.groups.values()
                if isinstance(g, ConsumerGroup) and not g.dead and
                (not wanted_states or g.state.value.lower() in wanted_states)]

    # == loading and deletion ==================================================================

    def install(self, groups: dict[str, ConsumerGroup], now: int) -> None:
        for group_id, group in groups.items():
            if group.dead:
                continue
            self.groups[group_id] = group
            self._arm_members(group, now, loaded=True)

    def deletion_records(self, group: ConsumerGroup,
                         joining: ConsumerMember | None = None) -> list[tuple[bytes, None]]:
        """Tombstones for every record of a group, in Kafka's order
        (ConsumerGroup.createGroupTombstoneRecords); a static member that
        ``joining`` replaces is named by the joining member's id
        (createGroupTombstoneRecordsWithReplacedMember)."""
        gid = group.group_id
        ids = list(group.members)
        if joining is not None and joining.instance_id is not None:
            replaced = group.static_members.get(joining.instance_id)
            ids = [joining.member_id if m == replaced else m for m in ids]
        records = [_record(gid, G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, m, None)
                   for m in ids]
        records += [_record(gid, G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, m, None)
                    for m in ids]
        records.append(_record(gid, G.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, None, None))
        records += [_record(gid, G.CONSUMER_GROUP_MEMBER_METADATA, m, None)
                    for m in ids]
        records += [_record(gid, G.CONSUMER_GROUP_REGULAR_EXPRESSION, r, None)
                    for r in group.resolved]
        records.append(_record(gid, G.CONSUMER_GROUP_PARTITION_METADATA, None, None))
        records.append(_record(gid, G.CONSUMER_GROUP_METADATA, None, None))
        return records

    def forget(self, group: ConsumerGroup) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        self.timers.cancel(("cg-regex", group.group_id))
        for member_id in group.members:
            self._cancel_timers(group.group_id, member_id)


def _release_parked(classic: Group, out: Outcome) -> None:
    """A classic group taken over while rebalancing: its members' parked
    JoinGroup and SyncGroup are answered REBALANCE_IN_PROGRESS, to join again
    (ClassicGroup.completeAllJoinFutures and completeAllSyncFutures)."""
    for member in classic.members.values():
        if member.awaiting_join is not None:
            out.answer(member.awaiting_join, join_error(E.REBALANCE_IN_PROGRESS,
                                                        member.member_id))
            classic.set_awaiting_join(member, None)
        if member.awaiting_sync is not None:
            out.answer(member.awaiting_sync, sync_answer(E.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = None


def _java_hash_order(names) -> list[str]:
    """The order a small Java HashMap<String, ...> lists its keys in (Kafka's
    message lists its assignors so): by bucket of a 16-slot table, then as put."""
    def bucket(name: str) -> int:
        h = 0
        for unit in struct.unpack(f">{len(name.encode('utf-16-be')) // 2}H",
                                  name.encode("utf-16-be")):
            h = (31 * h + unit) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 15
    return sorted(names, key=bucket)


def _blank(text: str | None) -> bool:
    """Java's ``text.trim().isEmpty()``: trim strips every char up to U+0020."""
    return text is not None and not text.lstrip("".join(map(chr, range(33))))


def _record(group_id: str, kind: str, member_id: str | None, value: dict | None):
    """One record; ``member_id`` is the expression for a regular expression's."""
    if kind == G.CONSUMER_GROUP_REGULAR_EXPRESSION:
        key = G.consumer_group_key(kind, group_id, regular_expression=member_id)
    else:
        key = G.consumer_group_key(kind, group_id, member_id)
    return key, None if value is None else G.consumer_group_value(kind, value)


def _new_member_id() -> str:
    """Uuid.randomUuid().toString(): 22 URL-safe base64 characters, drawn again
    when they would start with '-' (a command-line argument's look)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text
