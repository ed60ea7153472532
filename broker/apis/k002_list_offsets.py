"""ListOffsets (key 2), versions 0-11.

- -1 (latest): the high watermark (read_uncommitted) or last stable offset
  (read_committed, v2+); the log end offset for any other ``replica_id`` than a
  consumer's (-1): -2 (debug), a broker's.
- -2 (earliest) and -4 (earliest local, v8+): the log start offset.
- -3 (max timestamp, v7+): the record with the largest timestamp and its
  offset, read from its segment even below the log start offset (as Kafka,
  after DeleteRecords); -1/-1 for an empty log.
- -3 and T >= 0 answer only an offset below the last fetchable one (the last
  stable offset under read_committed, else the high watermark; the log end for
  another ``replica_id`` than -1), and -1/-1 otherwise, as Kafka's
  Partition.fetchOffsetForTimestamp: the newest record of a transaction still
  open is not a read_committed consumer's to find.
- -5 (latest tiered, v9+) and -6 (earliest pending upload, v11+): -1, as
  Kafka without tiered storage.
- ``timeout_ms`` (v10+) bounds reads from remote storage: there is none here,
  every answer is at once.
- T >= 0: the first record with a timestamp >= T, through the time index;
  -1/-1 if there is none. The leader epoch is 0 wherever an offset is found.
- A special value before its version, or any other negative one:
  UNSUPPORTED_VERSION for that partition. The same partition twice (v1+):
  INVALID_REQUEST for it (KafkaApis.handleListOffsetRequestV1AndAbove).
- v0 (UnifiedLog.legacyFetchOffsetsBefore) answers ``old_style_offsets``, newest
  first and at most ``max_num_offsets`` of them, from the list of (segment base
  offset, the segment file's modification time), plus (log end offset, now)
  when the active segment holds data: -1 starts at the end of that list, -2 at
  its start, a time T at the last entry written at or before T. For a consumer
  (replica id -1) offsets past the high watermark are replaced by it. A
  negative ``max_num_offsets`` fails the partition with UNKNOWN_SERVER_ERROR,
  as Kafka's array allocation does.
"""

from __future__ import annotations

import os
from collections import Counter

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DESCRIBE, TOPIC, allowed_names
from kcoord.broker.topics.data import (
    LEADER_EPOCH,
    NO_EPOCH,
    find_partition,
    leader_epoch_error,
    load_producers,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import LOG_APPEND_TIME, decode_batch, iter_entries
from kcoord.storage.errors import StorageError
from kcoord.storage.log import wall_clock_ms

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6
CONSUMER_REPLICA = -1
READ_COMMITTED = 1
_MIN_VERSION = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                EARLIEST_PENDING_UPLOAD: 11}


def _found(index: int, timestamp: int, offset: int, epoch: int) -> dict:
    return {"partition_index": index, "error_code": ErrorCode.NONE, "timestamp": timestamp,
            "offset": offset, "leader_epoch": epoch, "old_style_offsets": []}


def _error(index: int, code: ErrorCode) -> dict:
    return {"partition_index": index, "error_code": code, "timestamp": -1, "offset": -1,
            "leader_epoch": -1, "old_style_offsets": []}


def _max_timestamp(plog) -> tuple[int, int]:
    """(timestamp, offset) of the first record with the log's largest timestamp."""
    found = plog.max_timestamp_offset()
    if found is None:
        return -1, -1
    data = plog.read_batch_at(found.offset)
    for pos, _size, magic in iter_entries(data, partial_ok=True):
        if magic != 2:
            break
        batch = decode_batch(data, pos, verify=False)
        if batch.timestamp_type == LOG_APPEND_TIME:
            return batch.max_timestamp, batch.base_offset
        for record in batch.records:
            if record.timestamp == found.timestamp:
                return record.timestamp, record.offset
        break
    return found.timestamp, found.offset


def _segment_times(view) -> list[tuple[int, int]]:
    """(first offset, last modified ms) of each segment, and (log end, now) if the
    active segment holds data."""
    plog = view.log
    now = wall_clock_ms()
    if plog is None:  # not written yet: one empty segment, made now
        return [(0, now)]
    segments = list(plog.segments)
    start = plog.log_start_offset
    times = []
    for segment in segments:
        try:
            modified = os.stat(segment.log_path).st_mtime_ns // 1_000_000
        except OSError:
            continue  # deleted by retention meanwhile
        times.append((max(segment.base_offset, start), modified))
    if segments[-1].size > 0:
        times.append((plog.log_end_offset, now))
    return times


