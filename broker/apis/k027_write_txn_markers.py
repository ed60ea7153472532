"""WriteTxnMarkers (key 27), versions 1-2.

A transaction coordinator sends it to the leaders of a transaction's
partitions; so does ``Admin.abortTransaction`` (``kafka-transactions abort``),
which ends a hanging transaction with an abort marker.  Each partition gets the
marker as the coordinator's own append (KafkaApis.handleWriteTxnMarkersRequest):
a control batch, the producer's transaction closed in the partition's producer
state and, aborted, listed in the segment's ``.txnindex``; durable before the
answer.  A ``__consumer_offsets`` partition's group coordinator writes it there
and makes the transaction's offsets count or drops them.

- ALTER on the cluster (what KIP-664 asks of ``abortTransaction``) or
  CLUSTER_ACTION (a coordinator's), else CLUSTER_AUTHORIZATION_FAILED for every
  partition.
- A topic or partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION.
- A marker of an older producer epoch than the partition has seen:
  INVALID_PRODUCER_EPOCH; of an older coordinator epoch:
  TRANSACTION_COORDINATOR_FENCED.
- A ``__consumer_offsets`` partition whose group coordinator is not ready
  (loading, not served): NOT_LEADER_OR_FOLLOWER, which a coordinator and
  ``abortTransaction`` retry, as Kafka maps it.
- ``transaction_version`` (v2) is read, and the marker written as for the
  earlier versions: the stricter epoch rule Kafka 4.2+ applies to markers of
  transaction version 2 (KIP-1228) is not applied here.
"""

from __future__ import annotations

import asyncio

import structlog

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import ALTER, CLUSTER, CLUSTER_ACTION, allowed
from kcoord.broker.topics.data import find_partition
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.layout import OFFSETS_TOPIC

log = structlog.get_logger("kcoord.transactions")

# A group coordinator not ready for the marker: told as a partition leader
# would be (KafkaApis), for the sender to retry.
_NOT_READY = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
              ErrorCode.NOT_COORDINATOR)
# Partitions answered between two turns given to the other clients: a request
# naming a great many (even unknown) ones does not hold the event loop.
PARTITIONS_PER_TURN = 256


@api(key=27, versions=(1, 2))
async def write_txn_markers(ctx, request):
    permitted = allowed(ctx, ALTER, CLUSTER) or allowed(ctx, CLUSTER_ACTION, CLUSTER)
    broker = ctx.broker
    answers = []
    done = 0
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                done += 1
                if done % PARTITIONS_PER_TURN == 0:
                    await asyncio.sleep(0)
                if not permitted:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                elif find_partition(broker, topic.name, index) is None:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code, reason = await broker.transactions.write_marker(
                        topic.name, index, marker.producer_id, marker.producer_epoch,
                        marker.transaction_result, marker.coordinator_epoch)
                    if topic.name == OFFSETS_TOPIC and code in _NOT_READY:
                        code = ErrorCode.NOT_LEADER_OR_FOLLOWER
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
