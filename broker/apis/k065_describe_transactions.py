"""DescribeTransactions (key 65), version 0 (``kafka-transactions describe``).

Each transactional id as its coordinator holds it: the state's name, timeout,
start time (-1 when no transaction is open), producer id and epoch, and the
partitions of the open transaction.  An empty id: INVALID_REQUEST; an id the
coordinator does not know (or one expired): TRANSACTIONAL_ID_NOT_FOUND; a
partition still loading: COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DESCRIBE, TRANSACTIONAL_ID, allowed_names
from kcoord.protocol.errors import ErrorCode


def _describe(broker, transactional_id: str) -> dict:
    answer = _refused(transactional_id, ErrorCode.NONE)
    if not transactional_id:
        answer["error_code"] = ErrorCode.INVALID_REQUEST
        return answer
    code, meta = broker.transactions.describe(transactional_id)
    if meta is None:
        answer["error_code"] = code
        return answer
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        topics.setdefault(topic, []).append(partition)
    answer.update(transaction_state=meta.state.display, transaction_timeout_ms=meta.timeout_ms,
                  transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
                  producer_epoch=meta.producer_epoch,
                  topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()])
    return answer


@api(key=65, versions=(0, 0))
def describe_transactions(ctx, request):
    permitted = allowed_names(ctx, DESCRIBE, TRANSACTIONAL_ID, request.transactional_ids)
    return {"throttle_time_ms": 0, "transaction_states": [
        _describe(ctx.broker, transactional_id) if transactional_id in permitted
        else _refused(transactional_id) for transactional_id in request.transactional_ids]}


def _refused(transactional_id: str,
             code: ErrorCode = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) -> dict:
    """An entry with no transaction in it: Kafka's zeros (its schema's defaults)."""
    return {"error_code": code, "transactional_id": transactional_id, "transaction_state": "",
            "transaction_timeout_ms": 0, "transaction_start_time_ms": 0, "producer_id": 0,
            "producer_epoch": 0, "topics": []}
