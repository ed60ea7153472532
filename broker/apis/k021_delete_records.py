"""DeleteRecords (key 21), versions 0-2.

- Each partition's log start offset moves up to the offset asked for (-1: the
  high watermark, the log end on one node); the answer's low watermark is the
  log start offset after it.  An offset below the log start moves nothing.
- The new log start offsets are written to ``log-start-offset-checkpoint``
  before the answer, so they survive a restart and a crash; the whole segments
  below them are deleted before the answer too, off the event loop.
- Refused per partition as Kafka refuses them: an unknown topic or partition
  UNKNOWN_TOPIC_OR_PARTITION, an internal topic INVALID_TOPIC_EXCEPTION, a
  topic whose ``cleanup.policy`` lacks ``delete`` POLICY_VIOLATION, an offset
  past the high watermark (or below -1) OFFSET_OUT_OF_RANGE; each with low
  watermark -1.
"""

from __future__ import annotations

import asyncio

import structlog

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DELETE, TOPIC, allowed_names
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.errors import OffsetOutOfRangeError

log = structlog.get_logger("kcoord.topics")

HIGH_WATERMARK = -1


@api(key=21, versions=(0, 2))
async def delete_records(ctx, request):
    broker = ctx.broker
    answers = []
    moved = []
    permitted = allowed_names(ctx, DELETE, TOPIC, [t.name for t in request.topics])
    for wanted in request.topics:
        topic = broker.topics.get(wanted.name)
        partitions = []
        for entry in wanted.partitions:
            if wanted.name not in permitted:
                code, low = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
            else:
                code, low = _delete(broker, topic, wanted.name, entry.partition_index,
                                    entry.offset)
            if code is ErrorCode.NONE:
                moved.append((wanted.name, entry.partition_index, low))
            partitions.append({"partition_index": entry.partition_index,
                               "low_watermark": low, "error_code": code})
        answers.append({"name": wanted.name, "partitions": partitions})
    if moved:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, broker.logs.write_checkpoints)
        except Exception as exc:  # the log dir is failing: nothing is acknowledged
            log.error("records.delete_failed", error=str(exc),
                      reason="the new log start offsets could not be checkpointed")
            for topic_answer in answers:
                for p in topic_answer["partitions"]:
                    if p["error_code"] == ErrorCode.NONE:
                        p["error_code"], p["low_watermark"] = ErrorCode.KAFKA_STORAGE_ERROR, -1
            return {"throttle_time_ms": 0, "topics": answers}
        log.info("records.deleted", partitions={f"{t}-{p}": low for t, p, low in moved[:100]},
                 count=len(moved), reason="DeleteRecords")
        logs = [broker.logs.get(t, p) for t, p, _low in moved]
        await loop.run_in_executor(None, _drop_segments, [plog for plog in logs if plog])
    return {"throttle_time_ms": 0, "topics": answers}


def _delete(broker, topic, name: str, partition: int, offset: int) -> tuple[ErrorCode, int]:
    """ReplicaManager.deleteRecordsOnLocalLog for one partition."""
    if topic is None or not 0 <= partition < topic.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    if topic.internal:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, -1
    plog = broker.logs.get(name, partition)
    if plog is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    if not plog.config.delete:
        return ErrorCode.POLICY_VIOLATION, -1
    target = plog.log_end_offset if offset == HIGH_WATERMARK else offset
    if target < 0:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    try:
        plog.advance_log_start_offset(target)
    except OffsetOutOfRangeError:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    return ErrorCode.NONE, plog.log_start_offset


def _drop_segments(logs) -> None:
    """The whole segments below the new log starts go (a retention pass of these
    partitions: UnifiedLog.deleteLogStartOffsetBreachedSegments)."""
    for plog in logs:
        try:
            plog.delete_old_segments(below_start_only=True)
        except Exception as exc:  # a closed or deleted log: the next pass tries again
            log.warning("records.segments_kept", partition=str(plog.directory), error=str(exc))
