"""The server-side assignors ``uniform`` and ``range`` (broker/groups/assignors.py):
concrete outcomes a group's members would notice, and properties over random
groups.  Kafka 4.4 computes the same outputs (tests/reference/
test_differential_assignors.py checks that against Kafka's own classes).

Topic ids here are small integers and member ids short strings, so Java's hash
order is the natural one (member "a" before "b", topic t1 before t2) unless a
test says otherwise.
"""

from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.broker.groups.assignors import (
    ASSIGNORS,
    MemberSpec,
    PartitionAssignorError,
    assign,
)

T1, T2, T3, T4 = (uuid.UUID(int=n) for n in range(1, 5))
TOPICS = {T1: ("t1", 6), T2: ("t2", 3), T3: ("t3", 0), T4: ("t4", 7)}


def subs(*topic_ids: uuid.UUID) -> frozenset[uuid.UUID]:
    return frozenset(topic_ids)


def parts(*partitions: int) -> frozenset[int]:
    return frozenset(partitions)


def member(*topic_ids: uuid.UUID, assigned=None, instance_id=None) -> MemberSpec:
    return MemberSpec(frozenset(topic_ids), assigned or {}, instance_id=instance_id)


# == both =============================================================================

def test_the_assignors_kafka_offers():
    assert ASSIGNORS == ("uniform", "range")


def test_an_unknown_assignor_is_a_key_error():
    with pytest.raises(KeyError):
        assign("sticky", {"a": member(T1)}, TOPICS)


@pytest.mark.parametrize("name", ASSIGNORS)
def test_an_empty_group_gets_nothing(name):
    assert assign(name, {}, TOPICS) == {}


@pytest.mark.parametrize("name", ASSIGNORS)
def test_members_subscribed_to_nothing_get_an_empty_assignment(name):
    assert assign(name, {"a": member(), "b": member()}, TOPICS) == {"a": {}, "b": {}}
    # beside a member that subscribes: it gets everything, t1 and t4 stay unassigned
    got = assign(name, {"a": member(), "b": member(T2)}, TOPICS)
    assert got == {"a": {}, "b": {T2: parts(0, 1, 2)}}


@pytest.mark.parametrize("name", ASSIGNORS)
def test_a_topic_without_partitions_assigns_nothing(name):
    got = assign(name, {"a": member(T3), "b": member(T3, T2)}, TOPICS)
    assert got == {"a": {}, "b": {T2: parts(0, 1, 2)}}


@pytest.mark.parametrize("name", ASSIGNORS)
def test_a_subscription_to_a_missing_topic_is_refused(name):
    with pytest.raises(PartitionAssignorError):
        assign(name, {"a": member(uuid.UUID(int=99))}, TOPICS)


# == uniform ==========================================================================

def test_uniform_spreads_partitions_evenly_across_topics():
    got = assign("uniform", {m: member(T1, T2) for m in "abc"}, TOPICS)
    assert got == {"a": {T1: parts(0, 1, 2)}, "b": {T1: parts(3, 4, 5)}, "c": {T2: parts(0, 1, 2)}}


def test_uniform_gives_a_newcomer_only_the_surplus_of_the_others():
    before = {"a": member(T1, assigned={T1: parts(0, 1, 2)}),
              "b": member(T1, assigned={T1: parts(3, 4, 5)})}
    joined = assign("uniform", {**before, "c": member(T1)}, TOPICS)
    # a and b keep their lowest two; their third goes to c
    assert joined == {"a": {T1: parts(0, 1)}, "b": {T1: parts(3, 4)}, "c": {T1: parts(2, 5)}}


def test_uniform_hands_a_leaver_s_partitions_to_the_others():
    current = {"a": member(T1, assigned={T1: parts(0, 1)}),
               "b": member(T1, assigned={T1: parts(3, 4)})}
    # c, holding 2 and 5, has left
    assert assign("uniform", current, TOPICS) == {"a": {T1: parts(0, 1, 2)},
                                                  "b": {T1: parts(3, 4, 5)}}


def test_uniform_leaves_a_member_holding_the_higher_quota_alone():
    """Kafka 4.4: 7 partitions over 3 members is 3+2+2; the extra one belongs to b,
    which holds 3 already, not to a, which comes first (4.0 moved one to a)."""
    current = {"a": member(T4, assigned={T4: parts(0, 1)}),
               "b": member(T4, assigned={T4: parts(2, 3, 4)}),
               "c": member(T4, assigned={T4: parts(5, 6)})}
    assert assign("uniform", current, TOPICS) == {m: dict(s.assigned) for m, s in current.items()}


