"""Kafka's on-disk layout, in one place: the names of the internal topics, of a
data directory's files, of partition folders and segment files, and the
format of index entries.  The storage engine, the topic lifecycle and the
pipeline all read them from here.

A data directory (Kafka's log directory)::

    meta.properties                    cluster and node id
    .kafka_cleanshutdown               present after a clean stop
    recovery-point-offset-checkpoint   per partition: flushed up to
    log-start-offset-checkpoint        per partition: the log start offset
    cleaner-offset-checkpoint          per partition: compacted up to
    <topic>-<partition>/               a partition's folder
        partition.metadata             its topic id
        00000000000000000000.log       a segment: the base offset on 20 digits
        00000000000000000000.index     its offset index
        00000000000000000000.timeindex its time index
        00000000000000000000.txnindex  its aborted transactions (only if any)

Suffixes a segment file takes for a while (LogFileUtils): ``.cleaned`` while
the cleaner writes it, ``.swap`` once the swap is committed, ``.deleted``
while it waits to be removed.
"""

from __future__ import annotations

import re
import struct

# Internal topics (Kafka's Topic.GROUP_METADATA_TOPIC_NAME and its siblings).
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})

# The files of a data directory.
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"

# "<topic>-<partition>"; Kafka's deleted ("...-delete"), future ("...-future")
# and stray ("...-stray") folders carry a suffix after the partition and are
# not logs.
PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def partition_dir(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition folder's name, or None."""
    m = PARTITION_DIR.match(name)
    if not m:
        return None
    return m.group("topic"), int(m.group("partition"))


# Segment files.
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"


def segment_name(base_offset: int) -> str:
    """A segment's file name without its suffix: the base offset on 20 digits."""
    return f"{base_offset:020d}"


# Any file of a segment: (base offset, kind, a transient suffix such as ".swap" or None).
SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)(\.\w+)?$")
# The files of a committed compaction swap.
SWAP_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)\.swap$")
# A segment's log file, also mid-swap.
SEGMENT_LOG_OR_SWAP = re.compile(r"^(\d{20})\.log(\.swap)?$")


def is_segment_file(name: str) -> bool:
    """A segment's own file (log, indexes), with no transient suffix."""
    m = SEGMENT_FILE.match(name)
    return bool(m) and m.group(3) is None and m.group(2) != "snapshot"


# Index entries: the offset index maps an offset relative to the segment's base
# to a byte position; the time index a timestamp to a relative offset.
OFFSET_INDEX_ENTRY = struct.Struct(">ii")
TIME_INDEX_ENTRY = struct.Struct(">qi")
# .txnindex: int16 version (0), int64 producer id, int64 first offset, int64
# last offset (the abort marker's), int64 last stable offset (AbortedTxn.java).
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")
