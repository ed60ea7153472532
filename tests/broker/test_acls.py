"""ACL decisions as Kafka's StandardAuthorizer takes them, the ACL filters of
DescribeAcls and DeleteAcls, and what is kept across a restart."""

from __future__ import annotations

import asyncio

import pytest

from kcoord.broker.security.acls import (
    ALL,
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    ANY,
    CLUSTER,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    LITERAL,
    MATCH,
    PREFIXED,
    READ,
    TOPIC,
    WRITE,
    Acl,
    AclFilter,
    Authorizer,
)


def _authorizer(tmp_path, acls=(), super_users=(), allow_if_no_acl=False) -> Authorizer:
    authorizer = Authorizer(tmp_path, list(super_users), allow_if_no_acl)
    if acls:
        asyncio.run(authorizer.create(list(acls)))
    return authorizer


def _acl(name, operation, permission=ALLOW, principal="User:alice", host="*",
         pattern=LITERAL, resource=TOPIC):
    return Acl(resource, name, pattern, principal, host, operation, permission)


def test_literal_prefixed_and_wildcard_patterns(tmp_path):
    authorizer = _authorizer(tmp_path, [
        _acl("orders", WRITE), _acl("pay", READ, pattern=PREFIXED), _acl("*", DESCRIBE,
                                                                         principal="User:bob")])
    decide = authorizer.authorize
    assert decide("User:alice", "10.0.0.1", WRITE, TOPIC, "orders")
    assert not decide("User:alice", "10.0.0.1", WRITE, TOPIC, "orders-eu")  # literal: exact
    assert decide("User:alice", "10.0.0.1", READ, TOPIC, "payments")
    assert decide("User:alice", "10.0.0.1", READ, TOPIC, "pay")
    assert not decide("User:alice", "10.0.0.1", READ, TOPIC, "pa")
    assert decide("User:bob", "10.0.0.1", DESCRIBE, TOPIC, "anything")
    assert not decide("User:bob", "10.0.0.1", READ, TOPIC, "anything")
    assert not decide("User:carol", "10.0.0.1", DESCRIBE, TOPIC, "orders")
    # the same names on another resource type say nothing
    assert not decide("User:alice", "10.0.0.1", READ, GROUP, "payments")


def test_deny_wins_over_allow_and_all_covers_every_operation(tmp_path):
    authorizer = _authorizer(tmp_path, [
        _acl("*", ALL), _acl("secret", READ, DENY),
        _acl("audit", ALL, DENY, pattern=PREFIXED, principal="User:*")])
    decide = authorizer.authorize
    assert decide("User:alice", "h", DELETE, TOPIC, "orders")
    assert not decide("User:alice", "h", READ, TOPIC, "secret")
    assert decide("User:alice", "h", WRITE, TOPIC, "secret")  # a DENY names its operation
    assert not decide("User:alice", "h", DESCRIBE, TOPIC, "audit-log")


def test_implied_operations_only_through_allow(tmp_path):
    authorizer = _authorizer(tmp_path, [
        _acl("t", WRITE), _acl("c", ALTER_CONFIGS), _acl("d", DELETE, DENY), _acl("d", ALL)])
    decide = authorizer.authorize
    assert decide("User:alice", "h", DESCRIBE, TOPIC, "t")  # WRITE implies DESCRIBE
    assert decide("User:alice", "h", DESCRIBE_CONFIGS, TOPIC, "c")
    assert not decide("User:alice", "h", DESCRIBE, TOPIC, "c")
    # a DENY of DELETE does not deny the DESCRIBE it would imply
    assert decide("User:alice", "h", DESCRIBE, TOPIC, "d")
    assert not decide("User:alice", "h", DELETE, TOPIC, "d")


def test_hosts_super_users_and_the_no_acl_default(tmp_path):
    authorizer = _authorizer(tmp_path, [_acl("t", READ, host="10.0.0.1")],
                             super_users=["User:admin"])
    decide = authorizer.authorize
    assert decide("User:alice", "10.0.0.1", READ, TOPIC, "t")
    assert not decide("User:alice", "10.0.0.2", READ, TOPIC, "t")
    assert decide("User:admin", "10.0.0.2", DELETE, CLUSTER, "kafka-cluster")
    assert not decide("User:alice", "h", READ, TOPIC, "no-acl-names-it")
    lenient = _authorizer(tmp_path / "lenient", [_acl("t", READ, host="10.0.0.1")],
                          allow_if_no_acl=True)
    assert lenient.authorize("User:alice", "h", READ, TOPIC, "no-acl-names-it")
    # an ACL names the resource, for someone else: the default no longer applies
    assert not lenient.authorize("User:alice", "10.0.0.2", READ, TOPIC, "t")


def test_idempotent_producers_need_idempotent_write_or_a_topic_write(tmp_path):
    authorizer = _authorizer(tmp_path, [
        _acl("orders", WRITE), _acl("o", WRITE, DENY, pattern=PREFIXED, principal="User:bob"),
        _acl("orders", WRITE, principal="User:bob"),
        _acl("kafka-cluster", IDEMPOTENT_WRITE, principal="User:carol", resource=CLUSTER)])
    assert authorizer.authorize_any("User:alice", "h", WRITE, TOPIC)
    assert not authorizer.authorize_any("User:bob", "h", WRITE, TOPIC)  # denied by prefix
    assert not authorizer.authorize_any("User:carol", "h", WRITE, TOPIC)
    assert authorizer.authorize("User:carol", "h", IDEMPOTENT_WRITE, CLUSTER, "kafka-cluster")


