"""InitProducerId (key 22), versions 0-5.

- Idempotent producers (null ``transactional_id``) get a new producer id with
  epoch 0 every time, whatever the v3+ id and epoch say (Kafka's
  TransactionCoordinator.handleInitProducerId); ids are never reused, across
  restarts included (``broker.topics.data.ProducerIds``).
- ``producer_id`` and ``producer_epoch`` must be both -1 or both set:
  INVALID_REQUEST otherwise; an empty transactional id: INVALID_REQUEST.
- Transactions are not served (a documented decision): a transactional id gets
  the non-retriable INVALID_REQUEST, and a warning saying so is logged, so the
  client fails at once instead of retrying.
"""

from __future__ import annotations

import structlog

from broker.apis import api
from protocol.errors import ErrorCode

log = structlog.get_logger("kcoord.producers")


def _refused(code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


@api(key=22, versions=(0, 5))
async def init_producer_id(ctx, request):
    if (request.producer_id == -1) != (request.producer_epoch == -1):
        return _refused(ErrorCode.INVALID_REQUEST)
    if request.transactional_id is not None:
        if request.transactional_id:
            log.warning("init_producer_id.transactional_refused", peer=ctx.peer,
                        client_id=ctx.client_id, transactional_id=request.transactional_id,
                        reason="transactions are not supported")
        return _refused(ErrorCode.INVALID_REQUEST)
    producer_id = await ctx.broker.producer_ids.allocate()
    log.info("producer_id.allocated", producer_id=producer_id, client_id=ctx.client_id)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id,
            "producer_epoch": 0}
