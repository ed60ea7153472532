"""OffsetFetch (key 9), versions 0-10.

- v0 read offsets from ZooKeeper: answered as KRaft Kafka 3.9 answers it,
  UNSUPPORTED_VERSION and offset -1 for every partition asked (no
  authorization check comes first there).
- v1-7 ask for one group, v8+ for several; null topics (v2+) ask for every
  committed partition.  Unknown topics are not checked: they come back with
  offset -1, as from Kafka.
- ``require_stable`` (v7+) waits for the commits being written to the
  group's partition, as the new coordinator does; a partition with offsets
  of a transaction not yet ended (TxnOffsetCommit) gets
  UNSTABLE_OFFSET_COMMIT and offset -1.
- A missing group answers -1 for every partition asked (it is not created).
- v9: a member of a consumer group (KIP-848) fetches with its member id and
  current epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH otherwise).
- v10 names topics by id: an id no topic has gets UNKNOWN_TOPIC_ID for each
  partition asked; all the offsets of a group list each topic by its id.
- v1 has no group-level error: a group error is copied into every partition.
- With an authorizer: DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED);
  all of a group's offsets list only the topics the client may DESCRIBE, a
  named topic it may not gets TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DESCRIBE, GROUP, TOPIC, allowed, allowed_names
from kcoord.protocol.errors import ErrorCode


def _partition(index: int, committed, code=ErrorCode.NONE) -> dict:
    if committed is None:
        return {"partition_index": index, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "", "error_code": code}
    return {"partition_index": index, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch,
            "metadata": committed.metadata, "error_code": code}


def _fetch(groups, group_id: str, topics, member_id=None, member_epoch=-1, stable=False,
           ctx=None):
    if ctx is not None and ctx.broker.authorizer is not None:
        return _fetch_authorized(ctx, groups, group_id, topics, member_id, member_epoch, stable)
    code, found = groups.fetch_offsets(group_id, topics, member_id, member_epoch)
    unstable = groups.unstable_offsets(group_id) if stable and code == ErrorCode.NONE else ()
    if unstable:
        # Offsets of a transaction not yet ended (OffsetMetadataManager's
        # requireStable): the consumer asks again.
        return code, [{"name": t, "partitions": [
            _partition(i, None, ErrorCode.UNSTABLE_OFFSET_COMMIT) if (t, i) in unstable
            else _partition(i, c) for i, c in parts]} for t, parts in found]
    return code, [{"name": t, "partitions": [_partition(i, c) for i, c in parts]}
                  for t, parts in found]


def _fetch_authorized(ctx, groups, group_id, topics, member_id, member_epoch, stable):
    """``_fetch`` under an authorizer (Kafka's KafkaApis): DESCRIBE on the group,
    else GROUP_AUTHORIZATION_FAILED; of all the group's topics only those the
    client may DESCRIBE; a named topic it may not has TOPIC_AUTHORIZATION_FAILED."""
    if not allowed(ctx, DESCRIBE, GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    code, found = _fetch(groups, group_id, topics, member_id, member_epoch, stable)
    names = {t["name"] for t in found}
    denied = names - allowed_names(ctx, DESCRIBE, TOPIC, names)
    if not denied:
        return code, found
    if topics is None:
        return code, [t for t in found if t["name"] not in denied]
    return code, [t if t["name"] not in denied else {"name": t["name"], "partitions": [
        _partition(p["partition_index"], None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for p in t["partitions"]]} for t in found]


@api(key=9, versions=(0, 10))
def offset_fetch(ctx, request):
    version = ctx.api_version
    groups = ctx.broker.groups
    if version == 0:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "topics": [
            {"name": t.name, "partitions": [_partition(i, None, ErrorCode.UNSUPPORTED_VERSION)
                                            for i in t.partition_indexes]}
            for t in request.topics or ()]}
    stable = version >= 7 and request.require_stable
    if stable:
        ids = [g.group_id for g in request.groups] if version >= 8 else [request.group_id]
        pending = groups.writes_in_flight(ids)
        if pending:
            async def when_written():
                await asyncio.wait(pending)
                return _answer(groups, request, version, ctx, stable)
            return when_written()
    return _answer(groups, request, version, ctx, stable)


def _answer(groups, request, version: int, ctx, stable: bool = False) -> dict:
    if version >= 10:
        return {"throttle_time_ms": 0,
                "groups": [_by_id(ctx, groups, g, stable) for g in request.groups]}
    if version >= 8:
        answers = []
        for g in request.groups:
            topics = None if g.topics is None else \
                [(t.name, list(t.partition_indexes)) for t in g.topics]
            code, found = _fetch(groups, g.group_id, topics, g.member_id, g.member_epoch,
                                 stable, ctx)
            answers.append({"group_id": g.group_id, "topics": found, "error_code": code})
        return {"throttle_time_ms": 0, "groups": answers}
    topics = None if request.topics is None else \
        [(t.name, list(t.partition_indexes)) for t in request.topics]
    code, found = _fetch(groups, request.group_id, topics, stable=stable, ctx=ctx)
    if version == 1 and code != ErrorCode.NONE:
        found = [{"name": name, "partitions": [_partition(i, None, code) for i in parts]}
                 for name, parts in topics]
    return {"throttle_time_ms": 0, "topics": found, "error_code": code}


def _by_id(ctx, groups, g, stable: bool = False) -> dict:
    """One group of an OffsetFetch v10: topics asked and answered by id."""
    topics = ctx.broker.topics
    if g.topics is None:
        code, found = _fetch(groups, g.group_id, None, g.member_id, g.member_epoch, stable,
                             ctx)
        listed = []
        for t in found:
            topic = topics.get(t["name"])
            if topic is not None:  # a committed topic that is gone has no id to name it by
                listed.append({**t, "topic_id": topic.topic_id})
        return {"group_id": g.group_id, "topics": listed, "error_code": code}
    asked, unknown = [], []
    for t in g.topics:
        topic = topics.by_id(t.topic_id)
        if topic is None:
            unknown.append(t)
        else:
            asked.append((topic, list(t.partition_indexes)))
    code, found = _fetch(groups, g.group_id, [(topic.name, parts) for topic, parts in asked],
                         g.member_id, g.member_epoch, stable, ctx)
    if code != ErrorCode.NONE:
        return {"group_id": g.group_id, "topics": [], "error_code": code}
    answered = [{**t, "topic_id": topic.topic_id} for (topic, _p), t in zip(asked, found)]
    answered += [{"topic_id": t.topic_id, "partitions": [
        _partition(i, None, ErrorCode.UNKNOWN_TOPIC_ID) for i in t.partition_indexes]}
        for t in unknown]
    return {"group_id": g.group_id, "topics": answered, "error_code": code}
