"""Online migration between the two group protocols (KIP-848's
``group.consumer.migration.policy``): a running classic group becomes a
consumer group when a member joins it with ConsumerGroupHeartbeat (Kafka's
``ConsumerGroup.fromClassicGroup``), and a consumer group whose last
consumer-protocol member leaves becomes a classic group again
(``ClassicGroup.fromConsumerGroup``), each member keeping what it owns.

Pure: the group as it is, the topics as the broker has them, and the records
that say so in ``__consumer_offsets``, in Kafka's order.
"""

from __future__ import annotations

import struct
import uuid

from kcoord.broker.groups.consumer_group import (
    Assignment,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    topic_partitions,
)
from kcoord.broker.groups.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from kcoord.broker.groups.subscriptions import TopicImage
from kcoord.protocol import group_records as G

# What a malformed embedded consumer protocol raises while it is read.
MALFORMED = (ValueError, KeyError, IndexError, struct.error, UnicodeDecodeError)


class MigrationRefused(Exception):
    """The group cannot change protocol; the message is Kafka's."""


class MigrationFailed(Exception):
    """The group is in a state Kafka's conversion fails on (an internal error:
    UNKNOWN_SERVER_ERROR); the message says which."""


def consumer_members_of(classic: Group, metadata: TopicImage) -> list[ConsumerMember]:
    """The classic group's members as consumer group members: each keeps the
    partitions its last SyncGroup gave it, as its target too, Stable at the
    classic generation (a member then in a rebalance is asked to join again)."""
    generation = classic.generation
    if classic.protocol_name is None:
        raise MigrationFailed("no protocol is selected yet (its first rebalance)")
    members = []
    held: set[tuple[uuid.UUID, int]] = set()
    for m in classic.members.values():
        if classic.protocol_name not in m.protocol_names():
            raise MigrationFailed(f"member {m.member_id} does not support protocol "
                                  f"{classic.protocol_name}")
        try:
            assigned = _assignment_of(m.assignment, metadata, classic.group_id)
            subscription = G.consumer_subscription(m.metadata(classic.protocol_name))
        except MALFORMED:
            raise MigrationRefused(
                f"Cannot upgrade classic group {classic.group_id} to consumer group because the "
                f"embedded consumer protocol is malformed.") from None
        for topic_id, parts in assigned.items():
            for p in parts:
                if (topic_id, p) in held:
                    raise MigrationFailed(f"partition {p} of topic {topic_id} is assigned to "
                                          f"two members")
                held.add((topic_id, p))
        members.append(ConsumerMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=subscription.get("rack_id"),
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(set(subscription["topics"]))),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_epoch=generation, previous_member_epoch=generation,
            state=MemberState.STABLE, assigned=assigned,
            epochs={(t, p): generation for t, parts in assigned.items() for p in parts},
            classic=ClassicMetadata(m.session_timeout_ms,
                                    tuple((n, bytes(b)) for n, b in m.protocols))))
    return members


def _assignment_of(raw: bytes, metadata: TopicImage, group_id: str) -> Assignment:
    if not raw:
        return {}
    assignment = G.consumer_assignment(raw)
    if assignment.get("user_data"):  # it would be lost
        raise MigrationRefused(
            f"Cannot upgrade classic group {group_id} to consumer group because an unsupported "
            f"custom assignor is in use. Please refer to the documentation or switch to a "
            f"default assignor before re-attempting the upgrade.")
    out: dict[uuid.UUID, frozenset[int]] = {}
    for item in assignment["assigned_partitions"]:
        found = metadata.lookup(item["topic"])
        if found is not None and item["partitions"]:
            out[found[0]] = out.get(found[0], frozenset()) | frozenset(item["partitions"])
    return out


def upgrade_records(classic: Group, members: list[ConsumerMember],
                    metadata_hash: int) -> list[tuple]:
    """The records that turn the classic group into a consumer group
    (ConsumerGroup.createConsumerGroupRecords after the classic group's
    tombstone), as ``(kind, member id, value)``."""
    epoch = classic.generation
    records: list[tuple] = [(G.GROUP_METADATA, None, None)]
    records += [(G.CONSUMER_GROUP_MEMBER_METADATA, m.member_id, m.metadata_record())
                for m in members]
    records.append((G.CONSUMER_GROUP_METADATA, None,
                    {"epoch": epoch, "metadata_hash": metadata_hash}))
    records += [(G.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, m.member_id,
                 {"topic_partitions": topic_partitions(m.assigned)}) for m in members]
    records.append((G.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, None,
                    {"assignment_epoch": epoch, "assignment_timestamp": 0}))
    records += [(G.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, m.member_id,
                 m.assignment_record()) for m in members]
    return records


def classic_group_of(group: ConsumerGroup, leaving: set[str], joining: ConsumerMember | None,
                     metadata: TopicImage, now: int) -> Group:
    """The consumer group as a classic group (ClassicGroup.fromConsumerGroup):
    Stable at the group epoch, every remaining member (all speak the classic
    protocol) with its target assignment in its own subscription's version;
    ``joining`` replaces the static member of its instance id and takes its
    target."""
    classic = Group(group.group_id, state=GroupState.STABLE, generation=group.group_epoch,
                    protocol_type=CONSUMER_PROTOCOL_TYPE, current_state_timestamp=now)
    replaced = None
    if joining is not None and joining.instance_id is not None:
        replaced = group.static_members.get(joining.instance_id)
    kept = [m for m in group.members.values()
            if m.member_id not in leaving and m.member_id != replaced]
    if joining is not None:
        kept.append(joining)
    for m in kept:
        classic.add_member(Member(
            m.member_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols),
            group_instance_id=m.instance_id))
    try:
        classic.protocol_name = classic.select_protocol()
    except ValueError as error:  # the members share no protocol
        raise MigrationRefused(
            f"Cannot downgrade the classic group {group.group_id}: {error}.") from None
    classic.subscribed = classic.subscribed_topics()
    for m in classic.members.values():
        source = replaced if joining is not None and m.member_id == joining.member_id \
            else m.member_id
        target = group.target.get(source, {})
        try:
            version = G.consumer_protocol_version(m.metadata(classic.protocol_name))
            m.assignment = G.consumer_assignment_bytes(_by_name(target, metadata), version)
        except MALFORMED as error:
            raise MigrationRefused(
                f"Cannot downgrade the classic group {group.group_id}: {error}.") from None
    return classic


def _by_name(assignment: Assignment, metadata: TopicImage) -> list[tuple[str, list[int]]]:
    named = []
    for topic_id, parts in assignment.items():
        name = metadata.name_of(topic_id)
        if name is not None and parts:
            named.append((name, sorted(parts)))
    return sorted(named)


def assignment_bytes(member: ConsumerMember, metadata: TopicImage) -> bytes:
    """A classic member's SyncGroup assignment: the partitions it holds now, in
    the version of its first protocol's subscription (prepareAssignment)."""
    if not member.classic.protocols:
        raise ValueError(f"member {member.member_id} has no classic protocol")
    version = G.consumer_protocol_version(member.classic.protocols[0][1])
    return G.consumer_assignment_bytes(_by_name(member.assigned, metadata), version)


def owned_of(subscription: dict, metadata: TopicImage) -> list[dict]:
    """A classic member's owned partitions (ConsumerProtocolSubscription v1+) as
    a heartbeat lists them, by topic id; unknown topics are left out."""
    owned = []
    for item in subscription.get("owned_partitions") or ():
        found = metadata.lookup(item["topic"])
        if found is not None:
            owned.append({"topic_id": found[0], "partitions": list(item["partitions"])})
    return owned
