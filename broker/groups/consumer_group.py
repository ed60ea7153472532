"""A consumer group of the KIP-848 protocol (Kafka's ``ConsumerGroup`` and
``ConsumerGroupMember``): its epochs, members, target assignment and which
member currently holds each partition, and how each of its records folds
into it (``GroupMetadataManager.replay`` for record types 3 to 8).

Live changes go through the same fold: an operation computes the records to
write and the group takes them with ``apply_undoable``, so that the state is
always what replaying the log gives; each record leaves what undoes it
(members are replaced, never changed in place, so that is a reference), and a
failed write is undone record by record.

Plain synchronous data, no clock.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import Any

from kcoord.protocol import group_records as G

Assignment = dict[uuid.UUID, frozenset[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """A member's reconciliation state, as stored in its current assignment
    record (Kafka's ``MemberState``)."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """What a member that speaks the classic protocol inside a consumer group
    (online migration) joined with: its session timeout and its protocols, in
    its order, with their ConsumerProtocolSubscription bytes (the record's
    ClassicMemberMetadata)."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    def record(self) -> dict:
        return {"session_timeout_ms": self.session_timeout_ms,
                "supported_protocols": [{"name": n, "metadata": m} for n, m in self.protocols]}


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    """One member (Kafka's ``ConsumerGroupMember``), as a new one starts."""
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()  # a set: kept sorted
    subscribed_topic_regex: str = ""  # "" for none
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    # from the current assignment record
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # (topic id, partition) -> the epoch at which the member was given it, for
    # every partition assigned or pending revocation (the records' AssignmentEpochs)
    epochs: Mapping[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    # set for a member that joined with JoinGroup (the classic protocol)
    classic: ClassicMetadata | None = None

    @property
    def uses_classic(self) -> bool:
        return self.classic is not None

    def with_(self, **changes) -> "ConsumerMember":
        return replace(self, **changes)

    def metadata_record(self) -> dict:
        return {"instance_id": self.instance_id, "rack_id": self.rack_id,
                "client_id": self.client_id, "client_host": self.client_host,
                "subscribed_topic_names": list(self.subscribed_topic_names),
                "subscribed_topic_regex": self.subscribed_topic_regex,
                "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "server_assignor": self.server_assignor,
                "classic_member_metadata": None if self.classic is None
                else self.classic.record()}

    def assignment_record(self) -> dict:
        return {"member_epoch": self.member_epoch,
                "previous_member_epoch": self.previous_member_epoch,
                "state": int(self.state),
                "assigned_partitions": self._with_epochs(self.assigned),
                "partitions_pending_revocation": self._with_epochs(self.pending_revocation)}

    def _with_epochs(self, assignment: Assignment) -> list[dict]:
        out = []
        for topic_id, parts in assignment.items():
            if parts:
                ordered = sorted(parts)
                out.append({"topic_id": topic_id, "partitions": ordered,
                            "assignment_epochs": [self.epochs.get((topic_id, p), 0)
                                                  for p in ordered]})
        return out

    def same_metadata(self, other: "ConsumerMember") -> bool:
        return self.metadata_record() == other.metadata_record()

    def same_assignment(self, other: "ConsumerMember") -> bool:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned,
                self.pending_revocation, self.epochs) == (
            other.member_epoch, other.previous_member_epoch, other.state, other.assigned,
            other.pending_revocation, other.epochs)

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch at which the member got a partition it holds, or None."""
        if partition in self.assigned.get(topic_id, ()) or \
                partition in self.pending_revocation.get(topic_id, ()):
            return self.epochs.get((topic_id, partition), 0)
        return None


def topic_partitions(assignment: Assignment) -> list[dict]:
    """An assignment as the records and the heartbeat answer list it."""
    return [{"topic_id": topic_id, "partitions": sorted(parts)}
            for topic_id, parts in assignment.items() if parts]


def from_topic_partitions(items) -> Assignment:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for item in items or ():
        parts = frozenset(item["partitions"])
        if parts:
            out[item["topic_id"]] = out.get(item["topic_id"], frozenset()) | parts
    return out


def _epochs_of(items, member_epoch: int) -> dict[tuple[uuid.UUID, int], int]:
    """AssignmentEpochs of a record's partitions; missing or of another length:
    the member's epoch (at least 0), as Kafka reads them."""
    epochs = {}
    fallback = max(member_epoch, 0)
    for item in items or ():
        given = item.get("assignment_epochs")
        parts = item["partitions"]
        if given is None or len(given) != len(parts):
            given = [fallback] * len(parts)
        for p, e in zip(parts, given):
            epochs[(item["topic_id"], p)] = e
    return epochs


class ConsumerGroup:
    """One consumer group; ``apply`` folds its records in, live and on load."""

    def __init__(self, group_id: str):
        self.group_id = group_id
        # Kafka 4.4 starts a new group at epoch 1 with a target assignment of
        # epoch 1 made at time 0 (TargetAssignmentMetadata.INITIAL)
        self.group_epoch = 1
        self.metadata_hash = 0
        self.assignment_epoch = 1
        self.assignment_timestamp = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}  # member id -> target assignment
        # (topic id, partition) -> the epoch of the member holding it (assigned or
        # pending revocation): a partition is given to its next owner only once
        # free (ConsumerGroup.currentPartitionEpoch)
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.subscribed_names: Counter[str] = Counter()
        # regular expression -> members subscribed with it
        self.regex_counts: Counter[str] = Counter()
        # regular expression -> (matching topics, metadata version, time resolved)
        self.resolved: dict[str, tuple[frozenset[str], int, int]] = {}
        self.has_partition_metadata_record = False  # a type-4 record to tombstone
        self.dead = False
        # the broker's topic metadata version the metadata hash was last checked
        # at (in memory: a loaded group checks again at its first heartbeat)
        self.metadata_seen: int | None = None
        # its writes not yet durable, in the order issued (see ConsumerGroupManager._write)
        self.pending: list = []
        # (member id -> its server assignor) counted: the preferred assignor
        self.assignor_counts: Counter[str] = Counter()
        # the members that speak the classic protocol, and how many of them
        # support each classic protocol name (ConsumerGroup's
        # classicProtocolMembersSupportedProtocols)
        self.classic_members = 0
        self.classic_protocols: Counter[str] = Counter()

    # -- reading ---------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        """ConsumerGroup.updateState: derived from the epochs and the members."""
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if member.state is not MemberState.STABLE or \
                    member.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def topics_of(self, member: ConsumerMember) -> set[str]:
        """The topic names a member subscribes to: its names and what its regular
        expression resolved to (nothing while unresolved)."""
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            found = self.resolved.get(member.subscribed_topic_regex)
            if found is not None:
                topics |= found[0]
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        """ConsumerGroup.isSubscribedToTopic: by a name or a resolved expression."""
        if self.subscribed_names.get(topic, 0) > 0:
            return True
        return any(topic in self.resolved[r][0] for r in self.regex_counts if r in self.resolved)

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def supports_classic_protocols(self, protocol_type: str, names) -> bool:
        """ConsumerGroup.supportsClassicProtocols: a classic member may join if it
        speaks the consumer protocol type with a protocol every classic member
        supports (any, in an empty group)."""
        if protocol_type != "consumer":
            return False
        if self.state is ConsumerGroupState.EMPTY:
            return bool(names)
        return any(self.classic_protocols.get(n, 0) == self.classic_members for n in names)

    def all_classic_except(self, leaving) -> bool:
        """Whether every member but ``leaving`` speaks the classic protocol
        (ConsumerGroup.allMembersUseClassicProtocolExcept)."""
        excluded = sum(1 for m in leaving if m.uses_classic)
        return self.classic_members - excluded == len(self.members) - len(leaving)

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Whether a member in UNRELEASED_PARTITIONS still waits for a partition of
        its target that another member holds (waitingOnUnreleasedPartition)."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, parts in self.target.get(member.member_id, {}).items():
            held = member.assigned.get(topic_id, ())
            for p in parts:
                if p not in held and self.partition_epoch(topic_id, p) != -1:
                    return True
        return False

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    # -- the fold ---------------------------------------------------------------------

    def apply(self, kind: str, key, value) -> None:
        """Fold one record (``value`` None: a tombstone) into the group."""
        if kind == G.CONSUMER_GROUP_METADATA:
            if value is None:
                self.dead = True
            else:
                self.dead = False
                self.group_epoch = value["epoch"]
                self.metadata_hash = value["metadata_hash"]
        elif kind == G.CONSUMER_GROUP_PARTITION_METADATA:
            self.has_partition_metadata_record = value is not None
        elif kind == G.CONSUMER_GROUP_MEMBER_METADATA:
            self._apply_member_metadata(key["member_id"], value)
        elif kind == G.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            if value is None:
                self.assignment_epoch, self.assignment_timestamp = -1, 0
            else:
                self.assignment_epoch = value["assignment_epoch"]
                self.assignment_timestamp = value["assignment_timestamp"]
        elif kind == G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(key["member_id"], None)
            else:
                self.target[key["member_id"]] = from_topic_partitions(value["topic_partitions"])
        elif kind == G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            self._apply_current_assignment(key["member_id"], value)
        elif kind == G.CONSUMER_GROUP_REGULAR_EXPRESSION:
            if value is None:
                self.resolved.pop(key["regular_expression"], None)
            else:
                self.resolved[key["regular_expression"]] = (
                    frozenset(value["topics"]), value["version"], value["timestamp"])

    def _apply_member_metadata(self, member_id: str, value) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._set_member(member_id, None)
            return
        base = old if old is not None else ConsumerMember(member_id)
        self._set_member(member_id, base.with_(
            instance_id=value["instance_id"], rack_id=value["rack_id"],
            client_id=value["client_id"], client_host=value["client_host"],
            subscribed_topic_names=tuple(sorted(set(value["subscribed_topic_names"]))),
            subscribed_topic_regex=value["subscribed_topic_regex"] or "",
            rebalance_timeout_ms=value["rebalance_timeout_ms"],
            server_assignor=value["server_assignor"],
            classic=_classic_of(value.get("classic_member_metadata"))))

    def _apply_current_assignment(self, member_id: str, value) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._set_member(member_id, old.with_(
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    assigned={}, pending_revocation={}, epochs={}))
            return
        base = old if old is not None else ConsumerMember(member_id)
        try:
            state = MemberState(value["state"])
        except ValueError:
            state = MemberState.UNKNOWN
        self._set_member(member_id, base.with_(
            member_epoch=value["member_epoch"],
            previous_member_epoch=value["previous_member_epoch"], state=state,
            assigned=from_topic_partitions(value["assigned_partitions"]),
            pending_revocation=from_topic_partitions(value["partitions_pending_revocation"]),
            epochs={**_epochs_of(value["assigned_partitions"], value["member_epoch"]),
                    **_epochs_of(value["partitions_pending_revocation"],
                                 value["member_epoch"])}))

    def _set_member(self, member_id: str, member: ConsumerMember | None) -> None:
        """Replace (or remove) a member, keeping the indexes in step: the
        subscribed topic names, the static members and the partition epochs."""
        old = self.members.get(member_id)
        if old is not None:
            self.subscribed_names.subtract(old.subscribed_topic_names)
            self.subscribed_names += Counter()  # drop the zero counts
            if old.server_assignor:
                self.assignor_counts[old.server_assignor] -= 1
                if self.assignor_counts[old.server_assignor] <= 0:
                    del self.assignor_counts[old.server_assignor]
            if old.subscribed_topic_regex:
                self.regex_counts[old.subscribed_topic_regex] -= 1
                if self.regex_counts[old.subscribed_topic_regex] <= 0:
                    del self.regex_counts[old.subscribed_topic_regex]
            if old.instance_id is not None and \
                    self.static_members.get(old.instance_id) == member_id:
                del self.static_members[old.instance_id]
            if old.classic is not None:
                self.classic_members -= 1
                self.classic_protocols.subtract({n for n, _m in old.classic.protocols})
                self.classic_protocols += Counter()
            self._release(old)
        if member is None:
            self.members.pop(member_id, None)
            return
        self.members[member_id] = member
        self.subscribed_names.update(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            self.regex_counts[member.subscribed_topic_regex] += 1
        if member.server_assignor:
            self.assignor_counts[member.server_assignor] += 1
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member_id
        if member.classic is not None:
            self.classic_members += 1
            self.classic_protocols.update({n for n, _m in member.classic.protocols})
        self._hold(member)

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, parts in assignment.items():
                for p in parts:
                    if self.partition_epochs.get((topic_id, p)) == member.member_epoch:
                        del self.partition_epochs[(topic_id, p)]

    def _hold(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, parts in assignment.items():
                for p in parts:
                    self.partition_epochs[(topic_id, p)] = member.member_epoch

    # -- undo ---------------------------------------------------------------------------

    def apply_undoable(self, kind: str, key, value) -> tuple:
        """Fold one record and return what undoes it: a failed write puts the
        group back as the log has it, at the cost of the records it touched."""
        if kind == G.CONSUMER_GROUP_METADATA:
            undo = ("group", self.group_epoch, self.metadata_hash, self.dead)
        elif kind == G.CONSUMER_GROUP_PARTITION_METADATA:
            undo = ("legacy", self.has_partition_metadata_record)
        elif kind in (G.CONSUMER_GROUP_MEMBER_METADATA, G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT):
            undo = ("member", key["member_id"], self.members.get(key["member_id"]))
        elif kind == G.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            undo = ("assignment", self.assignment_epoch, self.assignment_timestamp)
        elif kind == G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            undo = ("target", key["member_id"], self.target.get(key["member_id"]))
        else:  # a regular expression's resolution
            undo = ("regex", key["regular_expression"],
                    self.resolved.get(key["regular_expression"]))
        self.apply(kind, key, value)
        return undo

    def undo(self, entries: list[tuple]) -> None:
        """Undo what ``apply_undoable`` returned, the last record first."""
        for entry in reversed(entries):
            tag = entry[0]
            if tag == "group":
                _tag, self.group_epoch, self.metadata_hash, self.dead = entry
            elif tag == "legacy":
                self.has_partition_metadata_record = entry[1]
            elif tag == "member":
                self._set_member(entry[1], entry[2])
            elif tag == "assignment":
                _tag, self.assignment_epoch, self.assignment_timestamp = entry
            elif tag == "target":
                if entry[2] is None:
                    self.target.pop(entry[1], None)
                else:
                    self.target[entry[1]] = entry[2]
            elif entry[2] is None:
                self.resolved.pop(entry[1], None)
            else:
                self.resolved[entry[1]] = entry[2]


def _classic_of(value) -> ClassicMetadata | None:
    if value is None:
        return None
    return ClassicMetadata(value["session_timeout_ms"],
                           tuple((p["name"], bytes(p["metadata"]))
                                 for p in value["supported_protocols"]))


def records_of(group_id: str, kind: str, member_id: str | None = None,
               value: dict | None = None) -> tuple[bytes, bytes | None]:
    """One consumer group record as (key, value) bytes."""
    key = G.consumer_group_key(kind, group_id, member_id)
    return key, None if value is None else G.consumer_group_value(kind, value)


def describe_assignment(assignment: Assignment, names: dict[uuid.UUID, str]) -> dict[str, Any]:
    """``{topic: [partitions]}`` for logs and tools (unknown topic ids by id)."""
    return {names.get(t, str(t)): sorted(p) for t, p in assignment.items()}
