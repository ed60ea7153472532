"""Authorization of requests (with ``authorizer.class.name`` set): what each
handler asks, as Kafka's ``AuthHelper`` asks it.  Without an authorizer every
question answers yes at the cost of one attribute check."""

from __future__ import annotations

from kcoord.broker.security.acls import (
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    all_operations,
)

__all__ = ["ALTER", "ALTER_CONFIGS", "CLUSTER", "CLUSTER_ACTION", "CLUSTER_NAME", "CREATE",
           "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "GROUP", "IDEMPOTENT_WRITE", "READ",
           "TOPIC", "TRANSACTIONAL_ID", "WRITE", "CLUSTER_REFUSED", "TOPIC_REFUSED",
           "GROUP_REFUSED", "TRANSACTIONAL_ID_REFUSED", "allowed", "allowed_names", "allowed_on_any",
           "describable_topics", "operations"]

# Errors.message() of the authorization errors, where Kafka's answers carry it.
CLUSTER_REFUSED = "Cluster authorization failed."
TOPIC_REFUSED = "Topic authorization failed."
GROUP_REFUSED = "Group authorization failed."
TRANSACTIONAL_ID_REFUSED = "Transactional Id authorization failed."

# authorized_operations when the client did not ask for them (Kafka's
# Integer.MIN_VALUE)
NOT_ASKED = -(1 << 31)


def allowed(ctx, operation: int, resource_type: int, name: str = CLUSTER_NAME) -> bool:
    authorizer = ctx.broker.authorizer
    return authorizer is None or authorizer.authorize(
        ctx.principal, ctx.host, operation, resource_type, name)


def allowed_names(ctx, operation: int, resource_type: int, names) -> set[str]:
    """The names among ``names`` the client may ``operation`` (each name once)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return set(names)
    principal, host = ctx.principal, ctx.host
    return {n for n in set(names)
            if authorizer.authorize(principal, host, operation, resource_type, n)}


def describable_topics(ctx):
    """A function giving the topics among its argument this client may DESCRIBE,
    kept for a decision taken later on the client's behalf (a consumer group's
    regular expression resolved after the heartbeat that asked for it); None
    without an authorizer."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return None
    principal, host = ctx.principal, ctx.host

    def describable(names) -> set[str]:
        return {n for n in set(names)
                if authorizer.authorize(principal, host, DESCRIBE, TOPIC, n)}
    return describable


def allowed_on_any(ctx, operation: int, resource_type: int) -> bool:
    authorizer = ctx.broker.authorizer
    return authorizer is None or authorizer.authorize_any(
        ctx.principal, ctx.host, operation, resource_type)


def operations(ctx, resource_type: int, name: str) -> int:
    """The authorized_operations bit set of a resource for this client."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return all_operations(resource_type)
    return authorizer.authorized_operations(ctx.principal, ctx.host, resource_type, name)
