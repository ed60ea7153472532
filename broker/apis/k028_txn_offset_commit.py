"""TxnOffsetCommit (key 28), versions 0-6.

A transactional producer commits a group's offsets inside its transaction:
they are written to the group's ``__consumer_offsets`` partition in a batch
of that transaction and count once it commits (dropped if it aborts);
meanwhile OffsetFetch with ``require_stable`` answers them
UNSTABLE_OFFSET_COMMIT.

- Topics are checked first, as OffsetCommit's: UNKNOWN_TOPIC_OR_PARTITION
  (v6 names topics by id: UNKNOWN_TOPIC_ID).  An empty group id:
  INVALID_GROUP_ID.
- The group's partition must be in the transaction (AddOffsetsToTxn), unless
  the partition already has the transaction open: INVALID_TXN_STATE up to v3,
  TRANSACTION_ABORTABLE at v4; v5+ (transaction.version 2) add it themselves.
  The coordinator's other answers: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH.
- Group checks (v3+ carry the member): a member or generation given is
  checked as OffsetCommit checks it, with no rebalance check; none given is
  taken even by a group with members.  A group that does not exist is made
  (a simple group) for a producer that names no generation; with one:
  GROUP_ID_NOT_FOUND from v6, ILLEGAL_GENERATION before.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import GROUP, READ, TRANSACTIONAL_ID, WRITE, allowed
from kcoord.broker.apis.group_support import commit_answer, committed_offsets, every_partition
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.layout import OFFSETS_TOPIC


async def _transaction_error(ctx, request, version: int) -> ErrorCode:
    broker = ctx.broker
    groups = broker.groups
    if groups.open_transaction(request.group_id, request.producer_id, request.producer_epoch):
        return ErrorCode.NONE
    partition = (OFFSETS_TOPIC, groups.partition_for(request.group_id))
    txns = broker.transactions
    if version >= 5:
        code = await txns.add_partitions(request.transactional_id, request.producer_id,
                                         request.producer_epoch, [partition], client_tv=2)
    else:
        code = txns.verify(request.transactional_id, request.producer_id,
                           request.producer_epoch, [partition])[partition]
        if code == ErrorCode.TRANSACTION_ABORTABLE and version < 4:
            code = ErrorCode.INVALID_TXN_STATE
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return code


@api(key=28, versions=(0, 6))
async def txn_offset_commit(ctx, request):
    version = ctx.api_version
    broker = ctx.broker
    if not allowed(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return every_partition(request.topics, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(ctx, READ, GROUP, request.group_id):
        return every_partition(request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    named, unknown_ids, answer, offsets = committed_offsets(
        broker, request.topics, version >= 6, version >= 2, ctx)
    if offsets:
        code = ErrorCode.INVALID_GROUP_ID if not request.group_id else \
            await _transaction_error(ctx, request, version)
        if code != ErrorCode.NONE:
            committed = dict.fromkeys(offsets, code)
        else:
            committed = await broker.groups.txn_commit(
                request.group_id, request.producer_id, request.producer_epoch,
                request.generation_id_or_member_epoch if version >= 3 else -1,
                request.member_id if version >= 3 else "",
                request.group_instance_id if version >= 3 else None, offsets, version)
        for tp, c in committed.items():
            if c == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < 2:
                c = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif c == ErrorCode.STALE_MEMBER_EPOCH and version < 6:
                c = ErrorCode.ILLEGAL_GENERATION
            answer[tp] = c
    return commit_answer(request.topics, named, unknown_ids, answer)
