"""Which ``__consumer_offsets`` partition owns a group (GroupCoordinatorService.partitionFor).

Kafka's rule: ``Utils.abs(groupId.hashCode()) % partitionCount``, with Java's
``String.hashCode`` over UTF-16 code units (32-bit wrap-around) and Kafka's
``Utils.abs``, which maps Integer.MIN_VALUE to 0.  The partition count is the
topic's actual one.
"""

from __future__ import annotations

import codecs
import sys
from array import array
from operator import mul

INT32_MIN = -(2**31)
# Looked up once, at import: a lookup imports the codec's module on first use,
# which needs a file descriptor, and a commit arriving when none is free must
# still be placed (and answered).
_utf16 = codecs.lookup("utf-16-le" if sys.byteorder == "little" else "utf-16-be").encode
# 31**k mod 2**32, highest power first: String.hashCode is the sum of each
# UTF-16 unit times 31 to the power of the units after it, so one sum over the
# units and the last n powers (a loop in C) gives it for ids up to this long.
_POWERS_UP_TO = 256
_POWERS = [pow(31, k, 1 << 32) for k in range(_POWERS_UP_TO - 1, -1, -1)]


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit wrap-around)."""
    units = array("H", _utf16(text, "surrogatepass")[0])  # native order: the units
    n = len(units)
    if n <= _POWERS_UP_TO:
        h = sum(map(mul, units, _POWERS[_POWERS_UP_TO - n:])) & 0xFFFFFFFF
    else:
        h = 0
        for unit in units:
            h = (31 * h + unit) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(value: int) -> int:
    return 0 if value == INT32_MIN else abs(value)


def coordinator_partition(group_id: str, partitions: int) -> int:
    return kafka_abs(java_string_hashcode(group_id)) % partitions


class Placement:
    """Which partition of a coordinator's topic an id (a group's, a transactional
    id) belongs to, worked out once per id: the same ids come back with every
    request (a commit, a heartbeat, a transaction's every step).  At most
    ``remembered`` ids are kept; past that the memory starts again."""

    __slots__ = ("partitions", "remembered", "_known")

    def __init__(self, partitions: int, remembered: int = 100_000):
        self.partitions = partitions
        self.remembered = remembered
        self._known: dict[str, int] = {}

    def __call__(self, key: str) -> int:
        partition = self._known.get(key)
        if partition is None:
            if len(self._known) >= self.remembered:
                self._known.clear()
            partition = self._known[key] = coordinator_partition(key, self.partitions)
        return partition
