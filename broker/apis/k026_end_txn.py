"""EndTxn (key 26), versions 0-5.

Commits or aborts the producer's transaction at its coordinator
(``broker.transactions``): answered once the PrepareCommit or PrepareAbort
state is durable; the end markers are written to the transaction's partitions
right after.  PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.

v5 is transaction.version 2 (KIP-890), as Kafka takes it whatever the
cluster's level: every end bumps the producer's epoch, the answer carries the
producer id and epoch to go on with, a retry of an end already made is
answered again, and an abort with no transaction open is an empty one.
Below v5 the answer's producer id and epoch are -1.
"""

from __future__ import annotations

from kcoord.broker.apis import Later, api
from kcoord.broker.apis.authz import TRANSACTIONAL_ID, WRITE, allowed
from kcoord.protocol.errors import ErrorCode


@api(key=26, versions=(0, 5))
def end_txn(ctx, request):
    version = ctx.api_version
    if not allowed(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return {"throttle_time_ms": 0,
                "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}

    def shape(answer) -> dict:
        code, producer_id, epoch = answer if version >= 5 else (answer, -1, -1)
        if code == ErrorCode.PRODUCER_FENCED and version < 2:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": producer_id,
                "producer_epoch": epoch}
    # answered once the coordinator's Prepare state is durable, with no task
    return Later(ctx.broker.transactions.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.committed, tv2=version >= 5), shape)
