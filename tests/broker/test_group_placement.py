"""Groups land on the ``__consumer_offsets`` partition Kafka puts them on
(test vectors computed with a real JVM: Utils.abs(groupId.hashCode()) % partitions)."""

from __future__ import annotations

import pytest

from kcoord.broker.groups.placement import Placement, coordinator_partition, java_string_hashcode

VECTORS = [
    ("", 0, 0),
    ("a", 97, 47),
    ("group", 98629247, 47),
    ("my-group", -1906497762, 12),
    ("test-group", 627841412, 12),
    ("console-consumer-12345", 158455506, 6),
    ("connect-cluster", 1440343063, 13),
    ("polygenelubricants", -2147483648, 0),
    ("GydZG_", -2147483648, 0),
    ("\u00e9t\u00e9", 227742, 42),
    ("\U0001F600grp", 1276929186, 36),
    # longer than the table of powers: the same rule unit by unit
    ("g" * 300 + "-\u00e9\U0001F600", 689295359, 9),
]


@pytest.mark.parametrize("group,hashcode,partition", VECTORS)
def test_the_partition_kafka_picks(group, hashcode, partition):
    assert java_string_hashcode(group) == hashcode
    assert coordinator_partition(group, 50) == partition


def test_the_topic_s_actual_partition_count_counts():
    assert coordinator_partition("my-group", 7) == 1906497762 % 7


def test_the_remembered_placement_answers_as_kafka_picks_even_past_its_bound():
    """The coordinators remember each id's partition; what they remember is
    bounded, and an id asked for again after the memory started over (or
    another partition count) is placed as Kafka places it."""
    place = Placement(50, remembered=3)
    for _round in range(3):
        for group, _hashcode, partition in VECTORS:
            assert place(group) == partition
    assert len(place._known) <= 3
    assert [Placement(7)(group) for group, _h, _p in VECTORS] == \
        [coordinator_partition(group, 7) for group, _h, _p in VECTORS]

