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
- Transactions are not served (a documented decision): key type TRANSACTION
  gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED with "transactions are not
  supported", and a warning is logged.  Of the codes Kafka gives here, it is
  the one every client takes as final: librdkafka asks again every 500 ms on
  any other (INVALID_REQUEST included) until its own timeout, while the Java
  client, kafka-python and aiokafka stop at once on either.  Share groups (key type 2, v6) are not
  served either: INVALID_REQUEST.  Any other key type: INVALID_REQUEST for
  every key, as Kafka's failed key-type lookup.
"""

from __future__ import annotations

import structlog

from broker.apis import api
from protocol.errors import ErrorCode

log = structlog.get_logger("kcoord.groups")

GROUP, TRANSACTION, SHARE = 0, 1, 2
NO_TRANSACTIONS = "transactions are not supported"


def _resolve(ctx, key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type == GROUP:
        return ErrorCode.NONE, None
    if key_type == TRANSACTION:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, NO_TRANSACTIONS
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
    if key_type == TRANSACTION:
        log.warning("find_coordinator.transactional_refused", peer=ctx.peer,
                    client_id=ctx.client_id, keys=keys[:5], reason=NO_TRANSACTIONS)
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
