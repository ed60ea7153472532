"""ConsumerGroupDescribe (key 69), versions 0-1 (KIP-848).

- Each group: its state, epochs, assignor and members with their current and
  target assignments; a group that is not a consumer group, or none, gets
  GROUP_ID_NOT_FOUND.
- With an authorizer: DESCRIBE on each group, and a group whose members' current
  or target assignment holds a topic the client may not DESCRIBE is answered
  TOPIC_AUTHORIZATION_FAILED with nothing else, as Kafka's
  handleConsumerGroupDescribe answers it.
- Advertised and served as ConsumerGroupHeartbeat is.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DESCRIBE, GROUP, TOPIC, allowed_names, operations
from kcoord.broker.apis.group_support import NOT_PROVIDED
from kcoord.broker.apis.k068_consumer_group_heartbeat import consumer_protocol_enabled
from kcoord.protocol.errors import ErrorCode


@api(key=69, versions=(0, 1), advertised_if=consumer_protocol_enabled)
def consumer_group_describe(ctx, request):
    if not consumer_protocol_enabled(ctx.broker):
        return {"throttle_time_ms": 0, "groups": [
            {"group_id": g, "error_code": ErrorCode.UNSUPPORTED_VERSION, "group_state": "",
             "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}
            for g in request.group_ids]}
    ids = list(request.group_ids)
    permitted = allowed_names(ctx, DESCRIBE, GROUP, ids)
    described = ctx.broker.groups.consumer_describe([g for g in ids if g in permitted],
                                                    ctx.api_version)
    if len(permitted) < len(set(ids)):
        answered = iter(described)
        described = [next(answered) if g in permitted else {
            "group_id": g, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
            "error_message": None, "group_state": "", "group_epoch": 0,
            "assignment_epoch": 0, "assignor_name": "", "members": []} for g in ids]
    for entry in described:
        entry["authorized_operations"] = operations(ctx, GROUP, entry["group_id"]) \
            if request.include_authorized_operations and entry["error_code"] == ErrorCode.NONE \
            else NOT_PROVIDED
    if ctx.broker.authorizer is not None:
        described = _hide_undescribable_topics(ctx, described)
    return {"throttle_time_ms": 0, "groups": described}


def _topics_of(entry: dict) -> set[str]:
    return {tp["topic_name"] for member in entry["members"]
            for assigned in (member["assignment"], member["target_assignment"])
            for tp in assigned["topic_partitions"]}


def _hide_undescribable_topics(ctx, described: list[dict]) -> list[dict]:
    topics = set().union(*map(_topics_of, described))
    refused = topics - allowed_names(ctx, DESCRIBE, TOPIC, topics)
    if not refused:
        return described
    return [entry if not (_topics_of(entry) & refused) else {
        "group_id": entry["group_id"], "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "error_message": "The group has described topic(s) that the client is not "
                         "authorized to describe.",
        "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
        "members": [], "authorized_operations": NOT_PROVIDED} for entry in described]
