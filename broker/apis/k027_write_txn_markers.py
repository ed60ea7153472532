"""WriteTxnMarkers (key 27), versions 1-2.

A transaction coordinator sends it to the leaders of a transaction's
partitions; so does ``Admin.abortTransaction`` (``kafka-transactions abort``),
which ends a hanging transaction with an abort marker.  Each partition gets the
marker as the coordinator's own append (KafkaApis.handleWriteTxnMarkersRequest):
a control batch, the producer's transaction closed in the partition's producer
state and, aborted, listed in the segment's ``.txnindex``; durable before the
answer.  A ``__consumer_offsets`` partition's group coordinator writes it there
and makes the transaction's offsets count or drops them.

- Without CLUSTER_ACTION on the cluster: CLUSTER_AUTHORIZATION_FAILED for every
  partition.
- A topic or partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION.
- A marker of an older producer epoch than the partition has seen:
  INVALID_PRODUCER_EPOCH; of an older coordinator epoch:
  TRANSACTION_COORDINATOR_FENCED.
- ``transaction_version`` (v2) changes nothing here: the marker is the same.
"""

from __future__ import annotations

import structlog

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import CLUSTER, CLUSTER_ACTION, allowed
from kcoord.broker.topics.data import find_partition
from kcoord.protocol.errors import ErrorCode

log = structlog.get_logger("kcoord.transactions")


@api(key=27, versions=(1, 2))
async def write_txn_markers(ctx, request):
    permitted = allowed(ctx, CLUSTER_ACTION, CLUSTER)
    broker = ctx.broker
    answers = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                if not permitted:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                elif find_partition(broker, topic.name, index) is None:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code, reason = await broker.transactions.write_marker(
                        topic.name, index, marker.producer_id, marker.producer_epoch,
                        marker.transaction_result, marker.coordinator_epoch)
                    log.info("transactions.marker_written" if code == ErrorCode.NONE
                             else "transactions.marker_refused",
                             topic=topic.name, partition=index, producer_id=marker.producer_id,
                             producer_epoch=marker.producer_epoch,
                             commit=marker.transaction_result,
                             coordinator_epoch=marker.coordinator_epoch, error=code.name,
                             reason=reason, client_id=ctx.client_id)
                partitions.append({"partition_index": index, "error_code": code})
            topics.append({"name": topic.name, "partitions": partitions})
        answers.append({"producer_id": marker.producer_id, "topics": topics})
    return {"markers": answers}
