"""CreateTopics (key 19), versions 0-7.

- ``num_partitions`` / ``replication_factor`` of -1 take the broker defaults at
  every version (kafkajs sends -1/-1 with v3; Kafka's broker accepts it).
- One node: a replication factor above 1, or a manual assignment naming another
  broker, fails as on a one-broker Kafka cluster.
- A name given twice in one request: INVALID_REQUEST "Duplicate topic name." for
  that name, as Kafka's ControllerApis answers.
- ``validate_only`` runs every check and creates nothing.
- ``timeout_ms`` of 0 or less: REQUEST_TIMED_OUT for every topic named, and
  nothing created, as Kafka's controller answers (``broker.apis.controller``),
  unless no topic is left for the controller once names given twice and
  topics the client may not create are answered.
- Like Kafka's controller, a request for more than 10,000 partitions in all, or
  one that would write more than 10,000 metadata records (a topic, its
  partitions, its configs), is refused as a whole with POLICY_VIOLATION.
- The topics of one request are created by one topic operation.
- v5+ answers carry the partition count, replication factor and the topic's
  effective configs with their sources (those the request sets as written);
  v7+ the topic id.
- Refusals are worded as Kafka 4.4 words them, and at v0-1 (which Kafka 4
  no longer serves) as Kafka 3.9 does.
"""

from __future__ import annotations

import re

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import CLUSTER, CREATE, TOPIC, allowed, allowed_names
from kcoord.broker.apis.configs import topic_config_entries
from kcoord.broker.apis.controller import TIMED_OUT, timed_out
from kcoord.broker.config import TOPIC_CONFIGS
from kcoord.broker.topics.manager import TopicError, new_topic_id
from kcoord.protocol.errors import ErrorCode


# QuorumController.MAX_RECORDS_PER_USER_OP and ReplicationControlManager's
# MAX_PARTITIONS_PER_BATCH: one request may not make more metadata records.
MAX_RECORDS_PER_REQUEST = 10_000
MAX_PARTITIONS_PER_REQUEST = 10_000


def _requested_partitions(topic, default: int) -> int:
    if topic.assignments:
        return len(topic.assignments)
    if topic.num_partitions == -1:
        return default
    return max(topic.num_partitions, 0)


@api(key=19, versions=(0, 7))
async def create_topics(ctx, request):
    topics = ctx.broker.topics
    counts: dict[str, int] = {}
    for t in request.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    unique = [t for t in request.topics if counts[t.name] == 1]
    results: list[dict] = []
    default = ctx.broker.config["num.partitions"]
    permitted = None
    if ctx.broker.authorizer is not None and not allowed(ctx, CREATE, CLUSTER):
        permitted = allowed_names(ctx, CREATE, TOPIC, [t.name for t in unique])
    if timed_out(request.timeout_ms) and any(permitted is None or t.name in permitted
                                             for t in unique):
        return {"throttle_time_ms": 0, "topics": [_refused(t.name, TIMED_OUT, None)
                                                  for t in request.topics]}
    # The controller refuses the whole request before any other check.
    if sum(_requested_partitions(t, default) for t in unique) > MAX_PARTITIONS_PER_REQUEST:
        results = [_refused(t.name, ErrorCode.POLICY_VIOLATION,
                            "Excessively large number of partitions per request.")
                   for t in unique]
        return _answer(results, counts)
    checked = []  # (topic, partitions, rf, configs) that passed every check
    records = 0
    for t in unique:
        if permitted is not None and t.name not in permitted:
            results.append(_refused(t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    "Authorization failed."))
            continue
        configs = {c.name: c.value for c in t.configs}
        try:
            partitions, rf = topics.check_new_topic(
                t.name, t.num_partitions, t.replication_factor, t.assignments, configs)
        except TopicError as exc:
            message = exc.message if ctx.api_version >= 2 else _as_kafka_3_9(exc.message)
            results.append(_refused(t.name, exc.code, message))
            continue
        checked.append((t, partitions, rf, configs))
        # A TopicRecord, a PartitionRecord per partition, a ConfigRecord per config.
        records += 1 + partitions + sum(1 for v in configs.values() if v is not None)
    if records > MAX_RECORDS_PER_REQUEST:
        results = [_refused(t.name, ErrorCode.POLICY_VIOLATION,
                            "Unable to perform excessively large batch operation.")
                   for t in unique]
        return _answer(results, counts)
    if request.validate_only:
        for t, partitions, rf, configs in checked:
            # Kafka's controller answers a validate-only request with the id the
            # topic would have had.
            results.append(_created(ctx, t.name, new_topic_id(), partitions, rf, configs))
        return _answer(_in_request_order(results, unique), counts)
    made = await topics.create_many([(t.name, p, c) for t, p, _rf, c in checked])
    for (t, partitions, rf, _configs), topic in zip(checked, made):
        if isinstance(topic, TopicError):
            results.append(_refused(t.name, topic.code, topic.message))
        else:
            results.append(_created(ctx, t.name, topic.topic_id, partitions, rf, topic.configs))
    return _answer(_in_request_order(results, unique), counts)


_CORDONED = " or some brokers have all their log directories cordoned."
_EMPTY_ITEM = re.compile(r"Configuration '(.+)' values must not be empty\.")


def _as_kafka_3_9(message: str | None) -> str | None:
    """A refusal at v0-1, which only Kafka 3.9 serves, worded as 3.9 words it:
    without 4.4's clause on cordoned log directories, and an empty item of a list
    config refused as one of the values it may not be."""
    if message is None:
        return None
    if message.endswith(_CORDONED):
        return message[:-len(_CORDONED)] + "."
    empty = _EMPTY_ITEM.fullmatch(message)
    if empty and empty.group(1) in TOPIC_CONFIGS:
        choices = TOPIC_CONFIGS[empty.group(1)].choices or ()
        return (f"Invalid value  for configuration {empty.group(1)}: "
                f"String must be one of: {', '.join(choices)}")
    return message


def _refused(name, code, message):
    return {"name": name, "error_code": code, "error_message": message}


def _created(ctx, name, topic_id, partitions, rf, configs):
    return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.NONE,
            "num_partitions": partitions, "replication_factor": rf,
            "configs": topic_config_entries(ctx.broker, configs)}


def _in_request_order(results, unique):
    order = {t.name: i for i, t in enumerate(unique)}
    return sorted(results, key=lambda r: order[r["name"]])


def _answer(results, counts):
    for name, count in counts.items():
        if count > 1:
            results.append({"name": name, "error_code": ErrorCode.INVALID_REQUEST,
                            "error_message": "Duplicate topic name."})
    return {"throttle_time_ms": 0, "topics": results}
