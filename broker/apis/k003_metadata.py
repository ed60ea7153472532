"""Metadata (key 3), versions 0-13.

- v0: an empty topic list means every topic; from v1 a null list means every
  topic and an empty one none.
- Topics named explicitly are auto-created when ``auto.create.topics.enable``
  is on and the request allows it (v4+ flag; implicitly allowed before v4).
  As Kafka 4.4 (KRaft) answers it, the request that creates a topic gets
  UNKNOWN_TOPIC_OR_PARTITION with no partitions (the client asks again, and
  the next Metadata lists it); the topic is durable before that answer.
- v10+ carry topic ids; v12 may name a topic by id alone (unknown id:
  UNKNOWN_TOPIC_ID with a null name); once one topic is named by id, the
  names of the request are ignored, as Kafka ignores them.  Below v12 a request must name topics and
  carry zero ids, else every requested topic is answered INVALID_REQUEST, as
  in Kafka.  A topic asked twice is answered once.
- v13's top-level error code (KIP-1102, for a broker to send a client back to
  its bootstrap servers) is 0: as on Kafka 4.4, a broker that answers knows
  the cluster.
- One broker, this node, leads every partition with leader epoch 0.
- Authorized operations: with no authorizer Kafka reports every operation the
  resource type supports; kcoord does the same when asked, else INT32_MIN.
- With an authorizer (as Kafka's KafkaApis): every topic lists only the topics
  the client may DESCRIBE; a named topic it may not is answered
  TOPIC_AUTHORIZATION_FAILED (an id, UNKNOWN_TOPIC_ID: ids reveal nothing);
  auto-creation needs CREATE on the cluster or on the topic, else
  TOPIC_AUTHORIZATION_FAILED; the authorized operations are the client's.
"""

from __future__ import annotations

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import CLUSTER, CREATE, DESCRIBE, TOPIC, allowed, operations
from kcoord.broker.topics.manager import TopicError, validate_topic_name
from kcoord.storage.layout import INTERNAL_TOPICS, TRANSACTION_STATE_TOPIC
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.wire import ZERO_UUID

NOT_PROVIDED = -(1 << 31)

# AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def broker_entries(ctx):
    host, port = ctx.advertised
    return [{"node_id": ctx.broker.node_id, "host": host, "port": port, "rack": None}]


def partition_entries(node: int, indexes, **extra) -> list[dict]:
    """The partitions ``indexes`` of a topic as this node, their one replica, leads
    them (leader epoch 0); ``extra`` adds fields of another API's partition entry
    (DescribeTopicPartitions' ELR lists)."""
    entries = [
        {"error_code": ErrorCode.NONE, "partition_index": p, "leader_id": node,
         "leader_epoch": 0, "replica_nodes": [node], "isr_nodes": [node],
         "offline_replicas": []}
        for p in indexes
    ]
    if extra:  # another API's entries; Metadata's stay a bare comprehension
        for entry in entries:
            entry.update(extra)
    return entries


def topic_entry(broker, topic, ops: int):
    return {
        "error_code": ErrorCode.NONE,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": partition_entries(broker.node_id, range(topic.partitions)),
        "topic_authorized_operations": ops,
    }


def _error_entry(name, code, topic_id=ZERO_UUID, ops=NOT_PROVIDED):
    # Kafka flags an internal name as internal even when the topic does not exist,
    # and reports the operations allowed on a name it could not answer (not on an
    # id, nor in a request it refuses as a whole).
    return {"error_code": code, "name": name, "topic_id": topic_id,
            "is_internal": name in INTERNAL_TOPICS, "partitions": [],
            "topic_authorized_operations": ops}


def _ops_of(ctx, include_ops: bool):
    """name -> the topic's authorized_operations for this client (INT32_MIN
    when not asked for)."""
    if not include_ops:
        return lambda name: NOT_PROVIDED
    if ctx.broker.authorizer is None:
        return lambda name: TOPIC_OPERATIONS
    return lambda name: operations(ctx, TOPIC, name)


def _collapse_repeated_names(request, version: int):
    """Kafka answers a set of topics: a name (or id) asked twice is answered once.
    Collapsing a request that names a million topics runs here, in a worker
    thread (``prepare``); a request the handler refuses as a whole is kept."""
    requested = request["topics"]
    if not requested or _has_ids_below_v12(requested, version):
        return request
    request["topics"] = _unique(requested)
    return request


def _has_ids_below_v12(requested, version: int) -> bool:
    # (Item access: a decoded struct's attribute access costs several times more.)
    return version < 12 and any(
        t["name"] is None or t["topic_id"] != ZERO_UUID for t in requested)


def _unique(requested) -> list:
    unique = {}
    for t in requested:
        topic_id = t["topic_id"]
        unique.setdefault(topic_id if topic_id != ZERO_UUID else t["name"], t)
    return list(unique.values())


