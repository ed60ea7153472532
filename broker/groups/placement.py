"""Which ``__consumer_offsets`` partition owns a group (GroupCoordinatorService.partitionFor).

Kafka's rule: ``Utils.abs(groupId.hashCode()) % partitionCount``, with Java's
``String.hashCode`` over UTF-16 code units (32-bit wrap-around) and Kafka's
``Utils.abs``, which maps Integer.MIN_VALUE to 0.  The partition count is the
topic's actual one.
"""

from __future__ import annotations

import codecs

INT32_MIN = -(2**31)
# Looked up once, at import: a lookup imports the codec's module on first use,
# which needs a file descriptor, and a commit arriving when none is free must
# still be placed (and answered).
_utf16_be = codecs.lookup("utf-16-be").encode


def java_string_hashcode(text: str) -> int:
    data = _utf16_be(text, "surrogatepass")[0]
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(value: int) -> int:
    return 0 if value == INT32_MIN else abs(value)


def coordinator_partition(group_id: str, partitions: int) -> int:
    return kafka_abs(java_string_hashcode(group_id)) % partitions