def test_uniform_gives_the_extra_partitions_of_a_new_group_to_the_last_members():
    got = assign("uniform", {m: member(T4) for m in "abc"}, TOPICS)
    assert got == {"a": {T4: parts(0, 1)}, "b": {T4: parts(2, 3)}, "c": {T4: parts(4, 5, 6)}}


def test_uniform_drops_an_unsubscribed_topic_and_keeps_the_rest():
    current = {"a": member(T2, assigned={T1: parts(0, 1, 2), T2: parts(0)}),
               "b": member(T2, assigned={T1: parts(3, 4, 5), T2: parts(1, 2)})}
    assert assign("uniform", current, TOPICS) == {"a": {T2: parts(0)}, "b": {T2: parts(1, 2)}}


def test_uniform_heterogeneous_balances_members_over_their_own_topics():
    got = assign("uniform", {"a": member(T1), "b": member(T1, T2)}, TOPICS)
    # t2 only b can take; t1 then leans to a: 5 and 4
    assert got == {"a": {T1: parts(0, 1, 2, 3, 5)}, "b": {T1: parts(4), T2: parts(0, 1, 2)}}
    current = {m: member(*spec.subscribed, assigned=got[m])
               for m, spec in {"a": member(T1), "b": member(T1, T2)}.items()}
    joined = assign("uniform", {**current, "c": member(T2)}, TOPICS)
    # c takes two of b's t2 partitions, b takes one t1 partition of a: 4, 3, 2
    assert joined == {"a": {T1: parts(0, 1, 2, 3)}, "b": {T1: parts(4, 5), T2: parts(0)},
                      "c": {T2: parts(1, 2)}}


def test_uniform_heterogeneous_when_kafka_is_told_so():
    """Kafka decides on topic names, nonexistent ones included: members whose
    subscriptions differ only by a missing topic are heterogeneous to it."""
    members = {"a": member(T1, T2), "b": member(T1, T2)}
    assert assign("uniform", members, TOPICS) == {
        "a": {T1: parts(0, 1, 2, 3)}, "b": {T1: parts(4, 5), T2: parts(0, 1, 2)}}
    # the heterogeneous builder deals each topic's partitions out in turn
    assert assign("uniform", members, TOPICS, homogeneous=False) == {
        "a": {T1: parts(0, 2, 4), T2: parts(0, 2)}, "b": {T1: parts(1, 3, 5), T2: parts(1)}}


def test_uniform_member_order_is_java_hash_order():
    """Which member comes first is Java's HashMap order: "Aa" and "BB" share a hash
    code, so there the order the members are given in decides; "a" and "b" do not."""
    colliding = assign("uniform", {"Aa": member(T2), "BB": member(T2)}, TOPICS)
    reversed_ = assign("uniform", {"BB": member(T2), "Aa": member(T2)}, TOPICS)
    assert colliding == {"Aa": {T2: parts(0)}, "BB": {T2: parts(1, 2)}}
    assert reversed_ == {"BB": {T2: parts(0)}, "Aa": {T2: parts(1, 2)}}
    assert assign("uniform", {"b": member(T2), "a": member(T2)}, TOPICS) == \
        assign("uniform", {"a": member(T2), "b": member(T2)}, TOPICS)


def test_uniform_gives_up_partitions_in_java_hash_set_order():
    """a holds 12 partitions, 10 to 21, over its quota of 8: it keeps the first 8 its
    HashSet<Integer> iterates.  Java 17 sizes that set at 32 buckets (ascending
    order); Java 19+ at 16, where 16..21 come before 10..15."""
    topics = {T1: ("t1", 22)}
    current = {"a": member(T1, assigned={T1: frozenset(range(10, 22))}),
               "b": member(T1, assigned={T1: frozenset(range(10))}),
               "c": member(T1)}
    assert assign("uniform", current, topics, jdk=17) == {
        "a": {T1: frozenset(range(10, 18))}, "b": {T1: frozenset(range(7))},
        "c": {T1: parts(7, 8, 9, 18, 19, 20, 21)}}
    assert assign("uniform", current, topics, jdk=21) == {
        "a": {T1: parts(10, 11, 16, 17, 18, 19, 20, 21)}, "b": {T1: frozenset(range(7))},
        "c": {T1: parts(7, 8, 9, 12, 13, 14, 15)}}


