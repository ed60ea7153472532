"""A classic consumer group: its state, members and the rules that need no clock
(Kafka's ClassicGroup): state transitions, leader election, protocol
support and selection, the subscribed topics of a consumer group, and the
GroupMetadata record it is persisted as and loaded from.

Plain synchronous data: the coordinator core drives it with ``now`` given.
"""

from __future__ import annotations

import enum
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kcoord.protocol.wire import decode_utf8


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
# Target state -> the states it may be entered from (GroupMetadata.validPreviousStates).
VALID_PREVIOUS = {
    S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
    S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
    S.STABLE: {S.COMPLETING_REBALANCE},
    S.EMPTY: {S.PREPARING_REBALANCE},
    S.DEAD: set(GroupState),
}
CONSUMER_PROTOCOL_TYPE = "consumer"


_NONE: frozenset = frozenset()


class _NoStaticMembers(dict):
    """Static members are rare: a group holds this one shared empty mapping until
    its first static member joins, and again once the last one leaves.  It
    refuses writes (one into it would reach every group), and copies and
    pickles as itself."""

    __slots__ = ()

    def _refuse(self, *_args, **_kwargs):
        raise TypeError("the shared empty mapping of static members is read-only")

    __setitem__ = __delitem__ = __ior__ = _refuse
    pop = popitem = setdefault = update = clear = _refuse

    def __reduce__(self):
        return "_NO_STATIC"


_NO_STATIC: dict[str, str] = _NoStaticMembers()


def _with(items: set | frozenset, item: str) -> set:
    """``items`` with ``item`` added: a set of its own once not empty."""
    if not items:
        items = set()
    items.add(item)
    return items


def _without(items: set | frozenset, item: str) -> set | frozenset:
    """``items`` without ``item``: the shared empty set once empty."""
    if item in items:
        items.discard(item)
        if not items:
            return _NONE
    return items


class IllegalTransition(RuntimeError):
    pass