def _legacy_offsets(request, view, part) -> dict:
    index, target, wanted = part.partition_index, part.timestamp, part.max_num_offsets
    if wanted < 0:
        return _error(index, ErrorCode.UNKNOWN_SERVER_ERROR)
    times = _segment_times(view)
    if target == LATEST:
        first = len(times) - 1
    elif target == EARLIEST:
        first = 0
    else:
        first = len(times) - 1
        while first >= 0 and times[first][1] > target:
            first -= 1
    count = min(wanted, first + 1)
    offsets = sorted((times[first - j][0] for j in range(count)), reverse=True)
    if request.replica_id == CONSUMER_REPLICA:
        high_watermark = view.high_watermark
        if any(o > high_watermark for o in offsets):
            offsets = [high_watermark] + [o for o in offsets if o <= high_watermark]
    return {"partition_index": index, "error_code": ErrorCode.NONE, "timestamp": -1,
            "offset": -1, "leader_epoch": -1, "old_style_offsets": offsets}


def _lookup(broker, request, version: int, name: str, part) -> dict:
    index, target = part.partition_index, part.timestamp
    view = find_partition(broker, name, index)
    if view is None:
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    fenced = leader_epoch_error(part.current_leader_epoch)
    if fenced:
        return _error(index, fenced)
    if target < 0 and (target not in _MIN_VERSION or version < _MIN_VERSION[target]):
        return _error(index, ErrorCode.UNSUPPORTED_VERSION)
    if version == 0:
        return _legacy_offsets(request, view, part)
    if target == LATEST:
        return _found(index, -1, _last_fetchable(request, view), LEADER_EPOCH)
    if target in (EARLIEST, EARLIEST_LOCAL):
        return _found(index, -1, view.log_start_offset, LEADER_EPOCH)
    if target in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return _found(index, -1, -1, NO_EPOCH)
    plog = view.log
    if plog is None:
        return _found(index, -1, -1, NO_EPOCH)
    try:
        if target == MAX_TIMESTAMP:
            timestamp, offset = _max_timestamp(plog)
        else:
            hit = plog.offset_for_timestamp(target)
            timestamp, offset = (hit.timestamp, hit.offset) if hit is not None else (-1, -1)
    except StorageError as exc:
        return _error(index, exc.code)
    if offset < 0 or offset >= _last_fetchable(request, view):
        return _found(index, -1, -1, NO_EPOCH)
    return _found(index, timestamp, offset, LEADER_EPOCH)


def _last_fetchable(request, view) -> int:
    """ReplicaManager.fetchOffset: the isolation level is a consumer's (replica id
    -1); a debug client (-2) or a broker gets the log end offset."""
    if request.replica_id != CONSUMER_REPLICA:
        return view.log_end_offset
    if request.isolation_level == READ_COMMITTED:
        return view.last_stable_offset
    return view.high_watermark


@api(key=2, versions=(0, 11))
def list_offsets(ctx, request):
    if ctx.api_version >= 2 and request.isolation_level == READ_COMMITTED:
        return _after_loading(ctx, request)  # the last stable offset needs the producers
    return _answer(ctx, request)


async def _after_loading(ctx, request):
    await load_producers(ctx.broker, ((t.name, p.partition_index)
                                      for t in request.topics for p in t.partitions))
    return _answer(ctx, request)


def _answer(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    seen = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    denied = ()
    if broker.authorizer is not None:
        names = {t.name for t in request.topics}
        denied = names - allowed_names(ctx, DESCRIBE, TOPIC, names)
    topics = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            if topic.name in denied:
                partitions.append(_error(part.partition_index,
                                         ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif version >= 1 and seen[(topic.name, part.partition_index)] > 1:
                partitions.append(_error(part.partition_index, ErrorCode.INVALID_REQUEST))
            else:
                partitions.append(_lookup(broker, request, version, topic.name, part))
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
