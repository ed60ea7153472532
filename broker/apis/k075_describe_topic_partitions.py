"""DescribeTopicPartitions (key 75), version 0: topics and their partitions, a page
at a time (what ``kafka-topics --describe`` asks of a Kafka 4.x broker).

As Kafka 4.4's broker answers it (``DescribeTopicPartitionsRequestHandler`` and
its metadata cache):

- An empty ``topics`` lists every topic, internal ones too; otherwise the named
  topics, each once.  Either way only the names at or after the cursor's topic
  (in Java's string order) are answered, in that order.
- A cursor naming a topic the request does not list, or a negative partition,
  refuses the whole request: INVALID_REQUEST for every topic the request names,
  in the request's order, and nothing else.
- The cursor's partition is where its topic starts; every later topic starts
  at partition 0.  A start past a topic's last partition answers the topic with
  no partitions.
- At most ``min(response_partition_limit, 2000)`` partitions (at least 1) are
  answered.  A topic whose partitions do not all fit is answered with those that
  do, and ``next_cursor`` names it and its first partition left out; a topic
  reached when the budget is spent exactly is left out, and ``next_cursor``
  names it at partition 0 (even a topic that does not exist).  Otherwise
  ``next_cursor`` is null.
- Without a cursor, a topic named "" fails the whole request the same way but
  with UNKNOWN_SERVER_ERROR (Kafka 4.4 takes it for the absent cursor's topic and
  fails on the null cursor).
- A named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION, or
  INVALID_TOPIC_EXCEPTION when its name is not a legal topic name; a null topic
  id, no partitions, and flagged internal when it bears an internal topic's name.
- One broker, this node, leads every partition with leader epoch 0, as in
  Metadata; the ELR lists are empty.  Authorized operations: with no authorizer
  Kafka reports every operation of a topic, for every topic answered (unknown
  ones too), and the request has no flag to turn it off.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DESCRIBE, TOPIC, allowed, operations
from kcoord.broker.apis.k003_metadata import TOPIC_OPERATIONS, partition_entries
from kcoord.broker.topics.manager import validate_topic_name
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.wire import ZERO_UUID
from kcoord.storage.layout import INTERNAL_TOPICS

# Kafka's max.request.partition.size.limit default: the most partitions one
# answer carries, whatever the request asks.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
_INT32 = 1 << 32


def _java_order(names) -> list[str]:
    """``names`` sorted as Java's ``String.compareTo`` sorts them (UTF-16 code
    units: a name beyond the BMP sorts before U+E000-U+FFFF, unlike Python's)."""
    names = list(names)
    if all(n.isascii() for n in names):
        return sorted(names)
    return sorted(names, key=_utf16)


def _utf16(name: str) -> bytes:
    return name.encode("utf-16-be", "surrogatepass")


def _at_or_after(name: str, first: str) -> bool:
    if name.isascii() and first.isascii():
        return name >= first
    return _utf16(name) >= _utf16(first)


def _selected(request):
    """The names the request asks for at or after its cursor's topic, in Java's
    order, or None when it asks for every topic; or the error code that refuses
    it whole.  Needs no broker state: for a large request it runs in a worker
    thread."""
    cursor = request["cursor"]
    first = cursor["topic_name"] if cursor is not None else ""
    requested = request["topics"]
    if not requested:
        names = None
    else:
        names = {t["name"] for t in requested}
        names = [n for n in names if _at_or_after(n, first)]
        if cursor is not None and cursor["topic_name"] not in names:
            return ErrorCode.INVALID_REQUEST
        names = _java_order(names)
    if cursor is not None and cursor["partition_index"] < 0:
        return ErrorCode.INVALID_REQUEST
    if cursor is None and names and names[0] == "":
        # Kafka takes a topic named as the absent cursor's topic ("") for the
        # cursor's and reads the null cursor's partition: its NullPointerException
        # fails the request (UNKNOWN_SERVER_ERROR).  "" sorts first, so it is
        # always reached.
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return names


def _prepare(request, version: int):
    """A large request's names, each once, in order, from the cursor's topic on
    (what ``_selected`` then finds again at once); a refused request is kept, its
    answer names every topic as asked."""
    selected = _selected(request)
    if isinstance(selected, list):
        request["topics"] = [{"name": name} for name in selected]
    return request


@api(key=75, versions=(0, 0), prepare=_prepare)
def describe_topic_partitions(ctx, request):
    selected = _selected(request)
    if isinstance(selected, ErrorCode):
        return _refused(request, selected)
    broker = ctx.broker
    topics = broker.topics
    cursor = request.cursor
    list_all = selected is None
    if list_all:
        first = cursor.topic_name if cursor is not None else ""
        selected = _java_order(n for n in topics.topic_names() if _at_or_after(n, first))
    start_topic = cursor.topic_name if cursor is not None else None
    limit = broker.config.get("max.request.partition.size.limit",
                              MAX_REQUEST_PARTITION_SIZE_LIMIT)
    remaining = max(min(limit, request.response_partition_limit), 1)
    node = broker.node_id
    entries = []
    next_cursor = None
    secured = broker.authorizer is not None
    ops = (lambda name: operations(ctx, TOPIC, name)) if secured else \
        (lambda name: TOPIC_OPERATIONS)
    for name in selected:
        if remaining <= 0:
            # The budget is spent: the next page starts with this topic, whether
            # or not it exists.
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        if secured and not allowed(ctx, DESCRIBE, TOPIC, name):
            if not list_all:  # Kafka lists only the topics the client may describe
                entries.append(_missing(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                        operations(ctx, TOPIC, name)))
            continue
        topic = topics.get(name)
        if topic is None:
            if not list_all:
                entries.append(_missing(name, ops=ops(name)))
            continue
        start = cursor.partition_index if name == start_topic else 0
        count = topic.partitions
        # Java int arithmetic: a start near 2^31 wraps the end below zero.
        end = min(count, _int32(start + remaining))
        entries.append({
            "error_code": ErrorCode.NONE,
            "name": name,
            "topic_id": topic.topic_id,
            "is_internal": topic.internal,
            "partitions": partition_entries(node, range(start, end),
                                            eligible_leader_replicas=[], last_known_elr=[]),
            "topic_authorized_operations": ops(name),
        })
        if end < count:
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= len(entries[-1]["partitions"])
    return {"throttle_time_ms": 0, "topics": entries, "next_cursor": next_cursor}


def _int32(value: int) -> int:
    value %= _INT32
    return value - _INT32 if value >= 1 << 31 else value


def _missing(name: str, code: ErrorCode | None = None, ops: int = TOPIC_OPERATIONS) -> dict:
    if code is None:
        code = (ErrorCode.INVALID_TOPIC_EXCEPTION if validate_topic_name(name)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID,
            "is_internal": name in INTERNAL_TOPICS, "partitions": [],
            "topic_authorized_operations": ops}


def _refused(request, code: ErrorCode) -> dict:
    """Kafka's error answer to a request it refuses as a whole: every requested
    name, repeats included, with the error and every other field at its
    default."""
    return {"throttle_time_ms": 0,
            "topics": [{"error_code": code, "name": t["name"],
                        "is_internal": False, "partitions": []}
                       for t in request.topics],
            "next_cursor": None}
