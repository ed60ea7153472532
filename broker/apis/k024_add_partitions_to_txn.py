"""AddPartitionsToTxn (key 24), versions 0-5.

- v0-3 (producers): the partitions go into the producer's transaction at its
  coordinator (``broker.transactions``), which answers one error for all of
  them.  Before that, as Kafka's KafkaApis: partitions of unknown topics get
  UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, with
  nothing added.  PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
- v4+ (brokers, KIP-890): several transactions at once, added as by a
  transaction.version 2 client; with ``verify_only`` each partition is only
  checked to be in its transaction (NONE, else TRANSACTION_ABORTABLE), as a
  partition leader asks before a transactional producer's first write.
"""

from __future__ import annotations

import asyncio

from kcoord.broker.apis import Later, api
from kcoord.broker.apis.authz import TOPIC, TRANSACTIONAL_ID, WRITE, allowed, allowed_names
from kcoord.protocol.errors import ErrorCode


def _results(topics, codes) -> list[dict]:
    return [{"name": topic.name, "results_by_partition": [
        {"partition_index": p, "partition_error_code": codes(topic.name, p)}
        for p in topic.partitions]} for topic in topics]


async def _one(ctx, transactional_id, producer_id, producer_epoch, topics, verify_only,
               version) -> list[dict]:
    results = _start(ctx, transactional_id, producer_id, producer_epoch, topics, verify_only,
                     version)
    return await results if type(results) is Later else results


def _start(ctx, transactional_id, producer_id, producer_epoch, topics, verify_only,
           version) -> list[dict] | Later:
    """The results for one transaction: at once, or a ``Later`` of them while its
    coordinator adds the partitions."""
    broker = ctx.broker
    if broker.authorizer is not None:
        if not allowed(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
            return _results(topics, lambda t, p: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        names = {t.name for t in topics}
        denied = names - allowed_names(ctx, WRITE, TOPIC, names)
        if denied:
            return _results(topics, lambda t, p: ErrorCode.TOPIC_AUTHORIZATION_FAILED
                            if t in denied else ErrorCode.OPERATION_NOT_ATTEMPTED)
    refused = {}
    for topic in topics:
        known = broker.topics.get(topic.name)
        for p in topic.partitions:
            if version < 4 and known is not None and known.internal:
                # a producer never adds an internal topic itself (KafkaApis
                # leaves them out of its authorization)
                refused[(topic.name, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif known is None or not 0 <= p < known.partitions:
                refused[(topic.name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return _results(topics, lambda t, p: refused.get((t, p), ErrorCode.OPERATION_NOT_ATTEMPTED))
    txns = broker.transactions
    if verify_only:
        verdict = txns.verify(transactional_id, producer_id, producer_epoch,
                              [(t.name, p) for t in topics for p in t.partitions])
        return _results(topics, lambda t, p: verdict[(t, p)])
    partitions = [(t.name, p) for t in topics for p in t.partitions]

    def shape(code) -> list[dict]:
        if code == ErrorCode.PRODUCER_FENCED and version < 2:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return _results(topics, lambda _t, _p: code)
    return Later(txns.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                     client_tv=2 if version >= 4 else 0), shape)


@api(key=24, versions=(0, 5))
def add_partitions_to_txn(ctx, request):
    if ctx.api_version >= 4:
        return _for_brokers(ctx, request)
    # a producer's: answered with no task once the coordinator has added them
    results = _start(ctx, request.v3_and_below_transactional_id,
                     request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
                     request.v3_and_below_topics, False, ctx.api_version)
    if type(results) is Later:
        shape = results.shape
        return Later(results.ticket, lambda code: {
            "throttle_time_ms": 0, "results_by_topic_v3_and_below": shape(code)})
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}


async def _for_brokers(ctx, request):
    version = ctx.api_version
    answers = await asyncio.gather(*(
        _one(ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only,
             version) for t in request.transactions))
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": [
        {"transactional_id": t.transactional_id, "topic_results": results}
        for t, results in zip(request.transactions, answers)]}
