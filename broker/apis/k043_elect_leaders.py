"""ElectLeaders (key 43), versions 0-2, as a one-node Kafka answers it: this
node leads every partition already, so each partition named gets
ELECTION_NOT_NEEDED (preferred or unclean alike); an unknown topic or
partition UNKNOWN_TOPIC_OR_PARTITION; ``topic_partitions`` null (every
partition) lists each topic with no result, as Kafka lists only the
partitions it elected; an unknown election type INVALID_REQUEST, for the
whole request and each partition; ``timeout_ms`` of 0 or less
REQUEST_TIMED_OUT, likewise, without messages, as Kafka's controller answers
(``broker.apis.controller``), unless ``topic_partitions`` is empty.  Messages
are Kafka 4.4's."""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import ALTER, CLUSTER, CLUSTER_REFUSED, allowed
from kcoord.broker.apis.controller import TIMED_OUT, timed_out
from kcoord.protocol.errors import ErrorCode

PREFERRED, UNCLEAN = 0, 1


@api(key=43, versions=(0, 2))
def elect_leaders(ctx, request):
    broker = ctx.broker
    election = request.election_type if ctx.api_version >= 1 else PREFERRED
    if not allowed(ctx, ALTER, CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "replica_election_results": [
                    {"topic": tp.topic, "partition_result": [
                        {"partition_id": p, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         "error_message": CLUSTER_REFUSED}
                        for p in tp.partitions]}
                    for tp in request.topic_partitions or []]}
    if timed_out(request.timeout_ms) and request.topic_partitions != []:
        return {"throttle_time_ms": 0, "error_code": TIMED_OUT,
                "replica_election_results": [
                    {"topic": tp.topic, "partition_result": [
                        {"partition_id": p, "error_code": TIMED_OUT, "error_message": None}
                        for p in tp.partitions]}
                    for tp in request.topic_partitions or []]}
    if request.topic_partitions is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                "replica_election_results": [
                    {"topic": name, "partition_result": []}
                    for name in broker.topics.topic_names()]}
    bad_type = election not in (PREFERRED, UNCLEAN)
    results = []
    for tp in request.topic_partitions:
        topic = broker.topics.get(tp.topic)
        partitions = []
        for p in tp.partitions:
            if bad_type:
                code, message = ErrorCode.INVALID_REQUEST, f"Unknown election type {election}"
            elif topic is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {tp.topic}"
            elif not 0 <= p < topic.partitions:
                code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"No such partition as {tp.topic}-{p}")
            else:
                code, message = (ErrorCode.ELECTION_NOT_NEEDED,
                                 "Leader election not needed for topic partition.")
            partitions.append({"partition_id": p, "error_code": code, "error_message": message})
        results.append({"topic": tp.topic, "partition_result": partitions})
    return {"throttle_time_ms": 0,
            "error_code": ErrorCode.INVALID_REQUEST if bad_type else ErrorCode.NONE,
            "replica_election_results": results}
