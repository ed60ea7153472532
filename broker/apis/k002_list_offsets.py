"""ListOffsets (key 2), versions 0-9.

- -1 (latest): the high watermark (read_uncommitted) or last stable offset
  (read_committed, v2+); the log end offset for ``replica_id`` -2 (debug).
- -2 (earliest) and -4 (earliest local, v8+): the log start offset.
- -3 (max timestamp, v7+): the record with the largest timestamp and its
  offset; -1/-1 for an empty log.
- -5 (latest tiered, v9+): -1, as Kafka without tiered storage.
- T >= 0: the first record with a timestamp >= T, through the time index;
  -1/-1 if there is none. The leader epoch is 0 wherever an offset is found.
- A special value before its version, or any other negative one:
  UNSUPPORTED_VERSION for that partition. The same partition twice:
  INVALID_REQUEST for it (KafkaApis.handleListOffsetRequest).
- v0 answers ``old_style_offsets``: [high watermark] for -1, [log start] for
  -2, [] otherwise (Kafka's legacy segment list is not kept).
"""

from __future__ import annotations

from collections import Counter

from broker.apis import api
from broker.topics.data import LEADER_EPOCH, NO_EPOCH, find_partition, leader_epoch_error
from protocol.errors import ErrorCode
from protocol.records import LOG_APPEND_TIME, decode_batch, iter_entries
from storage.errors import StorageError

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
DEBUG_REPLICA = -2
READ_COMMITTED = 1
_MIN_VERSION = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


def _found(index: int, timestamp: int, offset: int, epoch: int, version: int) -> dict:
    answer = {"partition_index": index, "error_code": ErrorCode.NONE, "timestamp": timestamp,
              "offset": offset, "leader_epoch": epoch, "old_style_offsets": []}
    if version == 0 and offset >= 0:
        answer["old_style_offsets"] = [offset]
    return answer


def _error(index: int, code: ErrorCode) -> dict:
    return {"partition_index": index, "error_code": code, "timestamp": -1, "offset": -1,
            "leader_epoch": -1, "old_style_offsets": []}


def _max_timestamp(plog) -> tuple[int, int]:
    """(timestamp, offset) of the first record with the log's largest timestamp."""
    found = plog.max_timestamp_offset()
    if found is None:
        return -1, -1
    data = plog.read(found.offset, 1)
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
    if target == LATEST:
        if request.replica_id == DEBUG_REPLICA:
            offset = view.log_end_offset
        elif request.isolation_level == READ_COMMITTED:
            offset = view.last_stable_offset
        else:
            offset = view.high_watermark
        return _found(index, -1, offset, LEADER_EPOCH, version)
    if target in (EARLIEST, EARLIEST_LOCAL):
        return _found(index, -1, view.log_start_offset, LEADER_EPOCH, version)
    if target == LATEST_TIERED:
        return _found(index, -1, -1, NO_EPOCH, version)
    if version == 0:
        return _found(index, -1, -1, NO_EPOCH, version)
    plog = view.log
    if plog is None:
        return _found(index, -1, -1, NO_EPOCH, version)
    try:
        if target == MAX_TIMESTAMP:
            timestamp, offset = _max_timestamp(plog)
        else:
            hit = plog.offset_for_timestamp(target)
            timestamp, offset = (hit.timestamp, hit.offset) if hit is not None else (-1, -1)
    except StorageError as exc:
        return _error(index, exc.code)
    if offset < 0:
        return _found(index, -1, -1, NO_EPOCH, version)
    return _found(index, timestamp, offset, LEADER_EPOCH, version)


@api(key=2, versions=(0, 9))
def list_offsets(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    seen = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    topics = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            if seen[(topic.name, part.partition_index)] > 1:
                partitions.append(_error(part.partition_index, ErrorCode.INVALID_REQUEST))
            else:
                partitions.append(_lookup(broker, request, version, topic.name, part))
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
