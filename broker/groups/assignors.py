"""The server-side partition assignors of the consumer group protocol (KIP-848):
``uniform`` and ``range``, as Apache Kafka 4.4's ``UniformAssignor`` and
``RangeAssignor`` compute them.  Pure: no I/O.

``assign(name, members, topics)`` takes every member's subscription (the ids of
the subscribed topics that exist) and its current target assignment, and
returns the new target assignment of every member.

What the output depends on, and how this module pins it down
------------------------------------------------------------
``range`` sorts its members (static ones by instance id first, then the others
by member id) and ignores the current assignment: its output depends on nothing
else.  ``uniform`` is sticky, and Kafka's choices there follow the iteration
order of Java hash tables:

* the member order: ``GroupSpec.memberIds()`` is the key set of the
  ``HashMap<String, ...>`` that ``TargetAssignmentBuilder.build`` fills with a
  ``put`` per member.  It decides which members get a partition above the
  minimum quota (homogeneous) and breaks every tie between equally loaded
  members (heterogeneous).  Here the map is filled in the iteration order of
  ``members``.
* the topic order (homogeneous only): ``UniformHomogeneousAssignmentBuilder``
  lists the unassigned partitions topic by topic in the order of a
  ``HashSet<Uuid>`` copied from the member's ``TopicIds``, which itself follows
  the member's ``HashSet<String>`` of subscribed names
  (``ConsumerGroupMember.Builder.setSubscribedTopicNames``).  Here the names
  are put in that set in Java's ``String.compareTo`` order (Kafka: the order
  the client listed them in, which only matters between names sharing a
  bucket; and it sizes the copy by the count of subscribed names, nonexistent
  topics included; a regular expression subscription iterates otherwise).
* the order of a member's current assignment (homogeneous only): a member
  holding more than its quota keeps the first partitions met while iterating
  its ``Map<Uuid, Set<Integer>>`` and gives up the rest.  Here that map is the
  one Kafka rebuilds from a ``ConsumerGroupTargetAssignmentMember`` record
  (``Assignment.fromRecord``: a default ``HashMap`` and one
  ``HashSet<Integer>`` copy per topic) listing topics in ``Uuid.compareTo``
  order and partitions ascending.  A live Kafka iterates the map its assignor
  returned last time, whose table size depends on its history: after a reload
  from the log Kafka itself iterates it differently.

Those orders are emulated exactly: bucket index, insertion order within a
bucket, resizes, and red-black tree bins (``HashMap.TreeNode``: a bucket of 9+
keys, e.g. partitions 64 apart) with the way they relink their nodes.  The
``HashSet(Collection)`` copy constructor sized its table differently before
Java 19 (``jdk`` selects which; Kafka's reference here runs Java 17).

``tests/reference/test_differential_assignors.py`` runs Kafka 4.4's own
assignors on the same inputs, built as described above, and compares.
"""

from __future__ import annotations

import codecs
import math
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kcoord.broker.groups.placement import java_string_hashcode

ASSIGNORS = ("uniform", "range")
DEFAULT_JDK = 17  # the Java feature release whose HashSet copy constructor is modelled

Assignment = dict[uuid.UUID, frozenset[int]]


class PartitionAssignorError(Exception):
    """Kafka's ``PartitionAssignorException``: a member subscribes to a topic that
    does not exist, or the assignor could not place every partition."""


@dataclass(frozen=True)
class MemberSpec:
    """One member as the assignor sees it (Kafka's ``MemberSubscriptionAndAssignmentImpl``)."""

    subscribed: frozenset[uuid.UUID]  # ids of the subscribed topics that exist
    # The member's current *target* assignment: what stickiness preserves.
    assigned: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    instance_id: str | None = None  # static membership: ``range`` ranks by it
    rack_id: str | None = None  # carried, unused: neither assignor is rack-aware in 4.4