def test_uniform_follows_a_tree_bin_of_partitions():
    """Partitions 0, 64, ..., 704 all land in one bucket: Java turns it into a
    red-black tree, which iterates from its root (192) first."""
    topics = {T1: ("t1", 768)}
    members = {"a": member(T1, assigned={T1: frozenset(range(0, 768, 64))})}
    members.update({f"m{i}": member(T1) for i in range(1, 256)})
    got = assign("uniform", members, topics)
    assert got["a"] == {T1: parts(0, 64, 192)}  # quota 3
    assert sorted(len(a[T1]) for a in got.values()) == [3] * 256


# == range ============================================================================

def test_range_co_partitions_topics():
    topics = {T1: ("t1", 7), T2: ("t2", 7)}
    got = assign("range", {m: member(T1, T2) for m in "cab"}, topics)
    assert got == {"c": {T1: parts(5, 6), T2: parts(5, 6)},
                   "a": {T1: parts(0, 1, 2), T2: parts(0, 1, 2)},
                   "b": {T1: parts(3, 4), T2: parts(3, 4)}}


def test_range_ranks_static_members_first_by_instance_id():
    got = assign("range", {"z": member(T4, instance_id="i2"), "a": member(T4),
                           "y": member(T4, instance_id="i1"), "b": member(T4)}, TOPICS)
    assert got == {"y": {T4: parts(0, 1)}, "z": {T4: parts(2, 3)},
                   "a": {T4: parts(4, 5)}, "b": {T4: parts(6)}}


def test_range_ranks_member_ids_by_utf16_code_unit():
    """U+FB01 sorts after U+1F600 in Java (a surrogate pair starts with 0xD83D)."""
    got = assign("range", {"\uFB01": member(T2), "\U0001F600": member(T2)}, TOPICS)
    assert got == {"\U0001F600": {T2: parts(0, 1)}, "\uFB01": {T2: parts(2)}}


def test_range_splits_each_topic_among_its_own_subscribers():
    topics = {T1: ("t1", 4), T2: ("t2", 3)}
    got = assign("range", {"a": member(T1, T2), "b": member(T1), "c": member()}, topics)
    assert got == {"a": {T1: parts(0, 1), T2: parts(0, 1, 2)}, "b": {T1: parts(2, 3)}, "c": {}}


def test_range_ignores_the_current_assignment():
    fresh = assign("range", {m: member(T4) for m in "ab"}, TOPICS)
    held = assign("range", {"a": member(T4), "b": member(T4, assigned={T4: frozenset(range(7))})},
                  TOPICS)
    assert held == fresh == {"a": {T4: parts(0, 1, 2, 3)}, "b": {T4: parts(4, 5, 6)}}


def test_range_with_more_members_than_partitions():
    got = assign("range", {m: member(T2) for m in "abcde"}, TOPICS)
    assert got == {"a": {T2: parts(0)}, "b": {T2: parts(1)}, "c": {T2: parts(2)},
                   "d": {}, "e": {}}


# == a large group ====================================================================

@pytest.mark.parametrize("name", ASSIGNORS)
def test_a_thousand_members_over_two_thousand_partitions(name):
    topics = {uuid.UUID(int=1000 + i): (f"orders-{i}", 100) for i in range(20)}
    ids = [f"consumer-{i}" for i in range(1000)]
    every = frozenset(topics)
    began = time.perf_counter()
    first = assign(name, {m: MemberSpec(every) for m in ids}, topics)
    # 50 leave, 50 join
    kept = ids[50:] + [f"late-{i}" for i in range(50)]
    again = assign(name, {m: MemberSpec(every, first.get(m, {})) for m in kept}, topics)
    elapsed = time.perf_counter() - began
    counts = sorted(sum(map(len, a.values())) for a in again.values())
    if name == "uniform":
        assert counts == [2] * 1000
        # the stayers keep all they had: only the leavers' 100 partitions move
        assert all(again[m] == first[m] for m in ids[50:])
    else:
        # range cuts each topic of 100 partitions in 1,000 ranges: the first 100
        # members (by member id) get partition k of every topic, the rest nothing
        assert counts == [0] * 900 + [20] * 100
        assert again["consumer-100"] == {t: parts(0) for t in topics}
    assert elapsed < 10  # about 0.1 s on a laptop; generous for slow CI


