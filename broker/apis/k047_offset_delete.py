"""OffsetDelete (key 47), version 0 (KIP-496).

- Unknown topics or partitions: UNKNOWN_TOPIC_OR_PARTITION, nothing deleted.
- An Empty group loses the offsets asked for; an active consumer group keeps
  those of the topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC); an
  active group of another protocol type: NON_EMPTY_GROUP.  Unknown group:
  GROUP_ID_NOT_FOUND.
- The answer comes once the tombstones are durable.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DELETE, GROUP, READ, TOPIC, allowed, allowed_names
from kcoord.broker.apis.group_support import split_known, when_answered
from kcoord.protocol.errors import ErrorCode


@api(key=47, versions=(0, 0))
def offset_delete(ctx, request):
    broker = ctx.broker
    groups = broker.groups
    if not allowed(ctx, DELETE, GROUP, request.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0,
                "topics": []}
    denied = set()
    if broker.authorizer is not None:
        names = {t.name for t in request.topics}
        denied = names - allowed_names(ctx, READ, TOPIC, names)
    answer, known = split_known(broker, [t for t in request.topics if t.name not in denied])
    answer.update(((t.name, p.partition_index), ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                  for t in request.topics if t.name in denied for p in t.partitions)
    asked = [tp for tp, _entry in known]

    def shape(result):
        code, deleted = result
        if code != ErrorCode.NONE:
            return {"error_code": code, "throttle_time_ms": 0, "topics": []}
        answer.update(deleted)
        return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0, "topics": [
            {"name": topic.name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": answer[(topic.name, p.partition_index)]}
                for p in topic.partitions]}
            for topic in request.topics]}

    return when_answered(groups.delete_offsets(request.group_id, asked),
                         shape)
