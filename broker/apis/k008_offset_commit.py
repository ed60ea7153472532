"""OffsetCommit (key 8), versions 0-10.

- v0 stored offsets in ZooKeeper: answered as KRaft Kafka 3.9 answers it,
  UNSUPPORTED_VERSION for every partition (after the group's authorization),
  nothing committed.
- Topics are checked first: an unknown topic or partition gets
  UNKNOWN_TOPIC_OR_PARTITION and is not committed; the rest go to the
  coordinator (member and generation checks, metadata size limit).
- The answer comes once the commit records are durable in
  ``__consumer_offsets``; a commit to a missing group with a generation
  gets GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before (the new
  coordinator).  The commit timestamp is always the broker's time.
- v2-4 retention times give the record an expiry time (OffsetCommitValue v1).
- v10 names topics by id: an id no topic has gets UNKNOWN_TOPIC_ID.
- With an authorizer: READ on the group (else GROUP_AUTHORIZATION_FAILED for
  every partition) and on each topic (else TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import GROUP, READ, allowed
from kcoord.broker.apis.group_support import (
    commit_answer,
    committed_offsets,
    every_partition,
    when_answered,
)
from kcoord.protocol.errors import ErrorCode


@api(key=8, versions=(0, 10))
def offset_commit(ctx, request):
    version = ctx.api_version
    broker = ctx.broker
    groups = broker.groups
    if not allowed(ctx, READ, GROUP, request.group_id):
        return every_partition(request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if version == 0:
        return every_partition(request.topics, ErrorCode.UNSUPPORTED_VERSION)
    named, unknown_ids, answer, offsets = committed_offsets(
        broker, request.topics, version >= 10, version >= 6, ctx)

    def shape(committed):
        answer.update(committed)
        return commit_answer(request.topics, named, unknown_ids, answer)

    if not offsets:
        return shape({})
    return when_answered(groups.commit(
        request.group_id, request.generation_id_or_member_epoch,
        request.member_id, request.group_instance_id if version >= 7 else None, offsets,
        version=version, retention_ms=request.retention_time_ms if 2 <= version <= 4 else -1),
        shape)
