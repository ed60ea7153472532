"""AddOffsetsToTxn (key 25), versions 0-4.

Adds the ``__consumer_offsets`` partition of the group (the one its
coordinator owns) to the producer's transaction, before the producer sends
TxnOffsetCommit: the transaction coordinator's checks and errors are
AddPartitionsToTxn's.  PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import GROUP, READ, TRANSACTIONAL_ID, WRITE, allowed
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.layout import OFFSETS_TOPIC


@api(key=25, versions=(0, 4))
async def add_offsets_to_txn(ctx, request):
    broker = ctx.broker
    if not allowed(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return {"throttle_time_ms": 0,
                "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not allowed(ctx, READ, GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    partition = broker.groups.partition_for(request.group_id)
    code = await broker.transactions.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch,
        [(OFFSETS_TOPIC, partition)])
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time_ms": 0, "error_code": code}
