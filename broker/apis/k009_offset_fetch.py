"""OffsetFetch (key 9), versions 1-9.

- v0 (offsets in ZooKeeper) is not served, as in KRaft Kafka.
- v1-7 ask for one group, v8+ for several; null topics (v2+) ask for every
  committed partition.  Unknown topics are not checked: they come back with
  offset -1, as from Kafka.
- ``require_stable`` (v7+) waits for the commits being written to the
  group's partition, as the new coordinator does, so it never needs
  UNSTABLE_OFFSET_COMMIT (transactional commits are not served).
- A missing group answers -1 for every partition asked (it is not created).
- v1 has no group-level error: a group error is copied into every partition.
"""

from __future__ import annotations

from broker.apis import api
from protocol.errors import ErrorCode


def _partition(index: int, committed, code=ErrorCode.NONE) -> dict:
    if committed is None:
        return {"partition_index": index, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "", "error_code": code}
    return {"partition_index": index, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch,
            "metadata": committed.metadata, "error_code": code}


async def _fetch(groups, group_id: str, topics, require_stable: bool):
    if require_stable:
        await groups.settled(group_id)
    code, found = groups.core.fetch_offsets(group_id, topics)
    return code, [{"name": t, "partitions": [_partition(i, c) for i, c in parts]}
                  for t, parts in found]


@api(key=9, versions=(1, 9))
async def offset_fetch(ctx, request):
    version = ctx.api_version
    groups = ctx.broker.groups
    stable = request.require_stable if version >= 7 else False
    if version >= 8:
        answers = []
        for g in request.groups:
            topics = None if g.topics is None else \
                [(t.name, list(t.partition_indexes)) for t in g.topics]
            code, found = await _fetch(groups, g.group_id, topics, stable)
            answers.append({"group_id": g.group_id, "topics": found, "error_code": code})
        return {"throttle_time_ms": 0, "groups": answers}
    topics = None if request.topics is None else \
        [(t.name, list(t.partition_indexes)) for t in request.topics]
    code, found = await _fetch(groups, request.group_id, topics, stable)
    if version == 1 and code != ErrorCode.NONE:
        found = [{"name": name, "partitions": [_partition(i, None, code) for i in parts]}
                 for name, parts in topics]
    return {"throttle_time_ms": 0, "topics": found, "error_code": code}
