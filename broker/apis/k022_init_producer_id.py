"""InitProducerId (key 22), versions 0-5.

- Idempotent producers (null ``transactional_id``) get a new producer id with
  epoch 0 every time, whatever the v3+ id and epoch say (Kafka's
  TransactionCoordinator.handleInitProducerId); ids are never reused, across
  restarts included (``broker.topics.data.ProducerIds``).
- ``producer_id`` and ``producer_epoch`` must be both -1 or both set:
  INVALID_REQUEST otherwise; an empty transactional id: INVALID_REQUEST.
- A transactional id goes to its transaction coordinator
  (``broker.transactions``): a new id gets a producer id and epoch 0, a known
  one the next epoch (its open transaction aborted first: the caller is told
  CONCURRENT_TRANSACTIONS and asks again), a timeout above
  ``transaction.max.timeout.ms`` INVALID_TRANSACTION_TIMEOUT.
"""

from __future__ import annotations

import structlog

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import (
    CLUSTER,
    IDEMPOTENT_WRITE,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    allowed,
    allowed_on_any,
)
from kcoord.protocol.errors import ErrorCode

log = structlog.get_logger("kcoord.producers")


def _refused(code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


@api(key=22, versions=(0, 5))
async def init_producer_id(ctx, request):
    if (request.producer_id == -1) != (request.producer_epoch == -1):
        return _refused(ErrorCode.INVALID_REQUEST)
    if request.transactional_id is not None:
        if not request.transactional_id:
            return _refused(ErrorCode.INVALID_REQUEST)
        if not allowed(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
            return _refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        version = ctx.api_version
        code, pid, epoch = await ctx.broker.transactions.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms,
            request.producer_id if version >= 3 else -1,
            request.producer_epoch if version >= 3 else -1)
        if code == ErrorCode.PRODUCER_FENCED and version < 4:
            code = ErrorCode.INVALID_PRODUCER_EPOCH  # the code older clients know
        if code != ErrorCode.NONE:
            return _refused(code)
        log.info("producer_id.initialized", transactional_id=request.transactional_id,
                 producer_id=pid, producer_epoch=epoch, client_id=ctx.client_id)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": pid,
                "producer_epoch": epoch}
    # an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on a topic
    if ctx.broker.authorizer is not None and not (
            allowed(ctx, IDEMPOTENT_WRITE, CLUSTER) or allowed_on_any(ctx, WRITE, TOPIC)):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    producer_id = await ctx.broker.producer_ids.allocate()
    log.info("producer_id.allocated", producer_id=producer_id, client_id=ctx.client_id)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id,
            "producer_epoch": 0}
