"""Authorization on the wire: a client logged in over SASL is refused what its
ACLs do not allow, with the error Kafka answers for each API, and sees only
what it may DESCRIBE."""

from __future__ import annotations

import time

import pytest

from kcoord.protocol.client import WireClient
from tests.support import Secured

TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH, SECURITY_DISABLED = 29, 30, 31, 53, 54
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
READ, WRITE, CREATE, DESCRIBE, ALTER, IDEMPOTENT_WRITE = 3, 4, 5, 8, 7, 12
ALLOW = 3
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    setup = Secured(tmp_path_factory.mktemp("authz-data"), tmp_path_factory.mktemp("authz-certs"),
                    extra={"authorizer.class.name": AUTHORIZER, "super.users": "User:admin"}
                    ).start()
    with _login(setup, "admin") as admin:
        for name in ("orders", "payments", "secret"):
            admin.call(19, 5, {"topics": [{"name": name, "num_partitions": 1,
                                           "replication_factor": 1, "assignments": [],
                                           "configs": []}],
                               "timeout_ms": 5000, "validate_only": False})
        answer = admin.call(30, 3, {"creations": [
            _acl(TOPIC, "orders", READ), _acl(TOPIC, "orders", WRITE),
            _acl(TOPIC, "pay", DESCRIBE, PREFIXED), _acl(GROUP, "billing", READ),
            _acl(TRANSACTIONAL_ID, "tx-", WRITE, PREFIXED),
            _acl(GROUP, "regex-", READ, PREFIXED)]})
        assert [r["error_code"] for r in answer["results"]] == [0] * 6
    yield setup
    setup.stop()


def _acl(resource_type, name, operation, pattern=LITERAL, principal="User:alice"):
    return {"resource_type": resource_type, "resource_name": name,
            "resource_pattern_type": pattern, "principal": principal, "host": "*",
            "operation": operation, "permission_type": ALLOW}


def _login(setup, user: str) -> WireClient:
    client = WireClient("127.0.0.1", setup.port("SASL_PLAINTEXT"), timeout=10)
    assert client.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    password = {"admin": "admin-secret", "alice": "alice-secret"}[user]
    assert client.call(36, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})[
        "error_code"] == 0
    return client


def _metadata(client, topics=None, ops=False):
    return client.call(3, 12, {"topics": topics, "allow_auto_topic_creation": True,
                               "include_topic_authorized_operations": ops})


def test_metadata_lists_what_the_client_may_describe(secured):
    with _login(secured, "alice") as alice:
        listed = {t["name"] for t in _metadata(alice)["topics"]}
        assert listed == {"orders", "payments"}
        named = {t["name"]: t["error_code"] for t in _metadata(alice, [
            {"name": n, "topic_id": None} for n in ("orders", "secret", "pay-new", "other")])[
            "topics"]}
        # secret: not described; pay-new: described but not creatable; other: neither
        assert named == {"orders": 0, "secret": TOPIC_AUTH, "pay-new": TOPIC_AUTH,
                         "other": TOPIC_AUTH}
        (orders,) = _metadata(alice, [{"name": "orders", "topic_id": None}], ops=True)["topics"]
        assert orders["topic_authorized_operations"] == (1 << READ) | (1 << WRITE) | \
            (1 << DESCRIBE)
    with _login(secured, "admin") as admin:
        assert {t["name"] for t in _metadata(admin)["topics"]} >= {"orders", "payments", "secret"}


def _produce(client, topic):
    from kcoord.protocol.records import Record, build_batch
    batch = build_batch([Record(None, 0, None, b"x")], base_offset=0)
    answer = client.call(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                "topic_data": [{"name": topic, "partition_data": [
                                    {"index": 0, "records": batch}]}]})
    return answer["responses"][0]["partition_responses"][0]["error_code"]


def test_produce_and_fetch_need_write_and_read(secured):
    with _login(secured, "alice") as alice:
        assert _produce(alice, "orders") == 0
        assert _produce(alice, "payments") == TOPIC_AUTH
        fetched = alice.call(1, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                             "fetch_offset": 0, "last_fetched_epoch": -1,
                                             "log_start_offset": -1,
                                             "partition_max_bytes": 1 << 20}]}
                for t in ("orders", "payments")],
            "forgotten_topics_data": [], "rack_id": ""})
        codes = {r["topic"]: r["partitions"][0]["error_code"] for r in fetched["responses"]}
        assert codes == {"orders": 0, "payments": TOPIC_AUTH}