# == properties =======================================================================

@st.composite
def groups(draw):
    topic_count = draw(st.integers(1, 5))
    topic_ids = draw(st.lists(st.uuids(), min_size=topic_count, max_size=topic_count, unique=True))
    topics = {t: (f"topic-{i}", draw(st.integers(0, 12))) for i, t in enumerate(topic_ids)}
    member_ids = draw(st.lists(st.text(max_size=4), min_size=1, max_size=8, unique=True))
    shared = draw(st.booleans())
    common = draw(st.frozensets(st.sampled_from(topic_ids)))
    subscriptions = {m: common if shared else draw(st.frozensets(st.sampled_from(topic_ids)))
                     for m in member_ids}
    # a valid current assignment: each partition held by at most one member,
    # including topics since unsubscribed and a deleted topic
    deleted = uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))
    assigned = {m: {} for m in member_ids}
    if member_ids:
        for topic_id, count in [(t, n) for t, (_, n) in topics.items()] + [(deleted, 4)]:
            if topic_id in topics and topic_id == deleted:
                continue
            for partition in range(count):
                owner = draw(st.integers(-1, len(member_ids) - 1))
                if owner >= 0:
                    assigned[member_ids[owner]].setdefault(topic_id, set()).add(partition)
    members = {m: MemberSpec(subscriptions[m], {t: frozenset(p) for t, p in assigned[m].items()})
               for m in member_ids}
    homogeneous = draw(st.sampled_from([None, None, False]))
    return members, topics, homogeneous


def check_complete(got, members, topics):
    """Every subscribed partition assigned exactly once, to a subscriber."""
    assert set(got) == set(members)
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, assignment in got.items():
        for topic_id, partitions in assignment.items():
            assert partitions, "no empty topic in an assignment"
            assert topic_id in members[member_id].subscribed
            for partition in partitions:
                assert 0 <= partition < topics[topic_id][1]
                assert (topic_id, partition) not in owners
                owners[topic_id, partition] = member_id
    subscribed = set().union(*(spec.subscribed for spec in members.values())) if members else set()
    assert set(owners) == {(t, p) for t in subscribed for p in range(topics[t][1])}


def loads(got) -> dict[str, int]:
    return {m: sum(map(len, a.values())) for m, a in got.items()}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups())
def test_uniform_properties(group):
    members, topics, homogeneous = group
    got = assign("uniform", members, topics, homogeneous=homogeneous)
    check_complete(got, members, topics)
    assert assign("uniform", members, topics, homogeneous=homogeneous) == got  # deterministic
    load = loads(got)
    same = len({spec.subscribed for spec in members.values()}) <= 1
    if same and homogeneous is None:
        assert not load or max(load.values()) - min(load.values()) <= 1
    else:
        # no member holds a partition of a topic while another subscriber of it
        # has two fewer partitions in all
        for topic_id in topics:
            subscribers = [m for m, spec in members.items() if topic_id in spec.subscribed]
            holders = [m for m in subscribers if topic_id in got[m]]
            if holders:
                assert max(load[m] for m in holders) - min(load[m] for m in subscribers) <= 1
    # sticky: a balanced assignment fed back comes out unchanged
    again = {m: MemberSpec(spec.subscribed, got[m]) for m, spec in members.items()}
    assert assign("uniform", again, topics, homogeneous=homogeneous) == got


@settings(max_examples=300, deadline=None)
@given(groups())
def test_range_properties(group):
    members, topics, homogeneous = group
    if homogeneous is False or len({spec.subscribed for spec in members.values()}) > 1:
        homogeneous = False
    got = assign("range", members, topics, homogeneous=homogeneous)
    check_complete(got, members, topics)
    assert assign("range", members, topics, homogeneous=homogeneous) == got
    for topic_id in topics:
        counts = [len(got[m].get(topic_id, ())) for m, spec in members.items()
                  if topic_id in spec.subscribed]
        assert not counts or max(counts) - min(counts) <= 1
        for assignment in got.values():
            held = sorted(assignment.get(topic_id, ()))
            assert held == list(range(held[0], held[0] + len(held))) if held else True
