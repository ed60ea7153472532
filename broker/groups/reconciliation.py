"""A consumer-group member's next step towards its target assignment (Kafka's
``CurrentAssignmentBuilder``): partitions it must give up are revoked first and
it keeps its epoch until it no longer reports them; it gets a new partition
only once no other member holds it.  Pure functions of the member, its target
and who holds what.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kcoord.broker.groups.consumer_group import Assignment, ConsumerMember, MemberState


class FencedMember(Exception):
    """The member cannot go on from where it is: it must rejoin (FENCED_MEMBER_EPOCH)."""


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment,
              subscribed: frozenset[uuid.UUID],
              partition_epoch: Callable[[uuid.UUID, int], int],
              owned: list[dict] | None, subscription_changed: bool = False) -> ConsumerMember:
    """The member's next step towards its target (CurrentAssignmentBuilder.build):
    partitions it must give up are revoked first and it keeps its epoch until it
    no longer reports them; it gets new partitions only once no other member
    holds them."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(member, member.member_epoch, target_epoch, target,
                                    subscribed, partition_epoch, owned)
        if subscription_changed:
            return _unsubscribed_revoked(member, subscribed, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return _unsubscribed_revoked(member, subscribed, owned) if subscription_changed \
                else member
        return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed,
                                partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed,
                                partition_epoch, owned)
    # UNKNOWN: a state from a newer coordinator; the member starts again from nothing
    if owned is None or owned:
        raise FencedMember("The consumer group member is in a unknown state. The member "
                           "must abandon all its partitions and rejoin.")
    return _next_assignment(member, target_epoch, target_epoch, target, subscribed,
                            partition_epoch, owned)


def _owns_any(owned: list[dict] | None, partitions: Assignment) -> bool:
    """Whether the member still reports one of ``partitions`` (a heartbeat without
    its owned partitions counts as still owning them)."""
    if owned is None:
        return True
    for item in owned:
        held = partitions.get(item["topic_id"])
        if held and any(p in held for p in item["partitions"]):
            return True
    return False


def _next_assignment(member: ConsumerMember, member_epoch: int, target_epoch: int,
                     target: Assignment, subscribed: frozenset[uuid.UUID], partition_epoch,
                     owned) -> ConsumerMember:
    """CurrentAssignmentBuilder.computeNextAssignment."""
    unreleased = False
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id in {*target, *member.assigned}:
        want = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        have = member.assigned.get(topic_id, frozenset())
        mine = member.pending_revocation.get(topic_id, frozenset())
        keep = have & want
        revoke = have - keep
        new = want - keep
        free = frozenset(p for p in new if partition_epoch(topic_id, p) == -1 or p in mine)
        if free != new:
            unreleased = True
        if keep:
            assigned[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if free:
            pending[topic_id] = free
    epochs = {k: e for k, e in member.epochs.items()
              if k[1] in assigned.get(k[0], ()) or k[1] in revoking.get(k[0], ())}
    if revoking and _owns_any(owned, revoking):
        return _moved(member, member_epoch, MemberState.UNREVOKED_PARTITIONS, assigned,
                      revoking, epochs)
    epochs = {k: e for k, e in epochs.items() if k[1] in assigned.get(k[0], ())}
    if pending:
        for topic_id, parts in pending.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
            for p in parts:
                epochs[(topic_id, p)] = target_epoch
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _moved(member, target_epoch, state, assigned, {}, epochs)


def _unsubscribed_revoked(member: ConsumerMember, subscribed: frozenset[uuid.UUID],
                          owned) -> ConsumerMember:
    """CurrentAssignmentBuilder.updateCurrentAssignment: the subscription changed
    and the epoch did not; the topics left are revoked at once."""
    if not subscribed and not member.pending_revocation:
        assigned: dict = {}
        pending = dict(member.assigned)
    else:
        assigned = {t: ps for t, ps in member.assigned.items() if t in subscribed}
        pending = dict(member.pending_revocation)
        for t, ps in member.assigned.items():
            if t not in subscribed:
                pending[t] = pending.get(t, frozenset()) | ps
    if assigned == member.assigned:
        return member
    if pending and _owns_any(owned, pending):
        return _moved(member, member.member_epoch, MemberState.UNREVOKED_PARTITIONS, assigned,
                      pending, member.epochs)
    return _moved(member, member.member_epoch, member.state, assigned,
                  member.pending_revocation, member.epochs)


def _moved(member: ConsumerMember, epoch: int, state: MemberState, assigned: Assignment,
           revoking: Assignment, epochs) -> ConsumerMember:
    """ConsumerGroupMember.Builder.updateMemberEpoch: the previous epoch is the one
    the member had (the same one when it stays)."""
    return member.with_(member_epoch=epoch, previous_member_epoch=member.member_epoch,
                        state=state, assigned=assigned, pending_revocation=revoking,
                        epochs=epochs)


def is_subset(owned: list[dict] | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    for item in owned:
        held = assigned.get(item["topic_id"], frozenset())
        if any(p not in held for p in item["partitions"]):
            return False
    return True


def epochs_of_assigned(member: ConsumerMember) -> dict:
    return {k: e for k, e in member.epochs.items() if k[1] in member.assigned.get(k[0], ())}


def reconcile_reason(member: ConsumerMember) -> str:
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        return "it must revoke partitions before it moves to the new epoch"
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return "some of its target partitions are still held by other members"
    return "it reached its target assignment"
