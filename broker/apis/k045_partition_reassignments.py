"""AlterPartitionReassignments (key 45), versions 0-1, and
ListPartitionReassignments (key 46), version 0, as a one-node Kafka answers
them: a partition can only be "moved" to this node, where it already is
(answered NONE, nothing to do), so no reassignment is ever in progress; any
other replica list is refused as Kafka's controller refuses it (a broker that
is not registered, a broker named twice, an empty list), cancelling answers
NO_REASSIGNMENT_IN_PROGRESS, unknown topics and partitions
UNKNOWN_TOPIC_OR_PARTITION; a ``timeout_ms`` of 0 or less REQUEST_TIMED_OUT for
the request and each partition, without messages, as Kafka's controller
answers (``broker.apis.controller``), unless no topic is named.  Messages are
Kafka 4.4's."""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import ALTER, CLUSTER, CLUSTER_REFUSED, DESCRIBE, allowed
from kcoord.broker.apis.controller import TIMED_OUT, timed_out
from kcoord.protocol.errors import ErrorCode


@api(key=45, versions=(0, 1))
def alter_partition_reassignments(ctx, request):
    broker = ctx.broker
    if not allowed(ctx, ALTER, CLUSTER):
        return {"throttle_time_ms": 0,
                "allow_replication_factor_change": request.allow_replication_factor_change
                if ctx.api_version >= 1 else True,
                "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": CLUSTER_REFUSED, "responses": []}
    if timed_out(request.timeout_ms) and request.topics:
        # The error answer Kafka builds leaves allow_replication_factor_change
        # at its default.
        return {"throttle_time_ms": 0, "allow_replication_factor_change": True,
                "error_code": TIMED_OUT, "error_message": None, "responses": [
                    {"name": t.name, "partitions": [
                        {"partition_index": p.partition_index, "error_code": TIMED_OUT,
                         "error_message": None} for p in t.partitions]}
                    for t in request.topics]}
    node = broker.config.node_id
    responses = []
    for t in request.topics:
        topic = broker.topics.get(t.name)
        partitions = []
        for p in t.partitions:
            code, message = ErrorCode.NONE, None
            replicas = p.replicas
            if topic is None:
                code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Unable to find a topic named {t.name}.")
            elif not 0 <= p.partition_index < topic.partitions:
                code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Unable to find partition {t.name}:{p.partition_index}.")
            elif replicas is None:
                code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            elif not replicas:
                code, message = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "The manual partition assignment includes an empty replica "
                                 "list.")
            else:
                other = [b for b in replicas if b != node]
                twice = [b for b in replicas if replicas.count(b) > 1]
                if other:
                    code, message = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"The manual partition assignment includes broker "
                                     f"{other[0]}, but no such broker is registered.")
                elif twice:
                    code, message = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"The manual partition assignment includes the broker "
                                     f"{twice[0]} more than once.")
            partitions.append({"partition_index": p.partition_index, "error_code": code,
                               "error_message": message})
        responses.append({"name": t.name, "partitions": partitions})
    return {"throttle_time_ms": 0,
            "allow_replication_factor_change": request.allow_replication_factor_change
            if ctx.api_version >= 1 else True,
            "error_code": ErrorCode.NONE,
            # (Kafka's controller answers a request naming no topic with its
            # answer's defaults, where the message is empty rather than null.)
            "error_message": None if request.topics else "", "responses": responses}


@api(key=46, versions=(0, 0))
def list_partition_reassignments(ctx, request):
    if not allowed(ctx, DESCRIBE, CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": CLUSTER_REFUSED, "topics": []}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "topics": []}
