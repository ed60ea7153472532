"""CreateTopics (key 19), versions 0-7.

- ``num_partitions`` / ``replication_factor`` of -1 take the broker defaults at
  every version (kafkajs sends -1/-1 with v3; Kafka's broker accepts it).
- One node: a replication factor above 1, or a manual assignment naming another
  broker, fails as on a one-broker Kafka cluster.
- A name given twice in one request: INVALID_REQUEST "Duplicate topic name." for
  that name, as Kafka's ControllerApis answers.
- ``validate_only`` runs every check and creates nothing.
- v5+ answers carry the partition count, replication factor and the topic's
  effective configs with their sources; v7+ the topic id.
"""

from __future__ import annotations

from broker.apis import api
from broker.apis.configs import topic_config_entries
from broker.topics.manager import TopicError, new_topic_id
from protocol.errors import ErrorCode


@api(key=19, versions=(0, 7))
async def create_topics(ctx, request):
    topics = ctx.broker.topics
    counts: dict[str, int] = {}
    for t in request.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    results = []
    for t in request.topics:
        if counts[t.name] > 1:
            continue
        configs = {c.name: c.value for c in t.configs}
        try:
            partitions, rf = topics.check_new_topic(
                t.name, t.num_partitions, t.replication_factor, t.assignments, configs)
        except TopicError as exc:
            results.append({"name": t.name, "error_code": exc.code, "error_message": exc.message})
            continue
        if request.validate_only:
            # Kafka's controller answers a validate-only request with the id the
            # topic would have had.
            results.append({"name": t.name, "error_code": ErrorCode.NONE,
                            "topic_id": new_topic_id(),
                            "num_partitions": partitions, "replication_factor": rf,
                            "configs": topic_config_entries(ctx.broker, configs)})
            continue
        try:
            topic = await topics.create(t.name, partitions, configs)
        except TopicError as exc:
            results.append({"name": t.name, "error_code": exc.code, "error_message": exc.message})
            continue
        results.append({
            "name": t.name,
            "topic_id": topic.topic_id,
            "error_code": ErrorCode.NONE,
            "num_partitions": partitions,
            "replication_factor": rf,
            "configs": topic_config_entries(ctx.broker, topic.configs),
        })
    for name, count in counts.items():
        if count > 1:
            results.append({"name": name, "error_code": ErrorCode.INVALID_REQUEST,
                            "error_message": "Duplicate topic name."})
    return {"throttle_time_ms": 0, "topics": results}
