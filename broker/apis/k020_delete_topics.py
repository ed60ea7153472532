"""DeleteTopics (key 20), versions 0-6.

- v0-5 name topics in ``topic_names``; v6 names each by name or by id.
- Unknown name: UNKNOWN_TOPIC_OR_PARTITION; unknown id: UNKNOWN_TOPIC_ID;
  both a name and an id, or neither: INVALID_REQUEST; a name or id given twice:
  INVALID_REQUEST (Kafka's ControllerApis.deleteTopics).
- ``delete.topic.enable=false``: TOPIC_DELETION_DISABLED from v3, INVALID_REQUEST
  below, for every entry of the request as it was given (names, ids, entries
  that name both or neither), without a message, as Kafka's ControllerApis
  refuses it before looking at any of them.
- ``timeout_ms`` of 0 or less: REQUEST_TIMED_OUT for every topic named, and
  nothing deleted, as Kafka's controller answers (``broker.apis.controller``),
  unless every entry was refused before the controller is asked (both or
  neither of name and id, given twice); deletion disabled is answered first.
  Either way each entry is answered as given, in the order given.
- ``__consumer_offsets`` cannot be deleted (docs/deviations.md): Kafka would let
  an operator delete it and lose every group's offsets.  Other internal names
  (``__transaction_state`` …) are deleted as Kafka deletes them.
- A deleted topic leaves metadata at once and its partition folders are removed.
"""

from __future__ import annotations

from collections import Counter

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import CLUSTER, DELETE, DESCRIBE, TOPIC, TOPIC_REFUSED, allowed
from kcoord.broker.apis.controller import TIMED_OUT, timed_out
from kcoord.broker.topics.manager import TopicError
from kcoord.storage.layout import OFFSETS_TOPIC
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.wire import ZERO_UUID


@api(key=20, versions=(0, 6))
async def delete_topics(ctx, request):
    broker = ctx.broker
    topics = broker.topics
    version = ctx.api_version
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    names = Counter(n for n, i in wanted if n is not None and i == ZERO_UUID)
    ids = Counter(i for n, i in wanted if n is None and i != ZERO_UUID)
    if not broker.config["delete.topic.enable"]:
        refused = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
    elif timed_out(request.timeout_ms) and (
            any(c == 1 for c in names.values()) or any(c == 1 for c in ids.values())):
        refused = TIMED_OUT
    else:
        refused = None
    if refused is not None:  # (DeleteTopicsRequest.getErrorResponse)
        return {"throttle_time_ms": 0, "responses": [
            {"name": name, "topic_id": topic_id, "error_code": refused, "error_message": None}
            for name, topic_id in wanted]}
    # With an authorizer (ControllerApis.deleteTopics): DELETE on the cluster, or
    # DESCRIBE and DELETE on each topic; nothing said of a topic one may not see
    secured = broker.authorizer is not None and not allowed(ctx, DELETE, CLUSTER)
    responses = []
    reported_dupes = set()

    def answer(name, topic_id, code, message=None):
        responses.append({"name": name, "topic_id": topic_id, "error_code": code,
                          "error_message": message})

    for name, topic_id in wanted:
        if name is None and topic_id == ZERO_UUID:
            answer(None, ZERO_UUID, ErrorCode.INVALID_REQUEST,
                   "Neither topic name nor id were specified.")
            continue
        if name is not None and topic_id != ZERO_UUID:
            answer(name, topic_id, ErrorCode.INVALID_REQUEST,
                   "You may not specify both topic name and topic id.")
            continue
        if (name is not None and names[name] > 1) or (name is None and ids[topic_id] > 1):
            key = name if name is not None else topic_id
            if key not in reported_dupes:
                reported_dupes.add(key)
                answer(name, topic_id, ErrorCode.INVALID_REQUEST,
                       "Duplicate topic name." if name is not None else "Duplicate topic id.")
            continue
        topic = topics.get(name) if name is not None else topics.by_id(topic_id)
        if secured:
            shown = name if name is not None else (topic.name if topic is not None else None)
            describable = shown is not None and allowed(ctx, DESCRIBE, TOPIC, shown)
            if shown is not None and (not describable or topic is not None and not allowed(
                    ctx, DELETE, TOPIC, shown)):
                # an unknown topic one may describe is answered as unknown, below
                visible = name is not None or describable
                answer(shown if visible else None, ZERO_UUID if name is not None else topic_id,
                       ErrorCode.TOPIC_AUTHORIZATION_FAILED, TOPIC_REFUSED)
                continue
        if topic is None:
            if name is not None:
                answer(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       "This server does not host this topic-partition.")
            else:
                answer(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID,
                       "This server does not host this topic ID.")
            continue
        if topic.name == OFFSETS_TOPIC:
            answer(topic.name, topic.topic_id, ErrorCode.INVALID_REQUEST,
                   f"Internal topic {topic.name} cannot be deleted.")
            continue
        try:
            await topics.delete(topic)
        except TopicError as exc:
            answer(topic.name, topic.topic_id, exc.code, exc.message)
            continue
        # Fetches parked on its partitions answer now (Kafka's DelayedFetch
        # completes when a partition goes away).
        for partition in range(topic.partitions):
            broker.fetch_waiters.notify((topic.name, partition))
        # Its committed offsets get tombstones in every group.
        broker.groups.delete_topic_offsets({topic.name})
        answer(topic.name, topic.topic_id, ErrorCode.NONE)
    return {"throttle_time_ms": 0, "responses": responses}
