"""OffsetForLeaderEpoch (key 23), versions 0-4.

Every partition has had one leader epoch, 0, since offset 0, so the answer for
a requested epoch ``e`` follows Kafka's LeaderEpochFileCache.endOffsetFor over
that one entry:

- ``e`` = 0: epoch 0, ending at the log end offset;
- ``e`` > 0 (newer than any known) or -1: epoch -1, end offset -1;
- ``e`` < -1 (older than the first entry): ``e`` itself, ending where epoch 0
  starts (0).

``current_leader_epoch`` (v2+) fences as in Fetch; an unknown partition gets
UNKNOWN_TOPIC_OR_PARTITION with epoch and end offset -1.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DESCRIBE, TOPIC, allowed_names
from kcoord.broker.topics.data import LEADER_EPOCH, NO_EPOCH, find_partition, leader_epoch_error
from kcoord.protocol.errors import ErrorCode

EPOCH_START_OFFSET = 0


def _answer(index: int, code: ErrorCode, epoch: int = NO_EPOCH, end: int = -1) -> dict:
    return {"error_code": code, "partition": index, "leader_epoch": epoch, "end_offset": end}


def _end_offset(view, requested: int) -> tuple[int, int]:
    if requested == LEADER_EPOCH:
        return LEADER_EPOCH, view.log_end_offset
    if requested == NO_EPOCH or requested > LEADER_EPOCH:
        return NO_EPOCH, -1
    return requested, EPOCH_START_OFFSET


@api(key=23, versions=(0, 4))
def offset_for_leader_epoch(ctx, request):
    topics = []
    permitted = allowed_names(ctx, DESCRIBE, TOPIC, [t.topic for t in request.topics])
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            if topic.topic not in permitted:
                partitions.append(_answer(part.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            view = find_partition(ctx.broker, topic.topic, part.partition)
            if view is None:
                partitions.append(_answer(part.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            fenced = leader_epoch_error(part.current_leader_epoch)
            if fenced:
                partitions.append(_answer(part.partition, fenced))
                continue
            epoch, end = _end_offset(view, part.leader_epoch)
            partitions.append(_answer(part.partition, ErrorCode.NONE, epoch, end))
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