def assign(name: str, members: Mapping[str, MemberSpec],
           topics: Mapping[uuid.UUID, tuple[str, int]], *,
           homogeneous: bool | None = None,
           jdk: int = DEFAULT_JDK) -> dict[str, Assignment]:
    """The new target assignment of every member (``{}`` for a member given nothing).

    ``topics`` maps a topic id to its name and partition count.  ``homogeneous``
    is Kafka's ``SubscriptionType``; by default every member subscribing to the
    same topics.  Kafka decides it on the subscribed *names*, nonexistent topics
    included (``ModernGroup.subscriptionType``): a caller knowing that two
    members' names differ only by topics that do not exist passes ``False``.
    ``jdk`` is the Java feature release Kafka runs on, which sizes some of the
    hash tables whose order the output follows (19+ differs from 17).  An
    unknown ``name`` raises KeyError.

    Preconditions, as in Kafka: the current assignments are disjoint.  A
    partition at or past its topic's partition count (which Kafka never
    produces: partitions are only ever added) is dropped first.
    """
    builder = _BUILDERS[name]
    if not members:
        return {}
    for member_id, spec in members.items():
        for topic_id in spec.subscribed:
            if topic_id not in topics:
                raise PartitionAssignorError(
                    f"Member {member_id} is subscribed to topic {topic_id} which doesn't "
                    "exist in the topic metadata.")
    if homogeneous is None:
        first = next(iter(members.values())).subscribed
        homogeneous = all(spec.subscribed == first for spec in members.values())
    order = _member_order(members)
    current = {m: _current_assignment(members[m].assigned, topics) for m in order}
    result = builder(order, members, current, topics, homogeneous, jdk)
    return {m: {t: frozenset(ps) for t, ps in result[m].items()} for m in members}


# == uniform ==========================================================================

def _uniform(order: list[str], members: Mapping[str, MemberSpec],
             current: dict[str, dict[uuid.UUID, frozenset[int]]],
             topics: Mapping[uuid.UUID, tuple[str, int]], homogeneous: bool,
             jdk: int) -> dict[str, dict[uuid.UUID, set[int]]]:
    """``UniformAssignor.assign``: one builder or the other, by subscription type."""
    if homogeneous:
        return _uniform_homogeneous(order, members, current, topics, jdk)
    return _UniformHeterogeneous(order, members, current, topics).build()


