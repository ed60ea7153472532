"""What the group API handlers share: the member's host as Kafka records it,
and the coordinator's answers shaped for the request's version."""

from __future__ import annotations

from kcoord.broker.apis import Later
from kcoord.broker.apis.authz import READ, TOPIC, allowed_names
from kcoord.broker.groups.offsets import OffsetAndMetadata
from kcoord.protocol.errors import ErrorCode

NOT_PROVIDED = -(1 << 31)


def client_host(ctx) -> str:
    """``InetAddress.toString()`` of the peer, as Kafka stores it: ``/127.0.0.1``."""
    host = ctx.peer.rsplit(":", 1)[0] if ctx.peer != "?" else ""
    return "/" + host.strip("[]")


def when_answered(ticket, shape):
    """``shape(answer)`` now if the coordinator has answered (nothing parked,
    nothing to write), else a ``Later`` of it."""
    if ticket.done():
        return shape(ticket.result())
    return Later(ticket, shape)


def split_known(broker, topics):
    """OffsetCommit and OffsetDelete check topics before the coordinator sees them:
    ``(errors, known)`` where ``errors`` maps each unknown topic or partition to
    UNKNOWN_TOPIC_OR_PARTITION and ``known`` lists the (topic, partition, entry)
    of the others, in request order."""
    errors, known = {}, []
    for topic in topics:
        found = broker.topics.get(topic.name)
        for entry in topic.partitions:
            tp = (topic.name, entry.partition_index)
            if found is None or not 0 <= entry.partition_index < found.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append((tp, entry))
    return errors, known


class _Named:
    """A request's topic named by the topic its id names (OffsetCommit v10)."""

    __slots__ = ("name", "partitions")

    def __init__(self, name: str, partitions):
        self.name = name
        self.partitions = partitions


def by_name(broker, topics, by_id: bool):
    """The request's topics with names, and the indexes of those whose id no
    topic has (UNKNOWN_TOPIC_ID, with no partition checked); topics named by
    name come back as they are."""
    if not by_id:
        return list(topics), set()
    named, unknown = [], set()
    for i, topic in enumerate(topics):
        found = broker.topics.by_id(topic.topic_id)
        if found is None:
            unknown.add(i)
            named.append(_Named("", []))
        else:
            named.append(_Named(found.name, topic.partitions))
    return named, unknown


def first_error(*codes) -> ErrorCode:
    return next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)


def committed_offsets(broker, topics, by_id: bool, leader_epochs: bool, ctx=None):
    """OffsetCommit's and TxnOffsetCommit's first steps: ``(named, unknown ids,
    errors, offsets)``: the request's topics by name, the indexes of those
    named by an unknown id, TOPIC_AUTHORIZATION_FAILED for the topics the
    client (``ctx``) may not READ, UNKNOWN_TOPIC_OR_PARTITION for unknown
    partitions and the offsets of the others (``leader_epochs``: the version
    carries them)."""
    named, unknown_ids = by_name(broker, topics, by_id)
    denied = set()
    if ctx is not None and broker.authorizer is not None:
        names = {t.name for i, t in enumerate(named) if i not in unknown_ids}
        denied = names - allowed_names(ctx, READ, TOPIC, names)
    errors, known = split_known(broker, [t for t in named if t.name not in denied])
    for topic in named:
        if topic.name in denied:
            errors.update(((topic.name, p.partition_index), ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                          for p in topic.partitions)
    offsets = {tp: OffsetAndMetadata(p.committed_offset,
                                     p.committed_leader_epoch if leader_epochs else -1,
                                     p.committed_metadata or "")
               for tp, p in known}
    return named, unknown_ids, errors, offsets


def commit_answer(topics, named, unknown_ids, errors: dict) -> dict:
    """The OffsetCommit / TxnOffsetCommit answer, in request order."""
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic.name, "topic_id": topic.topic_id, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": ErrorCode.UNKNOWN_TOPIC_ID if i in unknown_ids
             else errors[(named_topic.name, p.partition_index)]}
            for p in topic.partitions]}
        for i, (topic, named_topic) in enumerate(zip(topics, named))]}


def every_partition(topics, code: ErrorCode) -> dict:
    """An OffsetCommit / TxnOffsetCommit answer with ``code`` for every
    partition (a refusal of the whole request, as Kafka's getErrorResponse)."""
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic.name, "topic_id": topic.topic_id, "partitions": [
            {"partition_index": p.partition_index, "error_code": code}
            for p in topic.partitions]} for topic in topics]}
