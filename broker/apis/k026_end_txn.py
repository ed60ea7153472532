"""EndTxn (key 26), versions 0-5.

Commits or aborts the producer's transaction at its coordinator
(``broker.transactions``): answered once the PrepareCommit or PrepareAbort
state is durable; the end markers are written to the transaction's partitions
right after.  PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.  v5's
producer id and epoch are -1: transaction.version 1 bumps no epoch at the end.
"""

from __future__ import annotations

from broker.apis import api
from protocol.errors import ErrorCode


@api(key=26, versions=(0, 5))
async def end_txn(ctx, request):
    code = await ctx.broker.transactions.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.committed)
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
