"""ConsumerGroupHeartbeat (key 68), versions 0-1: the consumer group protocol
(KIP-848).

- Served when ``group.coordinator.rebalance.protocols`` lists ``consumer``;
  otherwise not advertised, and answered UNSUPPORTED_VERSION as Kafka answers
  it with the protocol disabled.
- The coordinator (``broker.groups.consumer_membership``) validates, joins,
  reconciles or removes the member; the answer waits until the group's records
  are durable.
- With an authorizer: READ on the group, DESCRIBE on every subscribed topic
  name, and a regular expression resolves to the topics the member whose
  heartbeat asked for the resolution may DESCRIBE, as Kafka's
  TopicRegexResolver keeps them.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import (
    DESCRIBE,
    GROUP,
    READ,
    TOPIC,
    allowed,
    allowed_names,
    describable_topics,
)
from kcoord.broker.apis.group_support import client_host, when_answered
from kcoord.broker.groups.consumer_membership import HeartbeatRequest, heartbeat_error
from kcoord.protocol.errors import ErrorCode


def consumer_protocol_enabled(broker) -> bool:
    return "consumer" in broker.config["group.coordinator.rebalance.protocols"]


@api(key=68, versions=(0, 1), advertised_if=consumer_protocol_enabled)
def consumer_group_heartbeat(ctx, request):
    if not consumer_protocol_enabled(ctx.broker):
        return dict(heartbeat_error(ErrorCode.UNSUPPORTED_VERSION), throttle_time_ms=0)
    if ctx.broker.authorizer is not None:
        if not allowed(ctx, READ, GROUP, request.group_id):
            return dict(heartbeat_error(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                        throttle_time_ms=0)
        names = request.subscribed_topic_names or []
        if set(names) - allowed_names(ctx, DESCRIBE, TOPIC, names):
            # Kafka 4.4 answers it without a message
            return dict(heartbeat_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                        throttle_time_ms=0)
    req = HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=request.subscribed_topic_names,
        subscribed_topic_regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor,
        owned=None if request.topic_partitions is None else [
            {"topic_id": t.topic_id, "partitions": list(t.partitions)}
            for t in request.topic_partitions],
        client_id=ctx.client_id or "", client_host=client_host(ctx),
        version=ctx.api_version, describable=describable_topics(ctx))
    return when_answered(ctx.broker.groups.consumer_heartbeat(req),
                         lambda answer: dict(answer, throttle_time_ms=0))