def test_authorized_operations_are_the_principal_s(tmp_path):
    authorizer = _authorizer(tmp_path, [_acl("t", READ), _acl("t", ALTER_CONFIGS)])
    bits = authorizer.authorized_operations("User:alice", "h", TOPIC, "t")
    assert bits == (1 << READ) | (1 << DESCRIBE) | (1 << DESCRIBE_CONFIGS) | (1 << ALTER_CONFIGS)
    assert authorizer.authorized_operations("User:bob", "h", TOPIC, "t") == 0


def test_filters_match_as_kafka_s_acl_binding_filter(tmp_path):
    acls = [_acl("orders", READ), _acl("ord", WRITE, pattern=PREFIXED),
            _acl("*", DESCRIBE), _acl("g", READ, resource=GROUP, principal="User:bob")]
    authorizer = _authorizer(tmp_path, acls)

    def found(**kw):
        fields = dict(resource_type=ANY, resource_name=None, pattern_type=ANY, principal=None,
                      host=None, operation=ANY, permission_type=ANY)
        fields.update(kw)
        return set(authorizer.acls(AclFilter(**fields)))

    assert found() == set(acls)
    assert found(resource_type=TOPIC, resource_name="orders", pattern_type=MATCH) == \
        set(acls[:3])  # what applies to the topic orders
    assert found(resource_name="orders") == {acls[0]}  # ANY pattern: the exact name
    assert found(pattern_type=PREFIXED) == {acls[1]}
    assert found(principal="User:bob") == {acls[3]}
    assert found(operation=WRITE, permission_type=ALLOW) == {acls[1]}


def test_creations_refused_as_kafka_refuses_them(tmp_path):
    authorizer = _authorizer(tmp_path)
    results = asyncio.run(authorizer.create([
        _acl("other-cluster", ALTER, resource=CLUSTER),
        _acl("", READ),
        _acl("t", READ, principal="alice"),
        _acl("t", ANY),
        _acl("t", READ, pattern=MATCH),
        _acl("kafka-cluster", CREATE, resource=CLUSTER),
    ]))
    assert results == [
        (42, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (42, "Invalid empty resource name"),
        (42, "Could not parse principal from `alice` (no colon is present separating the "
             "principal type from the principal name)"),
        (42, "Invalid operation ANY"),
        (42, "Invalid patternType MATCH"),
        (0, None)]


def test_acls_are_kept_and_deleted_by_filter(tmp_path):
    _authorizer(tmp_path, [_acl("a", READ), _acl("b", READ), _acl("b", WRITE)])
    again = Authorizer(tmp_path, [], False)
    again.load()
    assert again.authorize("User:alice", "h", WRITE, TOPIC, "b")
    (result,) = asyncio.run(again.delete([AclFilter(TOPIC, "b", LITERAL, None, None, ANY, ANY)]))
    code, _message, gone = result
    assert code == 0 and {a.operation for a in gone} == {READ, WRITE}
    third = Authorizer(tmp_path, [], False)
    third.load()
    assert third.authorize("User:alice", "h", READ, TOPIC, "a")
    assert not third.authorize("User:alice", "h", READ, TOPIC, "b")


@pytest.mark.parametrize("count", [10, 2000])
def test_a_decision_does_not_look_at_every_acl(tmp_path, count):
    """Many topics with ACLs of their own: a decision reads the ACLs that can match."""
    authorizer = _authorizer(tmp_path, [_acl(f"topic-{i}", READ) for i in range(count)])
    looked = []
    original = authorizer._matching

    def counting(resource_type, name):
        for acl in original(resource_type, name):
            looked.append(acl)
            yield acl
    authorizer._matching = counting
    assert authorizer.authorize("User:alice", "h", READ, TOPIC, "topic-7")
    assert len(looked) == 1


def test_write_on_some_topic_as_kafka_s_authorize_by_resource_type(tmp_path):
    authorizer = _authorizer(tmp_path, [
        _acl("logs", WRITE, principal="User:dan"), _acl("*", WRITE, DENY, principal="User:dan"),
        _acl("logs-a", WRITE, principal="User:erin"),
        _acl("logs-a", WRITE, DENY, principal="User:erin"),
        _acl("logs-b", WRITE, pattern=PREFIXED, principal="User:fay"),
        _acl("logs-b-x", WRITE, DENY, principal="User:fay"),
        _acl("t", WRITE, principal="User:gus", host="10.0.0.1"),
        _acl("t", READ, principal="User:hal")])
    can = authorizer.authorize_any
    assert not can("User:dan", "h", WRITE, TOPIC)  # a DENY of every topic
    assert not can("User:erin", "h", WRITE, TOPIC)  # the one ALLOW denied by name
    assert can("User:fay", "h", WRITE, TOPIC)  # a literal DENY leaves the prefix's others
    assert can("User:gus", "10.0.0.1", WRITE, TOPIC)
    assert not can("User:gus", "10.0.0.2", WRITE, TOPIC)  # from another host
    assert not can("User:hal", "h", WRITE, TOPIC)  # READ is not WRITE
    assert not Authorizer(tmp_path / "empty", [], False).authorize_any("User:x", "h", WRITE,
                                                                        TOPIC)
    assert Authorizer(tmp_path / "open", [], True).authorize_any("User:x", "h", WRITE, TOPIC)