def _uniform_homogeneous(order, members, current, topics, jdk):
    """``UniformHomogeneousAssignmentBuilder`` (Kafka 4.4).

    Every member gets ``total // M`` partitions and the first ``total % M``
    members (in member order) one more, except that a member which is still
    short of its quota after keeping what it had gives its extra partition up
    to a later member while enough later members remain (4.4's change: a member
    already at the higher quota keeps it).  Each member keeps its current
    partitions up to its quota; the surplus and the partitions nobody holds go,
    topic by topic, to the members short of their quota, in member order.

    O(M + P + A) for M members, P subscribed partitions, A currently assigned
    ones, plus O(n) per emulated Java hash table (one of n = M member ids, and
    one per member that must give partitions up).
    """
    topic_order = _subscribed_topic_order(members[order[0]].subscribed, topics, jdk)
    if not topic_order:
        return {m: {} for m in order}
    subscribed = set(topic_order)
    held: dict[uuid.UUID, set[int]] = {}  # GroupSpec.isPartitionAssigned
    for assignment in current.values():
        for topic_id, partitions in assignment.items():
            held.setdefault(topic_id, set()).update(partitions)
    unassigned: list[tuple[uuid.UUID, int]] = []
    total = 0
    for topic_id in topic_order:
        count = topics[topic_id][1]
        taken = held.get(topic_id, ())
        unassigned.extend((topic_id, p) for p in range(count) if p not in taken)
        total += count

    member_count = len(order)
    minimum, extra = divmod(total, member_count)
    target: dict[str, dict[uuid.UUID, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    # maybeRevokePartitions
    for index, member_id in enumerate(order):
        quota, has_extra = minimum, False
        if extra > 0:
            quota, has_extra = quota + 1, True
        kept: dict[uuid.UUID, set[int]] = {}
        assignment = current[member_id]
        if sum(len(ps) for t, ps in assignment.items() if t in subscribed) <= quota:
            # Nothing to give up: the order of the current assignment is moot.
            for topic_id, partitions in assignment.items():
                if topic_id in subscribed:
                    kept[topic_id] = set(partitions)
                    quota -= len(partitions)
        else:
            for topic_id, partitions in _assignment_order(assignment, jdk):
                if topic_id not in subscribed:
                    continue  # no longer subscribed (or deleted): dropped
                if len(partitions) <= quota:
                    kept[topic_id] = set(partitions)
                    quota -= len(partitions)
                    continue
                keep = set()
                for partition in partitions:  # in the HashSet<Integer>'s order
                    if quota > 0:
                        quota -= 1
                        keep.add(partition)
                    else:
                        unassigned.append((topic_id, partition))
                if keep:
                    kept[topic_id] = keep
        if quota > 0 and has_extra and member_count - index > extra:
            quota, has_extra = quota - 1, False
        if quota > 0:
            unfilled.append((member_id, quota))
        if has_extra:
            extra -= 1
        target[member_id] = kept
    # assignRemainingPartitions
    next_index = 0
    for member_id, quota in unfilled:
        kept = target[member_id]
        for topic_id, partition in unassigned[next_index:next_index + quota]:
            kept.setdefault(topic_id, set()).add(partition)
        next_index = min(next_index + quota, len(unassigned))
    if next_index < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return target


class _UniformHeterogeneous:
    """``UniformHeterogeneousAssignmentBuilder``: members keep what they still
    subscribe to; the unassigned partitions go, topic by topic (most partitions
    per subscriber first), to the least loaded subscribers; then partitions move
    from the most to the least loaded subscribers of each topic until every
    topic is balanced, looping over the topics at most 16 times.

    Members are numbered in member order, and a tie between equally loaded
    members goes to the lower number; topics tie-break by ``Uuid.compareTo``.
    O(T * M log M + P log P) per balancing pass (T topics, M members, P
    partitions), at most 16 passes, as in Kafka.
    """

    MAX_ITERATION_COUNT = 16

    def __init__(self, order, members, current, topics):
        self.member_ids = order
        self.current = current
        self.counts = {t: topics[t][1] for spec in members.values() for t in spec.subscribed}
        self.subscriptions = [members[m].subscribed for m in order]
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        for index, subscription in enumerate(self.subscriptions):
            for topic_id in subscription:
                self.subscribers.setdefault(topic_id, []).append(index)
        self.sizes = [0] * len(order)
        self.owners = {t: [-1] * n for t, n in self.counts.items()}
        self.target: list[dict[uuid.UUID, set[int]]] = []

    def topic_sort_key(self, topic_id: uuid.UUID):
        """``topicComparator``: partitions per subscriber descending, then
        subscriber count ascending, then topic id ascending."""
        subscribers = len(self.subscribers[topic_id])
        return (-(self.counts[topic_id] / subscribers), subscribers, _uuid_order(topic_id))

    def build(self) -> dict[str, dict[uuid.UUID, set[int]]]:
        if not self.counts:
            return {m: {} for m in self.member_ids}
        # maybeRevokePartitions
        for index, member_id in enumerate(self.member_ids):
            kept = {}
            for topic_id, partitions in self.current[member_id].items():
                if topic_id in self.subscriptions[index]:
                    kept[topic_id] = set(partitions)
                    self.sizes[index] += len(partitions)
                    owners = self.owners[topic_id]
                    for partition in partitions:
                        owners[partition] = index
            self.target.append(kept)
        # computeUnassignedPartitions, assignRemainingPartitions
        unassigned = {}
        for topic_id, owners in self.owners.items():
            free = [p for p, owner in enumerate(owners) if owner == -1]
            if free:
                unassigned[topic_id] = free
        balancer = _MemberAssignmentBalancer(self.sizes)
        for topic_id in sorted(unassigned, key=self.topic_sort_key):
            balancer.initialize(self.subscribers[topic_id])
            for partition in unassigned[topic_id]:
                self.move(topic_id, partition, balancer.next_least_loaded())
        # balance
        movable = [t for t in self.counts if len(self.subscribers[t]) >= 2]
        if movable:
            self.balance_topics(sorted(movable, key=self.topic_sort_key), balancer)
        return dict(zip(self.member_ids, self.target))

    def balance_topics(self, topic_ids: list[uuid.UUID], balancer) -> None:
        """Loop over the topics until a whole lap moved nothing (or 16 laps)."""
        last_rebalanced = -1
        for _ in range(self.MAX_ITERATION_COUNT):
            for index, topic_id in enumerate(topic_ids):
                if index == last_rebalanced:
                    return
                if self.balance_topic(topic_id, balancer) > 0 or last_rebalanced == -1:
                    last_rebalanced = index

    def balance_topic(self, topic_id: uuid.UUID, balancer) -> int:
        """Move the topic's partitions from its most to its least loaded subscribers;
        each gives up its highest-numbered partition of the topic first."""
        if balancer.initialize(self.subscribers[topic_id]) <= 1:
            return 0
        owners = self.owners[topic_id]
        # Partitions grouped by owner, each group ascending (a stable sort of 0..n-1).
        partitions = sorted(range(len(owners)), key=owners.__getitem__)
        start: dict[int, int] = {}
        end: dict[int, int] = {}  # exclusive
        for position, partition in enumerate(partitions):
            owner = owners[partition]
            start.setdefault(owner, position)
            end[owner] = position + 1
        moved = 0
        while not balancer.is_balanced():
            while True:
                most = balancer.next_most_loaded()
                if most == -1:
                    return moved
                if end.get(most, 0) - start.get(most, 0) <= 0:
                    balancer.exclude_most_loaded()
                    continue
                break
            end[most] -= 1
            partition = partitions[end[most]]
            least = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self.move(topic_id, partition, least)
            moved += 1
        return moved

    def move(self, topic_id: uuid.UUID, partition: int, index: int) -> None:
        """``assignPartition``: give a partition to a member, taking it from its owner."""
        owners = self.owners[topic_id]
        previous = owners[partition]
        if previous != -1:
            held = self.target[previous].get(topic_id)
            if held is not None:
                held.discard(partition)
                if not held:
                    del self.target[previous][topic_id]
            self.sizes[previous] -= 1
        self.target[index].setdefault(topic_id, set()).add(partition)
        owners[partition] = index
        self.sizes[index] += 1


class _MemberAssignmentBalancer:
    """``UniformHeterogeneousAssignmentBuilder.MemberAssignmentBalancer``.

    The subscribers of one topic sorted by load (ties by member number), with a
    range of least loaded members at the front that receive partitions in turn
    and widens as their load reaches the next members', and a range of most
    loaded members at the back that give partitions up in turn and widens the
    same way.  ``sizes`` is the builder's live array of member loads.
    """

    def __init__(self, sizes: list[int]):
        self.sizes = sizes
        self.members: list[int] = []

    def initialize(self, members: list[int]) -> int:
        """Start over with these members (ascending numbers); the spread of their loads."""
        sizes = self.sizes
        self.members = ranked = sorted(members, key=sizes.__getitem__)  # stable: ties by number
        self.least_end = 0  # [0, least_end): the least loaded range
        self.least_count = sizes[ranked[0]] - 1
        self.next_least = 0
        self.most_start = self.most_end = len(ranked)  # [most_start, most_end): most loaded
        self.most_count = sizes[ranked[-1]] + 1
        self.next_most = len(ranked) - 1
        return sizes[ranked[-1]] - sizes[ranked[0]]

    def next_least_loaded(self) -> int:
        ranked, sizes = self.members, self.sizes
        if self.next_least >= self.least_end:
            # Every member of the range got one more: raise its level and widen it.
            self.least_count += 1
            while (self.least_end < len(ranked)
                   and sizes[ranked[self.least_end]] == self.least_count):
                self.least_end += 1
            self.next_least = 0
        member = ranked[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        """The next member to give a partition up, or -1 when none can."""
        ranked, sizes = self.members, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # Emptied by exclusions: restart from the next member's load so that
                # the range surely widens below.
                self.most_count = sizes[ranked[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and sizes[ranked[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = ranked[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drop the member last returned by next_most_loaded (it holds nothing of the
        topic) by swapping it to the end of the most loaded range and shrinking it."""
        ranked = self.members
        position = self.next_most + 1
        ranked[position], ranked[self.most_end - 1] = ranked[self.most_end - 1], ranked[position]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


# == range ============================================================================

def _range(order, members, current, topics, homogeneous, jdk):
    """``RangeAssignor``: members ranked (static members by instance id first, then
    the others by member id, Java ``String.compareTo``); each topic's partitions
    cut into consecutive ranges, one per subscriber in rank order, the first
    ``count % subscribers`` ranges one longer.  So members subscribing to the same
    topics get the same partition numbers of each (co-partitioning).  Not sticky:
    the current assignment is ignored.  O(M log M + M * T)."""
    ranked = sorted(order, key=lambda m: _range_rank(m, members[m].instance_id))  # stable
    if homogeneous:
        topic_ids = list(members[ranked[0]].subscribed)
        subscribers = {t: len(ranked) for t in topic_ids}
        subscriptions = {m: topic_ids for m in ranked}
    else:
        subscribers = {}
        for m in ranked:
            for topic_id in members[m].subscribed:
                subscribers[topic_id] = subscribers.get(topic_id, 0) + 1
        subscriptions = {m: members[m].subscribed for m in ranked}
    next_start = dict.fromkeys(subscribers, 0)
    extra = {t: topics[t][1] % n for t, n in subscribers.items()}
    target = {}
    for member_id in ranked:
        assignment = {}
        for topic_id in subscriptions[member_id]:
            count = topics[topic_id][1]
            quota = count // subscribers[topic_id]
            if extra[topic_id] > 0:
                quota += 1
                extra[topic_id] -= 1
            start = next_start[topic_id]
            end = next_start[topic_id] = min(start + quota, count)
            if start < end:
                assignment[topic_id] = set(range(start, end))
        target[member_id] = assignment
    return target


def _range_rank(member_id: str, instance_id: str | None) -> tuple[int, bytes]:
    if instance_id is not None:
        return (0, _java_string_order(instance_id))
    return (1, _java_string_order(member_id))


_BUILDERS: dict[str, Callable[..., dict[str, dict[uuid.UUID, set[int]]]]] = {
    "uniform": _uniform,
    "range": _range,
}


# == the inputs as Kafka holds them ===================================================

def _current_assignment(assigned: Mapping[uuid.UUID, Iterable[int]],
                        topics: Mapping[uuid.UUID, tuple[str, int]]) -> dict[uuid.UUID, frozenset[int]]:
    """A member's current assignment without empty topics and without partitions
    past the topic's count (Kafka never has either).  Deleted topics stay: they
    still take a place in the map whose order the homogeneous builder follows."""
    out = {}
    for topic_id, partitions in assigned.items():
        if topic_id in topics:
            count = topics[topic_id][1]
            partitions = frozenset(p for p in partitions if 0 <= p < count)
        else:
            partitions = frozenset(partitions)
        if partitions:
            out[topic_id] = partitions
    return out


def _member_order(members: Mapping[str, MemberSpec]) -> list[str]:
    """``GroupSpec.memberIds()``: a default ``HashMap<String, ...>`` filled in
    ``members``' order."""
    ids = list(members)
    hashes = [_spread(java_string_hashcode(m) & _MASK32) for m in ids]
    positions = _java_table_order(hashes, lambda i: _java_string_order(ids[i]), 16)
    return [ids[i] for i in positions]


def _subscribed_topic_order(subscribed: frozenset[uuid.UUID],
                            topics: Mapping[uuid.UUID, tuple[str, int]], jdk: int) -> list[uuid.UUID]:
    """The iteration order of ``new HashSet<>(topicIds)`` in the homogeneous
    builder, ``topicIds`` following a ``HashSet<String>`` copy of the subscribed
    names listed in ``String.compareTo`` order."""
    # Topic ids carried along with their names (which are unique in a cluster).
    by_name = sorted(subscribed, key=lambda t: (_java_string_order(topics[t][0]), _uuid_order(t)))
    name_hashes = [_spread(java_string_hashcode(topics[t][0]) & _MASK32) for t in by_name]
    capacity = _copy_capacity(len(by_name), jdk)
    ids = [by_name[i] for i in _java_table_order(
        name_hashes, lambda i: (_java_string_order(topics[by_name[i]][0]), _uuid_order(by_name[i])),
        capacity)]
    # TopicIds.size() is the number of names: the same here.
    id_hashes = [_spread(_uuid_hash(t)) for t in ids]
    return [ids[i] for i in _java_table_order(id_hashes, lambda i: _uuid_order(ids[i]), capacity)]


def _assignment_order(assignment: dict[uuid.UUID, frozenset[int]], jdk: int):
    """(topic, partitions) in the iteration order of the ``Map<Uuid, Set<Integer>>``
    that ``Assignment.fromRecord`` builds from a record listing the topics in
    ``Uuid.compareTo`` order and each topic's partitions ascending."""
    topic_ids = sorted(assignment, key=_uuid_order)
    hashes = [_spread(_uuid_hash(t)) for t in topic_ids]
    for i in _java_table_order(hashes, lambda i: _uuid_order(topic_ids[i]), 16):
        partitions = sorted(assignment[topic_ids[i]])
        partition_hashes = [_spread(p & _MASK32) for p in partitions]  # Integer.hashCode: the value
        positions = _java_table_order(partition_hashes, partitions.__getitem__,
                                      _copy_capacity(len(partitions), jdk))
        yield topic_ids[i], [partitions[p] for p in positions]


# == Java's hashing and ordering ======================================================

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
TREEIFY_THRESHOLD = 8  # HashMap: a list bin that reaches 9 nodes becomes a tree...
MIN_TREEIFY_CAPACITY = 64  # ...if the table has this many bins (else the table doubles)
UNTREEIFY_THRESHOLD = 6  # a tree bin split to this many nodes or fewer becomes a list
# Looked up once, as broker.groups.placement does.
_utf16_be = codecs.lookup("utf-16-be").encode


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) & 1 else value


def _spread(h: int) -> int:
    """``HashMap.hash``: the hash code's high half folded into the low (unsigned 32 bits)."""
    return h ^ (h >> 16)


def _uuid_hash(topic_id: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode`` (unsigned 32 bits)."""
    x = (topic_id.int >> 64) ^ (topic_id.int & _MASK64)
    return ((x >> 32) ^ x) & _MASK32


def _uuid_order(topic_id: uuid.UUID) -> tuple[int, int]:
    """Kafka's ``Uuid.compareTo``: the two halves compared as signed longs."""
    return (_signed(topic_id.int >> 64, 64), _signed(topic_id.int & _MASK64, 64))


def _java_string_order(text: str) -> bytes:
    """Java's ``String.compareTo``: by UTF-16 code unit (not by code point)."""
    return _utf16_be(text, "surrogatepass")[0]


def _f32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def _table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the power of two at or above ``capacity`` (at least 1)."""
    return 1 if capacity <= 1 else min(1 << (capacity - 1).bit_length(), 1 << 30)


def _copy_capacity(size: int, jdk: int) -> int:
    """The table size of ``new HashSet<>(collection)`` holding ``size`` elements."""
    if jdk >= 19:  # HashMap.newHashMap(Math.max(c.size(), 12))
        return _table_size_for(math.ceil(max(size, 12) / 0.75))
    # new HashMap<>(Math.max((int) (c.size() / .75f) + 1, 16)), in float arithmetic
    return _table_size_for(max(int(_f32(_f32(size) / 0.75)) + 1, 16))


def _java_table_order(hashes: Sequence[int], natural: Callable[[int], Any],
                      capacity: int) -> list[int]:
    """The iteration order of a ``java.util.HashMap`` (or ``HashSet``) into which keys
    0..n-1, with these spread hashes, were put in turn, its table first allocated
    with ``capacity`` bins.  ``natural(i)`` orders keys of equal hash as their
    ``compareTo`` does.

    Iteration walks the bins in index order and each bin along its ``next``
    links: a list bin in insertion order, a tree bin root first and then as
    ``putTreeVal`` linked each node (right after its parent in the tree).  A
    resize splits every bin in two, keeping the relative order.  O(n) unless
    bins turn into trees (only when 9+ keys share a bin).
    """
    bins: list[list[int]] = [[] for _ in range(capacity)]
    trees: dict[int, _TreeBin] = {}
    size = 0

    def key(i: int):
        return (_signed(hashes[i], 32), natural(i))

    for entry, h in enumerate(hashes):
        index = h & (capacity - 1)
        tree = trees.get(index)
        if tree is not None:
            tree.put(entry)
        else:
            chain = bins[index]
            chain.append(entry)
            if len(chain) > TREEIFY_THRESHOLD:  # HashMap.treeifyBin
                if capacity < MIN_TREEIFY_CAPACITY:
                    bins, trees, capacity = _resize(bins, trees, hashes, capacity, key)
                else:
                    trees[index] = _TreeBin(chain, key)
        size += 1
        if size > capacity * 3 // 4:  # the load factor's threshold
            bins, trees, capacity = _resize(bins, trees, hashes, capacity, key)
    return [entry for chain in bins for entry in chain]


def _resize(bins, trees, hashes, capacity, key):
    """``HashMap.resize``: twice the bins; each bin splits into the one at its index
    and the one ``capacity`` above, both keeping their relative order
    (``TreeNode.split``: a half of 6 nodes or fewer becomes a list again, a half
    left whole keeps its tree, the other halves are treeified anew)."""
    grown: list[list[int]] = [[] for _ in range(capacity * 2)]
    grown_trees: dict[int, _TreeBin] = {}
    for index, chain in enumerate(bins):
        if not chain:
            continue
        low = [e for e in chain if not hashes[e] & capacity]
        high = [e for e in chain if hashes[e] & capacity]
        tree = trees.get(index)
        for at, half, other in ((index, low, high), (index + capacity, high, low)):
            if not half:
                continue
            grown[at] = half
            if tree is None or len(half) <= UNTREEIFY_THRESHOLD:
                continue
            if other:
                grown_trees[at] = _TreeBin(half, key)
            else:
                tree.order = half
                grown_trees[at] = tree
    return grown, grown_trees, capacity * 2


class _TreeBin:
    """A bin of ``HashMap.TreeNode``s: a red-black tree ordered by (signed hash,
    ``compareTo``), whose nodes are also linked in an order of their own, the
    order in which the map iterates them.  ``order`` is that linked list (the
    bin's list in ``_java_table_order``, changed in place)."""

    def __init__(self, order: list[int], key: Callable[[int], Any]):
        # TreeNode.treeify: insert the nodes in their linked order, then move the root
        # to the front of the links.
        self.order = order
        self.key = key
        self.root: int | None = None
        self.parent: dict[int, int | None] = {}
        self.left: dict[int, int | None] = {}
        self.right: dict[int, int | None] = {}
        self.red: dict[int, bool] = {}
        for entry in list(order):
            self._insert(entry)
        self._root_to_front()

    def put(self, entry: int) -> None:
        """``TreeNode.putTreeVal``: the new node is linked right after its parent."""
        parent = self._insert(entry)
        self.order.insert(self.order.index(parent) + 1, entry)
        self._root_to_front()

    def _root_to_front(self) -> None:
        if self.order[0] != self.root:
            self.order.remove(self.root)
            self.order.insert(0, self.root)

    def _insert(self, x: int) -> int | None:
        """Binary-search-tree insertion then the red-black fix-up; x's parent at insertion."""
        self.left[x] = self.right[x] = None
        if self.root is None:
            self.parent[x], self.red[x], self.root = None, False, x
            return None
        kx, p = self.key(x), self.root
        while True:
            side = self.left if kx < self.key(p) else self.right
            if side[p] is None:
                side[p] = x
                break
            p = side[p]
        self.parent[x] = p
        self._fix_after_insert(x)
        return p

    def _fix_after_insert(self, x: int) -> None:
        parent, left, right, red = self.parent, self.left, self.right, self.red
        red[x] = True
        while True:
            xp = parent[x]
            if xp is None:
                red[x] = False
                return
            xpp = parent[xp]
            if not red[xp] or xpp is None:
                return
            if xp == left[xpp]:
                uncle = right[xpp]
                if uncle is not None and red[uncle]:
                    red[uncle] = red[xp] = False
                    red[xpp] = True
                    x = xpp
                    continue
                if x == right[xp]:
                    x = xp
                    self._rotate_left(x)
                    xp = parent[x]
                    xpp = parent[xp]
                red[xp], red[xpp] = False, True
                self._rotate_right(xpp)
            else:
                uncle = left[xpp]
                if uncle is not None and red[uncle]:
                    red[uncle] = red[xp] = False
                    red[xpp] = True
                    x = xpp
                    continue
                if x == left[xp]:
                    x = xp
                    self._rotate_right(x)
                    xp = parent[x]
                    xpp = parent[xp]
                red[xp], red[xpp] = False, True
                self._rotate_left(xpp)

    def _rotate_left(self, p: int) -> None:
        self._rotate(p, self.right, self.left)

    def _rotate_right(self, p: int) -> None:
        self._rotate(p, self.left, self.right)

    def _rotate(self, p: int, down: dict, up: dict) -> None:
        """Lift p's child on the ``down`` side into p's place (p goes to its ``up`` side)."""
        parent = self.parent
        r = down[p]
        down[p] = up[r]
        if up[r] is not None:
            parent[up[r]] = p
        pp = parent[r] = parent[p]
        if pp is None:
            self.root = r
            self.red[r] = False
        elif self.left[pp] == p:
            self.left[pp] = r
        else:
            self.right[pp] = r
        up[r] = p
        parent[p] = r