def test_groups_need_read_and_describe(secured):
    with _login(secured, "alice") as alice:
        found = alice.call(10, 4, {"key_type": 0, "coordinator_keys": ["billing", "other"]})
        codes = {c["key"]: (c["error_code"], c["error_message"]) for c in found["coordinators"]}
        assert codes == {"billing": (0, ""), "other": (GROUP_AUTH, "")}  # as Kafka 4.4 at v4+
        join = alice.call(11, 7, {"group_id": "other", "session_timeout_ms": 10000,
                                  "rebalance_timeout_ms": 10000, "member_id": "",
                                  "group_instance_id": None, "protocol_type": "consumer",
                                  "protocols": [{"name": "range", "metadata": b""}]})
        assert join["error_code"] == GROUP_AUTH
        commit = alice.call(8, 8, {"group_id": "billing", "generation_id_or_member_epoch": -1,
                                   "member_id": "", "group_instance_id": None, "topics": [
                                       {"name": t, "partitions": [
                                           {"partition_index": 0, "committed_offset": 1,
                                            "committed_leader_epoch": -1,
                                            "committed_metadata": ""}]}
                                       for t in ("orders", "payments")]})
        codes = {t["name"]: t["partitions"][0]["error_code"] for t in commit["topics"]}
        assert codes == {"orders": 0, "payments": TOPIC_AUTH}
        refused = alice.call(8, 8, {"group_id": "other", "generation_id_or_member_epoch": -1,
                                    "member_id": "", "group_instance_id": None, "topics": [
                                        {"name": "orders", "partitions": [
                                            {"partition_index": 0, "committed_offset": 1,
                                             "committed_leader_epoch": -1,
                                             "committed_metadata": ""}]}]})
        assert refused["topics"][0]["partitions"][0]["error_code"] == GROUP_AUTH
        fetched = alice.call(9, 8, {"require_stable": False, "groups": [
            {"group_id": "billing", "member_id": None, "member_epoch": -1, "topics": None},
            {"group_id": "other", "member_id": None, "member_epoch": -1, "topics": None}]})
        by_group = {g["group_id"]: g for g in fetched["groups"]}
        assert by_group["other"]["error_code"] == GROUP_AUTH
        assert [t["name"] for t in by_group["billing"]["topics"]] == ["orders"]
    with _login(secured, "admin") as admin:  # the super user commits anywhere, and sees it
        admin.call(8, 8, {"group_id": "billing", "generation_id_or_member_epoch": -1,
                          "member_id": "", "group_instance_id": None, "topics": [
                              {"name": "secret", "partitions": [
                                  {"partition_index": 0, "committed_offset": 0,
                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        listed = admin.call(16, 4, {"states_filter": []})
        assert "billing" in {g["group_id"] for g in listed["groups"]}
    with _login(secured, "alice") as alice:
        fetched = alice.call(9, 8, {"require_stable": False, "groups": [
            {"group_id": "billing", "member_id": None, "member_epoch": -1, "topics": None}]})
        # all of billing's offsets: only the topics alice may describe
        assert [t["name"] for t in fetched["groups"][0]["topics"]] == ["orders"]
        listed = alice.call(16, 4, {"states_filter": []})
        assert {g["group_id"] for g in listed["groups"]} == {"billing"}


def test_producer_ids_and_transactions(secured):
    with _login(secured, "alice") as alice:
        idempotent = alice.call(22, 4, {"transactional_id": None, "transaction_timeout_ms": -1,
                                        "producer_id": -1, "producer_epoch": -1})
        assert idempotent["error_code"] == 0  # WRITE on orders is enough
        refused = alice.call(22, 4, {"transactional_id": "other", "transaction_timeout_ms": 60000,
                                     "producer_id": -1, "producer_epoch": -1})
        assert refused["error_code"] == TXN_AUTH
        # an end of a transaction it may not write to
        ended = alice.call(26, 3, {"transactional_id": "other", "producer_id": 1,
                                   "producer_epoch": 0, "committed": True})
        assert ended["error_code"] == TXN_AUTH
        # markers are the cluster's to write (CLUSTER_ACTION): nothing is appended
        marker = {"markers": [{"producer_id": 7, "producer_epoch": 0,
                               "transaction_result": False, "coordinator_epoch": 0,
                               "topics": [{"name": "orders", "partition_indexes": [0]}]}]}
        refused = alice.call(27, 1, marker)["markers"][0]["topics"][0]["partitions"]
        assert refused == [{"partition_index": 0, "error_code": CLUSTER_AUTH}]
        end = alice.call(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [{
            "name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1,
                                              "current_leader_epoch": -1}]}]})
    with _login(secured, "admin") as admin:  # a super user may
        written = admin.call(27, 1, marker)["markers"][0]["topics"][0]["partitions"]
        assert written == [{"partition_index": 0, "error_code": 0}]
        after = admin.call(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [{
            "name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1,
                                              "current_leader_epoch": -1}]}]})
    offset = end["topics"][0]["partitions"][0]["offset"]
    assert after["topics"][0]["partitions"][0]["offset"] == offset + 1  # the one marker
    # ALTER on the cluster is enough (KIP-664: what abortTransaction asks)
    altering = _acl(CLUSTER, "kafka-cluster", ALTER)
    with _login(secured, "admin") as admin:
        assert admin.call(30, 3, {"creations": [altering]})["results"][0]["error_code"] == 0
    try:
        time.sleep(0.2)
        with _login(secured, "alice") as alice:
            written = alice.call(27, 1, marker)["markers"][0]["topics"][0]["partitions"]
            assert written == [{"partition_index": 0, "error_code": 0}]
    finally:
        with _login(secured, "admin") as admin:
            deleted = admin.call(31, 3, {"filters": [{
                "resource_type_filter": CLUSTER, "resource_name_filter": "kafka-cluster",
                "pattern_type_filter": LITERAL, "principal_filter": "User:alice",
                "host_filter": "*", "operation": ALTER, "permission_type": ALLOW}]})
            assert deleted["filter_results"][0]["error_code"] == 0


