"""DescribeProducers (key 61), version 0: the producers each partition asked
for remembers (``kafka-transactions describe-producers``): producer id,
epoch, last sequence and the last timestamp of its batches, as the
partition's producer state holds them (rebuilt from the log in a worker
after a restart, before it is answered), with the coordinator epoch of its
last end marker (-1 before any) and the first offset of its open
transaction (-1 if none).
An unknown partition of a known topic answers UNKNOWN_TOPIC_OR_PARTITION
without a message, an unknown topic with Kafka's message."""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import READ, TOPIC, TOPIC_REFUSED, allowed_names
from kcoord.protocol.errors import ErrorCode

_NOT_HOSTED = "This server does not host this topic-partition."


@api(key=61, versions=(0, 0))
async def describe_producers(ctx, request):
    broker = ctx.broker
    topics = []
    permitted = allowed_names(ctx, READ, TOPIC, [t.name for t in request.topics])
    for t in request.topics:
        topic = broker.topics.get(t.name) if t.name in permitted else None
        partitions = []
        for p in t.partition_indexes:
            answer = {"partition_index": p, "error_code": ErrorCode.NONE,
                      "error_message": None, "active_producers": []}
            if t.name not in permitted:
                answer["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                answer["error_message"] = TOPIC_REFUSED
            elif topic is None:
                answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                answer["error_message"] = _NOT_HOSTED
            elif not 0 <= p < topic.partitions:
                answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                plog = broker.logs.get(t.name, p) if broker.logs is not None else None
                if plog is not None:
                    await plog.load_producer_state()
                    answer["active_producers"] = [
                        {"producer_id": pid, "producer_epoch": entry.epoch,
                         "last_sequence": entry.last_seq, "last_timestamp": entry.last_timestamp,
                         "coordinator_epoch": entry.coordinator_epoch,
                         "current_txn_start_offset": entry.txn_first_offset}
                        for pid, entry in sorted(plog.producers.producers.items())]
            partitions.append(answer)
        topics.append({"name": t.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