@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    group_instance_id: str | None = None
    assignment: bytes = b""
    is_new: bool = False
    # The parked JoinGroup / SyncGroup of this member: an opaque ticket the
    # shell answers, or None.
    awaiting_join: Any = None
    awaiting_sync: Any = None
    # When the member's session ends unless it is heard from (None: no session
    # running), and its place among deadlines of the same instant.  One timer
    # per group fires at its members' earliest deadline
    # (``GroupMetadataManager.arm_session``), so that a heartbeat only moves this.
    session_deadline: int | None = field(default=None, compare=False)
    session_seq: int = field(default=0, compare=False)

    def protocol_names(self) -> list[str]:
        return [name for name, _meta in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, byte-identical metadata (ClassicGroupMember.matches)."""
        return [(n, bytes(m)) for n, m in self.protocols] == [(n, bytes(m)) for n, m in protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(
        default_factory=lambda: _NO_STATIC)  # instance id -> member id
    # Member ids given out and not yet joined with (KIP-394), and members whose
    # SyncGroup is awaited: empty most of the time, so a shared empty set until
    # one is added (``add_pending_member`` ...), and again once emptied.
    pending_members: set[str] | frozenset = _NONE
    pending_sync: set[str] | frozenset = _NONE
    new_member_added: bool = False  # extends the initial rebalance delay (KIP-134)
    # The subscribed topics as of the start of the current generation (or the
    # load), as Kafka keeps them (ClassicGroup.initNextGeneration); None: unknown.
    subscribed: frozenset[str] | None = None
    _support: Counter = field(default_factory=Counter)
    # Members with a parked JoinGroup, counted as they park and leave
    # (ClassicGroup.numMembersAwaitingJoinResponse): every join asks whether all
    # members have joined, and a count over the members would make a rebalance
    # of N members cost N^2.
    _joined: int = 0

    # -- state ---------------------------------------------------------------

    def transition_to(self, target: GroupState, now: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    # -- members ---------------------------------------------------------------

    def add_member(self, member: Member) -> None:
        """A new member; the first one sets the protocol type, and a group
        without a leader gets this member as its leader."""
        if not self.members:
            self.protocol_type = member.protocol_type
        else:
            member.protocols = self._alike(member.protocols)
        member.rebalance_timeout_ms = shared_number(member.rebalance_timeout_ms)
        member.session_timeout_ms = shared_number(member.session_timeout_ms)
        self.members[member.member_id] = member
        self._support.update(set(member.protocol_names()))
        if member.awaiting_join is not None:
            self._joined += 1
        if member.group_instance_id is not None:
            if self.static_members is _NO_STATIC:
                self.static_members = {}
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._support.subtract(set(member.protocol_names()))
        if member.awaiting_join is not None:
            self._joined -= 1
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
            if not self.static_members:
                self.static_members = _NO_STATIC
        self.drop_pending_sync(member_id)
        if self.leader_id == member_id:
            # Kafka takes an arbitrary remaining member; the oldest one here.
            self.leader_id = next(iter(self.members), None)
        return member

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members = _with(self.pending_members, member_id)

    def drop_pending_member(self, member_id: str) -> None:
        self.pending_members = _without(self.pending_members, member_id)

    def add_pending_sync(self, member_id: str) -> None:
        self.pending_sync = _with(self.pending_sync, member_id)

    def drop_pending_sync(self, member_id: str) -> None:
        self.pending_sync = _without(self.pending_sync, member_id)

    def clear_pending_sync(self) -> None:
        self.pending_sync = _NONE

    def update_protocols(self, member: Member, protocols: list[tuple[str, bytes]]) -> None:
        self._support.subtract(set(member.protocol_names()))
        member.protocols = self._alike(protocols)
        self._support.update(set(member.protocol_names()))

    def _alike(self, protocols: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        """The members of a group mostly send the same protocols and metadata
        (one subscription): then they share the leader's list, which is never
        changed in place (a member's protocols are replaced whole)."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is not None and leader.protocols == protocols:
            return leader.protocols
        return protocols

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members (0 without members)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def set_awaiting_join(self, member: Member, ticket) -> None:
        """Park (a ticket) or release (None) the JoinGroup of ``member``."""
        if self.members.get(member.member_id) is member:
            self._joined += (ticket is not None) - (member.awaiting_join is not None)
        member.awaiting_join = ticket

    def awaiting_join_count(self) -> int:
        return self._joined

    def has_all_members_joined(self) -> bool:
        """Every member has a parked JoinGroup and no member id is pending."""
        return not self.pending_members and self._joined == len(self.members)

    # -- protocols -------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """GroupMetadata.supportsProtocols: may a member with these protocols join?"""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and any(
            self._support[name] == len(self.members) for name in names)

    def candidate_protocols(self) -> list[str]:
        """The protocols every member supports, in the leader's order of preference."""
        everyone = len(self.members)
        order = self.members[self.leader_id].protocol_names() if self.leader_id in self.members \
            else next(iter(self.members.values())).protocol_names()
        return [name for name in order if self._support[name] == everyone]

    def select_protocol(self) -> str:
        """Each member votes for its first candidate; most votes win (ties: the
        leader's preference, where Kafka's is arbitrary)."""
        if not self.members:
            raise ValueError(f"group {self.group_id} has no members to select a protocol")
        # Each member's protocols are read up to its vote, the leader's up to the
        # first of the tied: a JoinGroup listing 50,000 of them must not hold the
        # loop (the candidates listed in full and ranked took tens of ms there).
        everyone = len(self.members)
        support = self._support
        votes: dict[str, int] = {}
        for m in self.members.values():
            for name, _meta in m.protocols:
                if support[name] == everyone:
                    votes[name] = votes.get(name, 0) + 1
                    break
        if not votes:
            raise ValueError(f"the members of group {self.group_id} share no protocol")
        most = max(votes.values())
        tied = {name for name, count in votes.items() if count == most}
        if len(tied) == 1:
            return next(iter(tied))
        leader = self.members.get(self.leader_id) or next(iter(self.members.values()))
        return next(name for name, _meta in leader.protocols if name in tied)

    # -- consumer subscriptions (ClassicGroup.subscribedTopics) -------------------------------

    def subscribed_topics(self) -> frozenset[str] | None:
        """The topics a consumer group subscribes to; None when unknown (not a
        consumer group, no protocol selected, or unreadable metadata)."""
        if self.protocol_type == CONSUMER_PROTOCOL_TYPE and not self.members:
            return _NONE
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        read: set[bytes] = set()  # the members of a group mostly send the same bytes
        try:
            for member in self.members.values():
                metadata = member.metadata(self.protocol_name)
                if type(metadata) is not bytes:
                    metadata = bytes(metadata)
                if metadata not in read:
                    read.add(metadata)
                    topics |= subscription_topics(metadata)
        except (ValueError, KeyError, struct.error, UnicodeDecodeError):
            return None
        return shared_topics(topics)

    # -- persistence (the GroupMetadata record) -----------------------------------------------

    def metadata_record(self, assignment: dict[str, bytes] | None = None) -> dict:
        """The GroupMetadataValue of the group as it is now (written as v3), with
        ``assignment`` instead of the members' current ones when given."""
        return {
            "protocol_type": self.protocol_type or "",
            "generation": self.generation,
            "protocol": self.protocol_name,
            "leader": self.leader_id,
            "current_state_timestamp": self.current_state_timestamp,
            "members": [{
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout_ms,
                "session_timeout": m.session_timeout_ms,
                "subscription": m.metadata(self.protocol_name) if self.protocol_name else b"",
                "assignment": m.assignment if assignment is None
                else assignment.get(m.member_id, b""),
            } for m in self.members.values()],
        }

    @classmethod
    def from_record(cls, group_id: str, value) -> "Group":
        """A group as loaded from its GroupMetadata record: Stable with members,
        Empty without (GroupMetadataManager.loadGroup)."""
        group = cls(group_id, generation=value.generation,
                    protocol_type=value.protocol_type or None,
                    protocol_name=value.protocol, leader_id=None,
                    current_state_timestamp=value.current_state_timestamp)
        for m in value.members:
            # v0 records have no rebalance timeout: the session timeout stands in.
            rebalance = m.rebalance_timeout if m.rebalance_timeout != -1 else m.session_timeout
            group.add_member(Member(
                m.member_id, shared(m.client_id), shared(m.client_host), rebalance,
                m.session_timeout, shared(group.protocol_type or ""),
                [(shared(value.protocol or ""), m.subscription)],
                group_instance_id=m.group_instance_id, assignment=m.assignment))
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.subscribed = group.subscribed_topics()
        return group


_SHARED: dict[str, str] = {}
_SHARED_TOPICS: dict[frozenset, frozenset] = {}  # apart: sets never crowd out strings
_SHARED_NUMBERS: dict[int, int] = {}  # and numbers apart too
SHARED_MAX = 4096  # values kept for sharing in each table, at most
SHARED_CHARS = 255  # the longest string kept (alone or in a set of topics)
SHARED_TOPICS = 4  # the most topics of a subscription kept


def _keep(value, table: dict):
    kept = table.get(value)
    if kept is not None:
        return kept
    if len(table) < SHARED_MAX:
        table[value] = value
    return value


def shared(text: str | None) -> str | None:
    """One copy of a string that many members hold alike (a client id, a host, a
    protocol type or name), not one per member: each decoded request has its own.
    Clients choose these strings, so the values kept for sharing are bounded in
    number and size (``sys.intern`` never frees some Python versions' strings)."""
    if text is None or len(text) > SHARED_CHARS:
        return text
    return _keep(text, _SHARED)


def shared_number(number: int) -> int:
    """One object for a number that many members hold alike (their session and
    rebalance timeouts): an int past 256 is an object of its own per decoded
    request.  Bounded as ``shared``."""
    return _keep(number, _SHARED_NUMBERS)


def shared_topics(topics: set[str]) -> frozenset[str]:
    """One set of topic names for the groups that subscribe alike (most groups
    of an application read the same few topics), bounded as ``shared``."""
    topics = frozenset(topics)
    if len(topics) > SHARED_TOPICS or any(len(t) > SHARED_CHARS for t in topics):
        return topics
    return _keep(topics, _SHARED_TOPICS)


def subscription_topics(metadata: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription, read with the v0 layout
    whatever its version says (as Kafka's group coordinator reads it)."""
    pos = 2  # int16 version
    (count,) = struct.unpack_from(">i", metadata, pos)
    pos += 4
    if count < 0:
        raise ValueError("negative topic count")
    topics = set()
    for _ in range(count):
        (length,) = struct.unpack_from(">h", metadata, pos)
        pos += 2
        if length < 0 or pos + length > len(metadata):
            raise ValueError("bad topic name length")
        topics.add(decode_utf8(metadata[pos:pos + length]))
        pos += length
    return topics