def test_a_regex_subscription_gets_only_the_topics_the_consumer_may_describe(secured):
    """confluent-kafka as alice, in a consumer group of KIP-848, subscribing with a
    regular expression matching orders, payments and secret: the group resolves it
    to the topics alice may DESCRIBE (orders, and payments by its prefix), and
    secret is never assigned to her, as on Kafka."""
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": secured.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "alice-secret",
        "group.id": "regex-readers", "group.protocol": "consumer",
        "enable.auto.commit": False})
    try:
        consumer.subscribe(["^(orders|payments|secret)$"])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.1)
        for _ in range(10):  # nothing more comes
            consumer.poll(0.1)
        assert sorted(tp.topic for tp in consumer.assignment()) == ["orders", "payments"]
        # what the group holds, as alice may see it (a group holding secret would
        # be refused to her as a whole)
        with _login(secured, "alice") as alice:
            (group,) = alice.call(69, 1, {"group_ids": ["regex-readers"],
                                          "include_authorized_operations": False})["groups"]
        assert group["error_code"] == 0
        (member,) = group["members"]
        assert "^(orders|payments|secret)$" in member["subscribed_topic_regex"]
        assert sorted(t["topic_name"] for t in member["assignment"]["topic_partitions"]) == \
            ["orders", "payments"]
    finally:
        consumer.close()


def test_a_group_holding_a_topic_the_client_may_not_describe_is_refused_whole(secured):
    """ConsumerGroupDescribe as Kafka 4.4 answers it: alice may describe the group
    (READ on regex-*), not secret, which the admin's member holds."""
    with _login(secured, "admin") as admin:
        joined = admin.call(68, 1, {
            "group_id": "regex-mixed", "member_id": "m-admin", "member_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 60000,
            "subscribed_topic_names": ["orders", "secret"], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []})
        assert joined["error_code"] == 0 and len(joined["assignment"]["topic_partitions"]) == 2
    ask = {"group_ids": ["regex-mixed", "regex-none"], "include_authorized_operations": True}
    with _login(secured, "alice") as alice:
        refused, missing = alice.call(69, 1, ask)["groups"]
    assert (refused["error_code"], refused["error_message"]) == (
        TOPIC_AUTH, "The group has described topic(s) that the client is not authorized "
                    "to describe.")
    assert (refused["members"], refused["group_state"], refused["group_epoch"],
            refused["assignment_epoch"], refused["assignor_name"],
            refused["authorized_operations"]) == ([], "", 0, 0, "", -(1 << 31))
    assert missing["error_code"] == 69  # GROUP_ID_NOT_FOUND: nothing to hide
    with _login(secured, "admin") as admin:
        whole = admin.call(69, 1, ask)["groups"][0]
    assert whole["error_code"] == 0 and whole["members"][0]["member_id"] == "m-admin"


def test_acl_and_credential_apis_need_the_cluster(secured):
    with _login(secured, "alice") as alice:
        created = alice.call(30, 3, {"creations": [_acl(TOPIC, "secret", READ)]})
        assert created["results"][0]["error_code"] == CLUSTER_AUTH
        described = alice.call(29, 3, {"resource_type_filter": 1, "resource_name_filter": None,
                                       "pattern_type_filter": 1, "principal_filter": None,
                                       "host_filter": None, "operation": 1,
                                       "permission_type": 1})
        assert described["error_code"] == CLUSTER_AUTH
        scram = alice.call(50, 0, {"users": None})
        assert scram["error_code"] == CLUSTER_AUTH
    with _login(secured, "admin") as admin:
        described = admin.call(29, 3, {"resource_type_filter": TOPIC,
                                       "resource_name_filter": "payments",
                                       "pattern_type_filter": 2, "principal_filter": None,
                                       "host_filter": None, "operation": 1,
                                       "permission_type": 1})
        assert [(r["resource_name"], r["pattern_type"]) for r in described["resources"]] == \
            [("pay", PREFIXED)]


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker):
    with WireClient.to(broker.bootstrap) as client:
        described = client.call(29, 3, {"resource_type_filter": 1, "resource_name_filter": None,
                                        "pattern_type_filter": 1, "principal_filter": None,
                                        "host_filter": None, "operation": 1,
                                        "permission_type": 1})
        assert (described["error_code"], described["error_message"]) == (
            SECURITY_DISABLED, "No Authorizer is configured on the broker")
        created = client.call(30, 3, {"creations": [_acl(TOPIC, "t", READ)]})
        assert created["results"] == [{"error_code": SECURITY_DISABLED,
                                       "error_message": "No Authorizer is configured."}]
