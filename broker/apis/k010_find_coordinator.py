"""FindCoordinator (key 10), versions 0-6.

- v0 asks for a group; v1-3 carry a key type; v4+ ask for several keys at
  once and answer one entry per key, in request order.
- Every ``__consumer_offsets`` partition is led by this broker, so a group's
  coordinator is this node, as advertised (Kafka answers with the partition
  leader's endpoint on the listener the request came in on).  Whether the
  partition is still loading is not checked here: the group APIs answer
  COORDINATOR_LOAD_IN_PROGRESS.
- v1-3 successes carry the error message "NONE" (Kafka fills it from the error
  enum); v4+ successes an empty message (Kafka 4.x).
- Key type TRANSACTION: this node too (the transactional id's
  ``__transaction_state`` partition is led here).  The first such lookup
  creates ``__transaction_state`` and is answered COORDINATOR_NOT_AVAILABLE,
  as Kafka answers while it creates the topic; the client asks again.
- Share groups (key type 2, v6) are not served: INVALID_REQUEST.  Any other key type: INVALID_REQUEST for
  every key, as Kafka's failed key-type lookup.
"""

from __future__ import annotations

import structlog

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import (
    DESCRIBE,
    GROUP_REFUSED,
    TRANSACTIONAL_ID,
    TRANSACTIONAL_ID_REFUSED,
    allowed_names,
)
from kcoord.broker.apis.authz import GROUP as GROUP_RESOURCE
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.layout import TRANSACTION_STATE_TOPIC

log = structlog.get_logger("kcoord.groups")

GROUP, TRANSACTION, SHARE = 0, 1, 2
NOT_AVAILABLE = "The coordinator is not available."


def _resolve(ctx, key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type in (GROUP, TRANSACTION):
        return ErrorCode.NONE, None
    if key_type == SHARE and ctx.api_version >= 6:
        return ErrorCode.INVALID_REQUEST, "share groups are not supported"
    return ErrorCode.INVALID_REQUEST, None


@api(key=10, versions=(0, 6))
def find_coordinator(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    key_type = request.key_type if version >= 1 else GROUP
    code, message = _resolve(ctx, key_type)
    keys = list(request.coordinator_keys) if version >= 4 else [request.key]
    if broker.authorizer is not None and code == ErrorCode.NONE:
        # DESCRIBE on the group or the transactional id, key by key
        resource, refusal = ((GROUP_RESOURCE, ErrorCode.GROUP_AUTHORIZATION_FAILED)
                             if key_type == GROUP else
                             (TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        refused = set(keys) - allowed_names(ctx, DESCRIBE, resource, keys)
        if refused:
            if version < 4:
                return _answer(ctx, keys, refusal, _AUTHORIZATION_MESSAGES[refusal])
            if len(refused) == len(set(keys)):
                return _answer(ctx, keys, refusal, "")
            answer = _answer(ctx, keys, code, message)
            for entry in answer["coordinators"]:
                if entry["key"] in refused:
                    entry.update(node_id=-1, host="", port=-1, error_code=refusal,
                                 error_message="")
            return answer
    if key_type == TRANSACTION and TRANSACTION_STATE_TOPIC not in broker.topics.topics:
        return _creating_the_topic(ctx, keys)
    return _answer(ctx, keys, code, message)


_AUTHORIZATION_MESSAGES = {
    ErrorCode.GROUP_AUTHORIZATION_FAILED: GROUP_REFUSED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: TRANSACTIONAL_ID_REFUSED,
}


async def _creating_the_topic(ctx, keys):
    """The first transactional lookup makes ``__transaction_state``; like Kafka,
    it is answered COORDINATOR_NOT_AVAILABLE, and the client asks again."""
    existed = await ctx.broker.topics.ensure_transaction_state()
    if existed:
        return _answer(ctx, keys, ErrorCode.NONE, None)
    return _answer(ctx, keys, ErrorCode.COORDINATOR_NOT_AVAILABLE, NOT_AVAILABLE)


def _answer(ctx, keys, code: ErrorCode, message: str | None):
    broker = ctx.broker
    version = ctx.api_version
    ok = code == ErrorCode.NONE
    node = (broker.node_id, *ctx.advertised) if ok else (-1, "", -1)
    if version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [
            {"key": key, "node_id": node[0], "host": node[1], "port": node[2],
             "error_code": code, "error_message": "" if ok else message} for key in keys]}
    return {"throttle_time_ms": 0, "error_code": code,
            "error_message": "NONE" if ok else (message or _default_message(code)),
            "node_id": node[0], "host": node[1], "port": node[2]}


def _default_message(code: ErrorCode) -> str:
    return {ErrorCode.INVALID_REQUEST:
            "This most likely occurs because of a request being malformed by the client "
            "library or the message was sent to an incompatible broker. See the broker logs "
            "for more details."}.get(code, code.name)
