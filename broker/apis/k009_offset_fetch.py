"""OffsetFetch (key 9), versions 1-9.

- v0 (offsets in ZooKeeper) is not served, as in KRaft Kafka.
- v1-7 ask for one group, v8+ for several; null topics (v2+) ask for every
  committed partition.  Unknown topics are not checked: they come back with
  offset -1, as from Kafka.
- ``require_stable`` (v7+) waits for the commits being written to the
  group's partition, as the new coordinator does, so it never needs
  UNSTABLE_OFFSET_COMMIT (transactional commits are not served).
- A missing group answers -1 for every partition asked (it is not created).
- v9: a member of a consumer group (KIP-848) fetches with its member id and
  current epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH otherwise).
- v1 has no group-level error: a group error is copied into every partition.
"""

from __future__ import annotations

import asyncio

from broker.apis import api
from protocol.errors import ErrorCode


def _partition(index: int, committed, code=ErrorCode.NONE) -> dict:
    if committed is None:
        return {"partition_index": index, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "", "error_code": code}
    return {"partition_index": index, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch,
            "metadata": committed.metadata, "error_code": code}


def _fetch(groups, group_id: str, topics, member_id=None, member_epoch=-1):
    code, found = groups.fetch_offsets(group_id, topics, member_id, member_epoch)
    return code, [{"name": t, "partitions": [_partition(i, c) for i, c in parts]}
                  for t, parts in found]


@api(key=9, versions=(1, 9))
def offset_fetch(ctx, request):
    version = ctx.api_version
    groups = ctx.broker.groups
    if version >= 7 and request.require_stable:
        ids = [g.group_id for g in request.groups] if version >= 8 else [request.group_id]
        pending = groups.writes_in_flight(ids)
        if pending:
            async def when_written():
                await asyncio.wait(pending)
                return _answer(groups, request, version)
            return when_written()
    return _answer(groups, request, version)


def _answer(groups, request, version: int) -> dict:
    if version >= 8:
        answers = []
        for g in request.groups:
            topics = None if g.topics is None else \
                [(t.name, list(t.partition_indexes)) for t in g.topics]
            code, found = _fetch(groups, g.group_id, topics, g.member_id, g.member_epoch)
            answers.append({"group_id": g.group_id, "topics": found, "error_code": code})
        return {"throttle_time_ms": 0, "groups": answers}
    topics = None if request.topics is None else \
        [(t.name, list(t.partition_indexes)) for t in request.topics]
    code, found = _fetch(groups, request.group_id, topics)
    if version == 1 and code != ErrorCode.NONE:
        found = [{"name": name, "partitions": [_partition(i, None, code) for i in parts]}
                 for name, parts in topics]
    return {"throttle_time_ms": 0, "topics": found, "error_code": code}