@api(key=3, versions=(0, 13), prepare=_collapse_repeated_names)
def metadata(ctx, request):
    broker = ctx.broker
    topics = broker.topics
    version = ctx.api_version
    include_ops = request.include_topic_authorized_operations
    ops = _ops_of(ctx, include_ops)
    secured = broker.authorizer is not None
    requested = request.topics
    if version == 0 and not requested:
        requested = None
    if requested is not None and _has_ids_below_v12(requested, version):
        # Kafka fails the whole request (InvalidRequestException turned into an
        # error answer naming every requested topic).
        return _response(ctx, request, [
            _error_entry(t.name or "", ErrorCode.INVALID_REQUEST, t.topic_id) for t in requested])
    by_ids = False
    if requested is not None:
        # Kafka answers a set of topics: a name (or id) asked twice is answered once.
        requested = _unique(requested)
        # From v12, as soon as one topic is named by id, Kafka answers the ids
        # only: names are neither looked up nor auto-created.
        by_ids = version >= 12 and any(t.topic_id != ZERO_UUID for t in requested)
        if by_ids:
            requested = [t for t in requested if t.topic_id != ZERO_UUID]
    if requested is None:
        entries = [topic_entry(broker, t, ops(t.name))
                   for t in sorted(topics.topics.values(), key=lambda t: t.name)
                   if not secured or allowed(ctx, DESCRIBE, TOPIC, t.name)]
    else:
        entries = []
        to_create = {}  # name -> index in entries
        auto_create = request.allow_auto_topic_creation and \
            broker.config["auto.create.topics.enable"]
        for wanted in requested:
            if by_ids or wanted.name is None:
                topic = topics.by_id(wanted.topic_id)
                if topic is None or secured and not allowed(ctx, DESCRIBE, TOPIC, topic.name):
                    entry = _error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, wanted.topic_id)
                else:
                    entry = topic_entry(broker, topic, ops(topic.name))
                entries.append(entry)
                continue
            if secured and not allowed(ctx, DESCRIBE, TOPIC, wanted.name):
                entries.append(_error_entry(wanted.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            topic = topics.get(wanted.name)
            if topic is None:
                if validate_topic_name(wanted.name):
                    entries.append(_error_entry(wanted.name, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                ops=ops(wanted.name)))
                    continue
                if auto_create and wanted.name not in INTERNAL_TOPICS and secured and not (
                        allowed(ctx, CREATE, CLUSTER) or allowed(ctx, CREATE, TOPIC, wanted.name)):
                    entries.append(_error_entry(wanted.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                ops=ops(wanted.name)))
                    continue
                if auto_create and wanted.name not in INTERNAL_TOPICS:
                    try:
                        partitions, _rf = topics.check_new_topic(wanted.name, -1, -1, [], {})
                    except TopicError as exc:
                        entries.append(_error_entry(wanted.name, exc.code, ops=ops(wanted.name)))
                        continue
                    to_create[wanted.name] = (len(entries), partitions)
                    entries.append(None)
                    continue
                if auto_create and wanted.name == TRANSACTION_STATE_TOPIC:
                    # made with its own settings, as Kafka's auto-creation of an
                    # internal topic; this answer still says it does not exist
                    broker.topics.start_transaction_state()
                entries.append(_error_entry(wanted.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                            ops=ops(wanted.name)))
                continue
            entries.append(topic_entry(broker, topic, ops(topic.name)))
        if to_create:
            # Every name of the request is created by one topic operation (one
            # journal write), off the event loop.
            return _auto_create(ctx, request, entries, to_create)
    return _response(ctx, request, entries)


def _response(ctx, request, entries):
    broker = ctx.broker
    return {
        "throttle_time_ms": 0,
        "brokers": broker_entries(ctx),
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": entries,
        "cluster_authorized_operations": cluster_operations(
            ctx, request.include_cluster_authorized_operations),
        "error_code": ErrorCode.NONE,
    }


async def _auto_create(ctx, request, entries, to_create):
    broker = ctx.broker
    specs = [(name, partitions, {}) for name, (_i, partitions) in to_create.items()]
    results = await broker.topics.create_many(specs)
    for (name, (index, _p)), result in zip(to_create.items(), results):
        # Created now (or meanwhile by another request, which Kafka's controller
        # answers TOPIC_ALREADY_EXISTS): the first answer has no partitions yet.
        created = not isinstance(result, TopicError) or broker.topics.get(name) is not None
        entries[index] = _error_entry(
            name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if created else result.code,
            ops=_ops_of(ctx, request.include_topic_authorized_operations)(name))
    return _response(ctx, request, entries)


def cluster_operations(ctx, include: bool) -> int:
    """``cluster_authorized_operations`` (Metadata, DescribeCluster)."""
    if not include:
        return NOT_PROVIDED
    if ctx.broker.authorizer is None:
        return CLUSTER_OPERATIONS
    if not allowed(ctx, DESCRIBE, CLUSTER):
        return 0  # Kafka fills them in only for a client that may describe the cluster
    return operations(ctx, CLUSTER, "kafka-cluster")
