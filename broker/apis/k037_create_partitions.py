"""CreatePartitions (key 37), versions 0-3.

- A topic grows to ``count`` partitions; the new ones are empty logs at once,
  durable in the topic journal before the answer, and Metadata lists them, so
  consumer groups subscribed to the topic rebalance onto them.
- ``count`` not above the current count: INVALID_PARTITIONS; an unknown topic:
  UNKNOWN_TOPIC_OR_PARTITION; a topic named twice: INVALID_REQUEST for it;
  ``assignments`` must list one replica list per new partition, each of this
  broker only (one node): INVALID_REPLICA_ASSIGNMENT otherwise; the
  ``__consumer_offsets`` topic keeps its partitions (docs/deviations.md: a
  group's partition is the hash of its id modulo their count);
  ``validate_only`` checks and changes nothing; more than 10,000 partitions
  added by one request: POLICY_VIOLATION for every topic of it.  Messages as Kafka 4.4's
  controller words them; a topic named twice is answered once, first.
- ``timeout_ms`` of 0 or less: REQUEST_TIMED_OUT for every topic named, and
  nothing grown, as Kafka's controller answers (``broker.apis.controller``),
  unless each topic is named twice or may not be altered by the client.
- Topics of one request are grown one after another, as Kafka's controller
  serializes them.
"""

from __future__ import annotations

from collections import Counter

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import ALTER, TOPIC, allowed_names
from kcoord.broker.apis.controller import TIMED_OUT, timed_out
from kcoord.broker.topics.manager import TopicError
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.layout import OFFSETS_TOPIC


# ReplicationControlManager's MAX_PARTITIONS_PER_BATCH: one request may not add more.
MAX_ADDED_PER_REQUEST = 10_000


@api(key=37, versions=(0, 3))
async def create_partitions(ctx, request):
    broker = ctx.broker
    named = Counter(t.name for t in request.topics)
    permitted = allowed_names(ctx, ALTER, TOPIC, list(named))
    if timed_out(request.timeout_ms) and any(
            n == 1 and name in permitted for name, n in named.items()):
        return {"throttle_time_ms": 0, "results": [
            {"name": t.name, "error_code": TIMED_OUT, "error_message": None}
            for t in request.topics]}
    # Checked before anything else, for the whole request, validate_only or not: a
    # count of two billion must not make two billion folders.
    added = 0
    for wanted in request.topics:
        topic = broker.topics.get(wanted.name)
        if topic is not None and wanted.count > topic.partitions:
            added += wanted.count - topic.partitions
    if added > MAX_ADDED_PER_REQUEST:
        return {"throttle_time_ms": 0, "results": [
            {"name": name, "error_code": ErrorCode.POLICY_VIOLATION,
             "error_message": "Excessively large number of additional partitions per request."}
            for name in named]}
    # Kafka answers a topic named twice first, once; then the others.
    results = [{"name": name, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": "Duplicate topic name."}
               for name, n in named.items() if n > 1]
    for wanted in request.topics:
        if named[wanted.name] > 1:
            continue
        if wanted.name not in permitted:
            results.append({"name": wanted.name, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            "error_message": None})
            continue
        code, message = _check(broker, wanted)
        if code is ErrorCode.NONE and not request.validate_only:
            try:
                await broker.topics.add_partitions(broker.topics.get(wanted.name), wanted.count)
            except TopicError as exc:
                code, message = exc.code, exc.message
        results.append({"name": wanted.name, "error_code": code,
                        "error_message": message if code is not ErrorCode.NONE else None})
    return {"throttle_time_ms": 0, "results": results}


def _check(broker, wanted) -> tuple[ErrorCode, str | None]:
    topic = broker.topics.get(wanted.name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    error = broker.topics.growth_error(topic, wanted.count)
    if error is not None:
        return error.code, error.message
    if topic.name == OFFSETS_TOPIC:  # docs/deviations.md
        return ErrorCode.INVALID_REQUEST, \
            f"The partitions of {topic.name} cannot be added to: each group's offsets are in " \
            f"the partition its id hashes to among the {topic.partitions}."
    added = wanted.count - topic.partitions
    if wanted.assignments is not None:
        if len(wanted.assignments) != added:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
                f"Attempted to add {added} additional partition(s), but only " \
                f"{len(wanted.assignments)} assignment(s) were specified."
        for assignment in wanted.assignments:
            ids = list(assignment.broker_ids)
            if not ids:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
                    "The manual partition assignment includes an empty replica list."
            twice = next((i for i in ids if ids.count(i) > 1), None)
            if twice is not None:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
                    f"The manual partition assignment includes the broker {twice} more " \
                    "than once."
            unknown = next((i for i in ids if i != broker.node_id), None)
            if unknown is not None:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
                    f"The manual partition assignment includes broker {unknown}, but no " \
                    "such broker is registered."
    return ErrorCode.NONE, None
