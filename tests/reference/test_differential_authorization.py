"""Authorization asked of kcoord and of Apache Kafka 4.x configured the same way:
a SASL_PLAINTEXT listener with PLAIN (the users of ``SASL_USERS`` and ``bob``),
``authorizer.class.name`` Kafka's ``StandardAuthorizer`` and the same
``super.users``.  The admin login creates the same topics, committed offsets
and ACLs on both; then the ACL APIs, and every API Kafka authorizes, are asked
of both as ``alice`` (``bob`` where a user without any WRITE is needed),
request by request, answers compared field by field.

Each scenario returns what a client observes, with what legitimately differs
(ports, cluster ids, topic ids, producer ids, throttle times, the order of
entries where Kafka's is unspecified) replaced; the observations must be equal.
Node ids need no replacing: both brokers are node 1 (``kafka.NODE_ID``)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Mapping
from typing import Callable

import pytest

from kcoord.protocol.client import WireClient
from kcoord.protocol.records import Record, build_batch, iter_records
from kcoord.protocol.wire import ZERO_UUID
from tests.reference import kafka
from tests.reference.differential import differences, is_kafka_cluster_id
from tests.reference.fixtures import start_reference
from tests.support import SASL_USERS, Secured

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Kafka's combined broker and controller talk to each other over PLAINTEXT
# listeners (CONTROLLER, and PLAINTEXT between brokers) as User:ANONYMOUS: with
# super.users=User:admin alone its controller refuses the BrokerRegistration and
# ControllerRegistration of its own node (CLUSTER_ACTION) and it never becomes
# ready.  kcoord gets the same setting (its PLAINTEXT principal is User:ANONYMOUS
# too), so both decide alike.
SUPER_USERS = "User:admin;User:ANONYMOUS"
USERS = {**SASL_USERS, "bob": "bob-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required"
        + "".join(f' user_{u}="{p}"' for u, p in USERS.items()) + ";")

NONE, UNKNOWN_TOPIC, COORDINATOR_LOADING, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 0, 3, 14, 42, 100
NOT_ASKED = -(1 << 31)  # authorized_operations not asked for (Integer.MIN_VALUE)
TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH, TXN_NOT_FOUND = 29, 30, 31, 53, 105
# ResourceType, PatternType, AclOperation, AclPermissionType (ANY is 1 in each)
ANY = 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
BROKER, BROKER_LOGGER, GROUP_CONFIG = 4, 8, 32  # ConfigResource types
MATCH, LITERAL, PREFIXED = 2, 3, 4
(ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
 ALTER_CONFIGS, IDEMPOTENT_WRITE) = range(2, 13)
DENY, ALLOW = 2, 3

UNKNOWN_ID = uuid.UUID("6d1e4a52-9c3f-4b7e-8a10-2f5b7c9d0e11")  # no topic's, on either side
TOPICS = ("orders", "payments", "secret")
TIMESTAMP = 1_700_000_000_000
BATCH = build_batch([Record(None, TIMESTAMP, None, b"hello")])


def _acl(resource_type: int, name: str, operation: int, pattern: int = LITERAL,
         principal: str = "User:alice", permission: int = ALLOW, host: str = "*") -> dict:
    return {"resource_type": resource_type, "resource_name": name,
            "resource_pattern_type": pattern, "principal": principal, "host": host,
            "operation": operation, "permission_type": permission}


def _filter(resource_type: int = ANY, name: str | None = None, pattern: int = ANY,
            principal: str | None = None, host: str | None = None, operation: int = ANY,
            permission: int = ANY) -> dict:
    return {"resource_type_filter": resource_type, "resource_name_filter": name,
            "pattern_type_filter": pattern, "principal_filter": principal,
            "host_filter": host, "operation": operation, "permission_type": permission}


# What alice (and bob) may do on both brokers:
# - orders: READ and WRITE (so DESCRIBE); payments: DESCRIBE (the prefix "pay");
#   secret: nothing;
# - group billing: READ; viewers: DESCRIBE; cleanup-*: DELETE; other: nothing;
# - transactional ids tx-*: WRITE; the cluster: CLUSTER_ACTION only (which no
#   client API asks for; without DESCRIBE on the cluster Kafka tells her none of
#   the cluster's authorized operations);
# - bob: READ on orders, WRITE on the prefix "bobs" and a DENY of WRITE on every
#   topic: no WRITE anywhere, for the idempotent InitProducerId; DESCRIBE and
#   CLUSTER_ACTION on the cluster (Kafka tells the cluster's authorized operations
#   only to whom may DESCRIBE it);
# - alice: READ on the groups kip848-* (consumer groups of KIP-848).
SETUP_ACLS = [
    _acl(TOPIC, "orders", READ), _acl(TOPIC, "orders", WRITE),
    _acl(TOPIC, "pay", DESCRIBE, PREFIXED),
    _acl(GROUP, "billing", READ), _acl(GROUP, "viewers", DESCRIBE),
    _acl(GROUP, "cleanup-", DELETE, PREFIXED),
    _acl(TRANSACTIONAL_ID, "tx-", WRITE, PREFIXED),
    _acl(CLUSTER, "kafka-cluster", CLUSTER_ACTION),
    _acl(TOPIC, "orders", READ, principal="User:bob"),
    _acl(TOPIC, "bobs", WRITE, PREFIXED, principal="User:bob"),
    _acl(TOPIC, "*", WRITE, principal="User:bob", permission=DENY),
    _acl(CLUSTER, "kafka-cluster", DESCRIBE, principal="User:bob"),
    _acl(CLUSTER, "kafka-cluster", CLUSTER_ACTION, principal="User:bob"),
    _acl(GROUP, "kip848-", READ, PREFIXED),
]
# Transactions the admin opens before the tests (one alice may describe, one not),
# with a timeout far longer than the module runs, so that they stay Ongoing.
OPEN_TRANSACTIONS = ("tx-open", "other-open")
TXN_TIMEOUT_MS = 900000  # Kafka's transaction.max.timeout.ms
# Offsets the admin commits before the tests, so that the groups exist.
SETUP_OFFSETS = {"billing": TOPICS, "other": ("orders",), "viewers": ("orders",),
                 "cleanup-1": ("orders", "payments"), "cleanup-2": ("orders",)}


class Side:
    """One broker of the comparison: its SASL_PLAINTEXT port and its topic ids."""

    def __init__(self, name: str, port: int):
        self.name, self.port = name, port
        self.topic_ids: dict[str, uuid.UUID] = {}

    def topic_id(self, name: str) -> uuid.UUID:
        return self.topic_ids.get(name, UNKNOWN_ID)

    def label(self, topic_id: uuid.UUID):
        for name, known in self.topic_ids.items():
            if known == topic_id:
                return f"<id of {name}>"
        return topic_id


class Pair:
    """kcoord's Secured and a Kafka with the same SASL_PLAINTEXT listener and ACLs."""

    def __init__(self, ours: Secured, theirs: kafka.KafkaBroker):
        self.ours, self.theirs = ours, theirs
        self.sides = (Side("kcoord", ours.port("SASL_PLAINTEXT")),
                      Side("Kafka", theirs.listener_port("SASL_PLAINTEXT")))

    def both(self, user: str, scenario: Callable[[WireClient, Side], object]):
        """``scenario(client, side)`` run logged in as ``user`` on a new connection to
        each side: (kcoord's observation, Kafka's)."""
        seen = []
        for side in self.sides:
            with _login(side.port, user) as client:
                seen.append(scenario(client, side))
        return tuple(seen)

    def same(self, user: str, scenario: Callable[[WireClient, Side], object]):
        """Assert both observations are equal (naming each differing field); Kafka's."""
        ours, theirs = self.both(user, scenario)
        assert ours == theirs, "kcoord and Kafka differ:\n  " + "\n  ".join(
            differences(ours, theirs))
        return theirs


def _login(port: int, user: str) -> WireClient:
    client = WireClient("127.0.0.1", port, timeout=15)
    assert client.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    answer = client.call(36, 2, {"auth_bytes": f"\0{user}\0{USERS[user]}".encode()})
    assert answer["error_code"] == 0, answer
    return client


# -- normalizing ---------------------------------------------------------------------------------

_REQUEST = re.compile(r"^Request Request\(.*\) needs", re.S)
# Answers whose entries are matched to the request's by position: never reordered.
POSITIONAL = {(30, "results"), (31, "filter_results")}


def _normal(api: int, value, side: Side, key: str | None = None):
    """``value`` with what legitimately differs replaced, and lists of entries sorted:
    Kafka builds most answers from hash maps, and answers what it refuses apart from
    what it serves (refused topics of a Produce, Fetch, DescribeConfigs ... come
    first or last), so the order of entries carries no meaning; clients match them
    by name.  CreateAcls' results and DeleteAcls' filter results are matched by
    position: kept in order."""
    if isinstance(value, Mapping):
        # throttle_time_ms: no quota is set; what a throttle would be is the quota
        # tests' business, not this module's.
        return {k: _normal(api, v, side, k) for k, v in value.items()
                if k != "throttle_time_ms"}
    if isinstance(value, list):
        items = [_normal(api, v, side, key) for v in value]
        if items and isinstance(items[0], dict) and (api, key) not in POSITIONAL:
            items.sort(key=repr)
        return items
    if isinstance(value, uuid.UUID) and value != ZERO_UUID:
        return side.label(value)  # each broker draws its own topic ids
    if key == "port" and value == side.port:
        return "<the listener's port>"  # each broker listens on its own free port
    if key == "cluster_id" and value:
        # each broker formats its own cluster id: it must be Kafka-shaped
        assert is_kafka_cluster_id(value), f"{side.name}: bad cluster id {value!r}"
        return "<cluster id>"
    if key == "error_message" and isinstance(value, str):
        # Kafka's ClusterAuthorizationException names the request as its toString
        # prints it (connection ids, processor, session object hash): only the
        # permission named is compared
        return _REQUEST.sub("Request <the request> needs", value)
    if key == "records" and isinstance(value, bytes):
        # the records fetched, not the bytes of their batch (offsets, timestamps and
        # values are what the data-plane differential tests compare byte by byte)
        return [(r.offset, r.timestamp, r.value) for r in iter_records(value)]
    return value


def _codes(entries: list, partitions: str) -> list[int]:
    """The error codes of every partition of ``entries`` (topics), sorted."""
    return sorted(p["error_code"] for e in entries for p in e[partitions])


def _ask(*requests):
    """A scenario sending ``requests`` ((api, version, body or body(side)), ...) one
    after the other: their normalized answers."""
    def scenario(client: WireClient, side: Side):
        seen = []
        for api, version, body in requests:
            answer = client.call(api, version, body(side) if callable(body) else body)
            seen.append(_normal(api, answer, side))
        return seen
    return scenario


# -- the two brokers -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    reference = start_reference(listeners={
        "SASL_PLAINTEXT": "SASL_PLAINTEXT"}, extra={
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": SUPER_USERS,
        "connection.failed.authentication.delay.ms": 0,
    })
    ours = None
    try:
        ours = Secured(tmp_path_factory.mktemp("differential-authorization-data"),
                       tmp_path_factory.mktemp("differential-authorization-certs"),
                       extra={"sasl.enabled.mechanisms": "PLAIN",
                              "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                              "authorizer.class.name": AUTHORIZER,
                              "super.users": SUPER_USERS,
                              "connection.failed.authentication.delay.ms": "0"}).start()
        pair = Pair(ours, reference)
        for side in pair.sides:
            with _login(side.port, "admin") as admin:
                _prepare(admin, side)
        yield pair
    finally:
        if ours is not None:
            ours.stop()
        reference.stop()


def _until(what: str, attempt: Callable[[], object], timeout: float = 30):
    """``attempt()`` until it returns something true (Kafka applies topics, groups'
    coordinators and ACLs a moment after answering their creation)."""
    deadline = time.monotonic() + timeout
    while True:
        result = attempt()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen in time")
        time.sleep(0.05)


def _prepare(admin: WireClient, side: Side) -> None:
    """The same topics, committed offsets and ACLs on one side, through the admin."""
    created = admin.call(19, 7, {"topics": [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []} for name in TOPICS], "timeout_ms": 10000, "validate_only": False})
    assert [t["error_code"] for t in created["topics"]] == [0] * len(TOPICS), created

    def topics_ready():
        topics = admin.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})["topics"]
        ready = {t["name"]: t["topic_id"] for t in topics
                 if t["error_code"] == 0 and t["partitions"]
                 and all(p["leader_id"] >= 0 for p in t["partitions"])}
        return ready if set(TOPICS) <= set(ready) else None
    ids = _until(f"{side.name}: the topics", topics_ready)
    side.topic_ids = {name: ids[name] for name in TOPICS}

    # Kafka creates __consumer_offsets on the first FindCoordinator of a group
    _until(f"{side.name}: a group coordinator", lambda: admin.call(
        10, 4, {"key_type": 0, "coordinator_keys": ["billing"]})["coordinators"][0][
        "error_code"] == 0, timeout=60)
    for group, topics in SETUP_OFFSETS.items():
        _until(f"{side.name}: offsets of {group}", lambda: all(
            p["error_code"] == 0 for t in admin.call(8, 9, _commit(group, topics))["topics"]
            for p in t["partitions"]))

    for transactional_id in OPEN_TRANSACTIONS:
        _open_transaction(admin, side, transactional_id)

    answer = admin.call(30, 3, {"creations": SETUP_ACLS})
    assert [r["error_code"] for r in answer["results"]] == [0] * len(SETUP_ACLS), answer
    _wait_for_acls(admin, present=SETUP_ACLS)


def _open_transaction(admin: WireClient, side: Side, transactional_id: str) -> None:
    """A transaction of the admin's, left open (Ongoing) for the tests: Kafka creates
    __transaction_state on the first FindCoordinator of a transactional id, answering
    COORDINATOR_NOT_AVAILABLE meanwhile, then loads it (InitProducerId answering
    COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR meanwhile)."""
    _until(f"{side.name}: the coordinator of {transactional_id}", lambda: admin.call(
        10, 4, {"key_type": 1, "coordinator_keys": [transactional_id]})["coordinators"][0][
        "error_code"] == 0, timeout=60)
    init = _until(f"{side.name}: a producer id for {transactional_id}", lambda: (
        lambda a: a if a["error_code"] == 0 else None)(admin.call(22, 5, {
            "transactional_id": transactional_id, "transaction_timeout_ms": TXN_TIMEOUT_MS,
            "producer_id": -1, "producer_epoch": -1})), timeout=60)
    added = admin.call(24, 3, {
        "v3_and_below_transactional_id": transactional_id,
        "v3_and_below_producer_id": init["producer_id"],
        "v3_and_below_producer_epoch": init["producer_epoch"],
        "v3_and_below_topics": [{"name": "orders", "partitions": [0]}]})
    assert [p["partition_error_code"] for t in added["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]] == [0], added


def _commit(group: str, topics, offset: int = 1, by_id: Side | None = None) -> dict:
    """An OffsetCommit outside any generation (a simple consumer's) of partition 0."""
    key = "topic_id" if by_id else "name"
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [
                {key: by_id.topic_id(t) if by_id else t, "partitions": [
                    {"partition_index": 0, "committed_offset": offset,
                     "committed_leader_epoch": -1, "committed_metadata": ""}]}
                for t in topics]}


def _described(admin: WireClient) -> set[tuple]:
    answer = admin.call(29, 3, _filter())
    assert answer["error_code"] == 0, answer
    return {(r["resource_type"], r["resource_name"], r["pattern_type"], a["principal"],
             a["host"], a["operation"], a["permission_type"])
            for r in answer["resources"] for a in r["acls"]}


def _key(acl: dict) -> tuple:
    return (acl["resource_type"], acl["resource_name"], acl["resource_pattern_type"],
            acl["principal"], acl["host"], acl["operation"], acl["permission_type"])


def _wait_for_acls(admin: WireClient, present=(), absent=()) -> None:
    """Until DescribeAcls shows ``present`` and not ``absent``: Kafka answers
    CreateAcls and DeleteAcls once its controller has committed the change, and its
    broker's authorizer applies it from the metadata log a moment later."""
    def applied():
        have = _described(admin)
        return all(_key(a) in have for a in present) and not any(
            _key(a) in have for a in absent)
    _until("the ACL change", applied)


def _admin_acls(side: Side, request: tuple[int, int, dict]) -> dict:
    """One ACL request of the admin on one side, the change waited for."""
    with _login(side.port, "admin") as admin:
        answer = admin.call(*request)
        if request[0] == 30:
            made = [c for c, r in zip(request[2]["creations"], answer["results"])
                    if r["error_code"] == 0]
            _wait_for_acls(admin, present=made)
        elif request[0] == 31:
            gone = [{"resource_type": m["resource_type"], "resource_name": m["resource_name"],
                     "resource_pattern_type": m["pattern_type"], "principal": m["principal"],
                     "host": m["host"], "operation": m["operation"],
                     "permission_type": m["permission_type"]}
                    for r in answer["filter_results"] for m in r["matching_acls"]]
            _wait_for_acls(admin, absent=gone)
        return _normal(request[0], answer, side)


# -- CreateAcls, DescribeAcls, DeleteAcls --------------------------------------------------------

def _creations(version: int, case: str) -> dict:
    """carol's ACLs (carol never logs in: they decide nothing here), each named by
    what it is."""
    name = f"create-{case[:5]}-v{version}"
    good = {
        "a literal topic": _acl(TOPIC, f"{name}-t", READ, principal="User:carol"),
        "a prefixed group, denied": _acl(GROUP, f"{name}-g", DESCRIBE, PREFIXED,
                                         principal="User:carol", permission=DENY),
    }
    return {
        "good ones and refusals": {
            **good,
            "the cluster by another name": _acl(CLUSTER, "my-cluster", ALTER,
                                                principal="User:carol"),
            "an empty name": _acl(TOPIC, "", READ, principal="User:carol"),
            "a principal without a colon": _acl(TOPIC, f"{name}-t", READ, principal="carol"),
        },
        # Kafka 4.4's controller throws on these (IllegalArgumentException "operation
        # must not be ANY", "patternType must not be MATCH"): the whole request is
        # answered UNKNOWN_SERVER_ERROR, nothing created
        "operation ANY": {**good, "operation ANY": _acl(TOPIC, f"{name}-t", ANY,
                                                        principal="User:carol")},
        "pattern MATCH": {**good, "pattern MATCH": _acl(TOPIC, f"{name}-t", READ, MATCH,
                                                        principal="User:carol")},
    }[case]


CREATION_CODES = {"good ones and refusals": [NONE, NONE] + [INVALID_REQUEST] * 3,
                  "operation ANY": [-1] * 3, "pattern MATCH": [-1] * 3}


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("case", list(CREATION_CODES))
def test_create_acls(pair, case, version):
    creations = _creations(version, case)
    seen = []
    for side in pair.sides:
        answer = _admin_acls(side, (30, version, {"creations": list(creations.values())}))
        with _login(side.port, "admin") as admin:
            described = _normal(29, admin.call(29, version, _filter(principal="User:carol")),
                                side)
        mine = f"create-{case[:5]}-v{version}-"
        described["resources"] = [r for r in described["resources"]
                                  if r["resource_name"].startswith(mine)]
        seen.append({"created": dict(zip(creations, answer["results"])),
                     "described": described})
    ours, theirs = seen
    assert [r["error_code"] for r in theirs["created"].values()] == CREATION_CODES[case]
    assert ours == theirs, "\n".join(differences(ours, theirs))


DESCRIBE_FILTERS = {
    "ANY": _filter(),
    "MATCH on a topic name": _filter(TOPIC, "orders", MATCH),
    "MATCH on a prefixed name": _filter(TOPIC, "payments", MATCH),
    "LITERAL": _filter(TOPIC, "orders", LITERAL),
    "LITERAL the wildcard": _filter(TOPIC, "*", LITERAL),
    "PREFIXED": _filter(TOPIC, "pay", PREFIXED),
    "PREFIXED by a longer name": _filter(TOPIC, "payments", PREFIXED),
    "ANY pattern on a name": _filter(ANY, "orders", ANY),
    "by principal": _filter(principal="User:bob"),
    "by principal and host": _filter(principal="User:alice", host="*"),
    "by operation": _filter(operation=WRITE),
    "by operation and permission": _filter(operation=WRITE, permission=DENY),
    "groups": _filter(GROUP),
    "matching nothing": _filter(TRANSACTIONAL_ID, "nothing", LITERAL),
}


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("case", list(DESCRIBE_FILTERS))
def test_describe_acls(pair, case, version):
    def scenario(client, side):
        answer = _ask((29, version, DESCRIBE_FILTERS[case]))(client, side)[0]
        # the ACLs of the setup only: the tests above and below add and delete
        # carol's, and pytest may run any subset of them
        for resource in answer["resources"]:
            resource["acls"] = [a for a in resource["acls"] if a["principal"] != "User:carol"]
        answer["resources"] = [r for r in answer["resources"] if r["acls"]]
        return answer

    ours, theirs = pair.both("admin", scenario)
    assert theirs["error_code"] == NONE
    assert ours == theirs, "\n".join(differences(ours, theirs))


def _deletions(version: int) -> tuple[list[dict], list[dict]]:
    """carol's ACLs to delete and the filters deleting them (one matching nothing)."""
    name = f"del-v{version}"
    acls = [_acl(TOPIC, f"{name}-a", READ, principal="User:carol"),
            _acl(TOPIC, f"{name}-", WRITE, PREFIXED, principal="User:carol"),
            _acl(GROUP, f"{name}-g", DESCRIBE, principal="User:carol", permission=DENY),
            _acl(TRANSACTIONAL_ID, f"{name}-x", WRITE, principal="User:carol"),
            _acl(TRANSACTIONAL_ID, f"{name}-y", DESCRIBE, principal="User:carol"),
            _acl(TOPIC, f"{name}-kept", READ, principal="User:carol")]
    filters = [_filter(TOPIC, f"{name}-a", LITERAL),
               # the prefixed one (and, without the principal, bob's DENY on "*")
               _filter(TOPIC, f"{name}-b", MATCH, principal="User:carol"),
               _filter(ANY, f"{name}-g", ANY, principal="User:carol"),
               _filter(TRANSACTIONAL_ID, operation=WRITE, principal="User:carol"),
               _filter(TRANSACTIONAL_ID, f"{name}-y", PREFIXED),  # nothing: it is literal
               _filter(TOPIC, f"{name}-kept", LITERAL, principal="User:alice")]
    return acls, filters


@pytest.mark.parametrize("version", [1, 2, 3])
def test_delete_acls(pair, version):
    acls, filters = _deletions(version)
    seen = []
    for side in pair.sides:
        created = _admin_acls(side, (30, 3, {"creations": acls}))
        assert [r["error_code"] for r in created["results"]] == [0] * len(acls)
        deleted = _admin_acls(side, (31, version, {"filters": filters}))
        with _login(side.port, "admin") as admin:
            left = admin.call(29, version, _filter(principal="User:carol"))
        left = _normal(29, left, side)
        left["resources"] = [r for r in left["resources"]
                             if r["resource_name"].startswith(f"del-v{version}")]
        seen.append({"deleted": deleted, "left": left})
    ours, theirs = seen
    assert [len(r["matching_acls"]) for r in theirs["deleted"]["filter_results"]] == \
        [1, 1, 1, 1, 0, 0]
    assert ours == theirs, "\n".join(differences(ours, theirs))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_acl_apis_refused_without_the_cluster(pair, version):
    """alice has no ALTER (Create/DeleteAcls) nor DESCRIBE (DescribeAcls) on the
    cluster."""
    ours, theirs = pair.both("alice", _ask(
        (30, version, {"creations": [_acl(TOPIC, "secret", READ),
                                     _acl(CLUSTER, "my-cluster", ALTER)]}),
        (31, version, {"filters": [_filter(), _filter(TOPIC, "orders", LITERAL)]}),
        (29, version, _filter()),
        (29, version, _filter(TOPIC, "orders", MATCH, principal="User:alice"))))
    assert [r["error_code"] for r in theirs[0]["results"]] == [CLUSTER_AUTH] * 2
    assert [r["error_code"] for r in theirs[1]["filter_results"]] == [CLUSTER_AUTH] * 2
    assert theirs[2]["error_code"] == CLUSTER_AUTH
    assert ours == theirs, "\n".join(differences(ours, theirs))


# -- Produce and Fetch ---------------------------------------------------------------------------

def _produce(version: int, topics) -> Callable[[Side], dict]:
    by_id = version >= 13

    def body(side):
        return {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {**({"topic_id": side.topic_id(t)} if by_id else {"name": t}),
             "partition_data": [{"index": 0, "records": BATCH}]} for t in topics]}
    return body


@pytest.mark.parametrize("version", [13, 12, 8])
def test_produce(pair, version):
    """orders is written; payments is described but not writable; secret not even
    described; an unknown topic, by a name alice may describe or not, or by id."""
    topics = ["payments", "secret", "orders"] + (
        ["unknown-topic"] if version >= 13 else ["pay-unknown", "unknown-topic"])
    theirs = pair.same("alice", _ask((0, version, _produce(version, topics))))
    assert _codes(theirs[0]["responses"], "partition_responses") == (
        [NONE, TOPIC_AUTH, TOPIC_AUTH, UNKNOWN_TOPIC_ID] if version >= 13
        else [NONE] + [TOPIC_AUTH] * 4)


def _fetch(version: int, topics) -> Callable[[Side], dict]:
    by_id = version >= 13

    def body(side):
        partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20}
        request = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                   "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                   "topics": [{**({"topic_id": side.topic_id(t)} if by_id else {"topic": t}),
                               "partitions": [partition]} for t in topics],
                   "forgotten_topics_data": [], "rack_id": ""}
        if version < 15:
            request["replica_id"] = -1
        return request
    return body


@pytest.mark.parametrize("version", [18, 12, 4])
def test_fetch(pair, version):
    topics = ["payments", "secret", "orders"] + (
        ["unknown-topic"] if version >= 13 else ["pay-unknown", "unknown-topic"])
    theirs = pair.same("alice", _ask((1, version, _fetch(version, topics))))
    assert _codes(theirs[0]["responses"], "partitions") == (
        [NONE, TOPIC_AUTH, TOPIC_AUTH, UNKNOWN_TOPIC_ID] if version >= 13
        else [NONE] + [TOPIC_AUTH] * 4)


# -- consumer groups -----------------------------------------------------------------------------

def _join(version: int, group: str) -> tuple[int, int, dict]:
    body = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}
    if version < 5:
        body.pop("group_instance_id")
    if version >= 8:
        body["reason"] = None
    return 11, version, body


def _sync(version: int, group: str) -> tuple[int, int, dict]:
    body = {"group_id": group, "generation_id": 1, "member_id": "m-1",
            "group_instance_id": None, "assignments": [{"member_id": "m-1", "assignment": b""}]}
    if version >= 5:
        body.update(protocol_type="consumer", protocol_name="range")
    return 14, version, body


def _heartbeat(version: int, group: str) -> tuple[int, int, dict]:
    return 12, version, {"group_id": group, "generation_id": 1, "member_id": "m-1",
                         "group_instance_id": None}


def _leave(version: int, group: str) -> tuple[int, int, dict]:
    if version < 3:
        return 13, version, {"group_id": group, "member_id": "m-1"}
    member = {"member_id": "m-1", "group_instance_id": None}
    if version >= 5:
        member["reason"] = None
    return 13, version, {"group_id": group, "members": [member]}


@pytest.mark.parametrize("versions", [(9, 5, 4, 5), (5, 3, 3, 3), (2, 1, 1, 2)],
                         ids=lambda v: "join-v{}-sync-v{}-heartbeat-v{}-leave-v{}".format(*v))
@pytest.mark.parametrize("group", ["other", "viewers"])
def test_group_membership_without_read(pair, versions, group):
    """other: nothing allowed; viewers: DESCRIBE only; both need READ."""
    join, sync, heartbeat, leave = versions
    theirs = pair.same("alice", _ask(_join(join, group), _sync(sync, group),
                                     _heartbeat(heartbeat, group), _leave(leave, group)))
    assert [a["error_code"] for a in theirs] == [GROUP_AUTH] * 4


@pytest.mark.parametrize("version", [10, 9, 2])
@pytest.mark.parametrize("group", ["billing", "other"])
def test_offset_commit(pair, version, group):
    """billing: the group is allowed, payments and secret are not; other: the group
    is not."""
    topics = ["orders", "payments", "secret"] + (
        ["unknown-topic"] if version >= 10 else ["pay-unknown", "unknown-topic"])

    def body(side):
        request = _commit(group, topics, offset=3, by_id=side if version >= 10 else None)
        if version < 7:
            request.pop("group_instance_id")
        if version < 5:
            request["retention_time_ms"] = -1
        if version < 6:
            for t in request["topics"]:
                for p in t["partitions"]:
                    p.pop("committed_leader_epoch")
        return request
    theirs = pair.same("alice", _ask((8, version, body)))
    if group == "other":
        assert set(_codes(theirs[0]["topics"], "partitions")) == {GROUP_AUTH}
    else:
        assert _codes(theirs[0]["topics"], "partitions") == (
            [NONE, TOPIC_AUTH, TOPIC_AUTH, UNKNOWN_TOPIC_ID] if version >= 10
            else [NONE] + [TOPIC_AUTH] * 4)


def _offset_fetch(version: int, groups: dict) -> Callable[[Side], dict]:
    """``groups``: group -> its topics (None: all)."""
    def topics(side, names):
        if names is None:
            return None
        if version >= 10:
            return [{"topic_id": side.topic_id(t), "partition_indexes": [0]} for t in names]
        return [{"name": t, "partition_indexes": [0]} for t in names]

    def body(side):
        if version < 8:
            ((group, names),) = groups.items()
            request = {"group_id": group, "topics": topics(side, names)}
            if version >= 7:
                request["require_stable"] = False
            return request
        return {"require_stable": False, "groups": [
            {"group_id": g, "member_id": None, "member_epoch": -1,
             "topics": topics(side, names)} for g, names in groups.items()]}
    return body


OFFSET_FETCHES = {
    "all topics of an allowed group": {"billing": None},
    "named topics of an allowed group": {"billing": ["orders", "payments", "secret"]},
    "a group not allowed": {"other": None},
    "a described group": {"viewers": None},
}


@pytest.mark.parametrize("version", [10, 9, 8, 7, 2])
@pytest.mark.parametrize("case", list(OFFSET_FETCHES))
def test_offset_fetch(pair, version, case):
    """billing has offsets of orders, payments (which alice may describe) and secret
    (which she may not)."""
    theirs = pair.same("alice", _ask((9, version, _offset_fetch(version, OFFSET_FETCHES[case]))))
    if case == "all topics of an allowed group":  # not secret
        group = theirs[0]["groups"][0] if version >= 8 else theirs[0]
        assert len(group["topics"]) == 2


def test_offset_fetch_batched(pair):
    pair.same("alice", _ask((9, 9, _offset_fetch(9, {
        "billing": None, "other": None, "viewers": ["orders"], "nobody": None}))))


@pytest.mark.parametrize("request_", [
    (10, 6, {"key_type": 0, "coordinator_keys": ["billing", "other", "viewers"]}),
    (10, 6, {"key_type": 1, "coordinator_keys": ["other-tx"]}),
    (10, 3, {"key_type": 0, "key": "other"}),
    (10, 3, {"key_type": 0, "key": "billing"}),
    (10, 3, {"key_type": 1, "key": "other-tx"}),
    (10, 0, {"key": "other"}),
], ids=["v6-groups", "v6-transactional-id", "v3-group-refused", "v3-group-allowed",
        "v3-transactional-id", "v0-group-refused"])
def test_find_coordinator(pair, request_):
    pair.same("alice", _ask(request_))


@pytest.mark.parametrize("version", [6, 4])
def test_describe_groups(pair, version):
    groups = ["billing", "viewers", "cleanup-1", "other", "nobody"]
    theirs = pair.same("alice", _ask(
        (15, version, {"groups": groups, "include_authorized_operations": True}),
        (15, version, {"groups": groups, "include_authorized_operations": False})))
    assert {g["group_id"]: (g["error_code"], g["authorized_operations"])
            for g in theirs[0]["groups"]} == {
        "billing": (NONE, 1 << READ | 1 << DESCRIBE), "viewers": (NONE, 1 << DESCRIBE),
        "cleanup-1": (NONE, 1 << DELETE | 1 << DESCRIBE),
        "other": (GROUP_AUTH, NOT_ASKED), "nobody": (GROUP_AUTH, NOT_ASKED)}


@pytest.mark.parametrize("request_", [
    (16, 5, {"states_filter": [], "types_filter": []}),
    (16, 5, {"states_filter": ["Empty"], "types_filter": ["classic"]}),
    (16, 4, {"states_filter": []}),
    (16, 2, {}),
], ids=["v5", "v5-filtered", "v4", "v2"])
def test_list_groups_lists_what_alice_may_describe(pair, request_):
    def scenario(client, side):
        answer = _ask(request_)(client, side)[0]
        # groups of this module only (a failed join creates none)
        answer["groups"] = [g for g in answer["groups"] if g["group_id"] in (
            *SETUP_OFFSETS, "nobody")]
        return answer
    theirs = pair.same("alice", scenario)
    assert {g["group_id"] for g in theirs["groups"]} <= {
        "billing", "viewers", "cleanup-1", "cleanup-2"}
    assert {"billing", "viewers", "cleanup-1"} <= {g["group_id"] for g in theirs["groups"]}


@pytest.mark.parametrize("version", [0])
def test_offset_delete(pair, version):
    """other: nothing allowed; billing: READ but not DELETE; cleanup-1: DELETE, with
    orders readable and payments and secret not."""
    pair.same("alice", _ask(*[
        (47, version, {"group_id": group, "topics": [
            {"name": t, "partitions": [{"partition_index": 0}]} for t in TOPICS]})
        for group in ("other", "billing", "cleanup-1")]))


@pytest.mark.parametrize("version", [2, 0])
def test_delete_groups(pair, version):
    """cleanup-2 (DELETE allowed) is deleted once, by the first version asked."""
    pair.same("alice", _ask((42, version, {"groups_names": [
        "other", "billing", "viewers", "cleanup-2", "cleanup-none"]})))


# -- producer ids and transactions ---------------------------------------------------------------

def _init_producer_id(version: int, transactional_id: str | None):
    body = {"transactional_id": transactional_id,
            "transaction_timeout_ms": 60000 if transactional_id else -1}
    if version >= 3:
        body.update(producer_id=-1, producer_epoch=-1)
    return 22, version, body


def _init_producer_ids(request: tuple[int, int, dict]):
    """InitProducerId asked until it is not COORDINATOR_LOAD_IN_PROGRESS (Kafka's
    broker answers that while it fetches its first block of producer ids from its
    controller); a producer id given is the broker's own: compared by being one."""
    def scenario(client, side):
        answer = _until("a producer id", lambda: (
            lambda a: a if a["error_code"] != COORDINATOR_LOADING else None)(
            client.call(*request)))
        answer = _normal(22, answer, side)
        if answer["producer_id"] >= 0:
            answer["producer_id"] = "<a producer id>"
        return answer
    return scenario


@pytest.mark.parametrize("version", [5, 2])
@pytest.mark.parametrize("user,transactional_id", [
    ("alice", None), ("bob", None), ("alice", "other-tx")],
    ids=["idempotent with a WRITE", "idempotent without any WRITE", "transactional"])
def test_init_producer_id(pair, version, user, transactional_id):
    theirs = pair.same(user, _init_producer_ids(_init_producer_id(version, transactional_id)))
    assert theirs["error_code"] == (CLUSTER_AUTH if user == "bob" else
                                    TXN_AUTH if transactional_id else NONE)


def _transactions(scenario):
    """Producer ids and start times are each broker's own: compared by being ones."""
    def normalized(client, side):
        seen = scenario(client, side)
        for answer in seen:
            for state in answer["transaction_states"]:
                if state.get("producer_id", -1) >= 0 and state.get("error_code", 0) == 0:
                    state["producer_id"] = "<a producer id>"
                if state.get("transaction_start_time_ms", -1) > 0:
                    state["transaction_start_time_ms"] = "<a time>"
        return seen
    return normalized


def test_describe_transactions(pair):
    """other-tx and other-open: not describable (the second Ongoing); tx-open: an
    Ongoing transaction alice may describe; tx-none: describable, unknown."""
    theirs = pair.same("alice", _transactions(_ask((65, 0, {"transactional_ids": [
        "other-tx", "other-open", "tx-open", "tx-none"]}))))
    assert sorted(s["error_code"] for s in theirs[0]["transaction_states"]) == \
        [NONE, TXN_AUTH, TXN_AUTH, TXN_NOT_FOUND]


@pytest.mark.parametrize("request_", [
    (66, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
             "transactional_id_pattern": None}),
    (66, 2, {"state_filters": ["Ongoing"], "producer_id_filters": [], "duration_filter": -1,
             "transactional_id_pattern": ".*open"}),
    (66, 1, {"state_filters": ["Ongoing", "Empty"], "producer_id_filters": [],
             "duration_filter": 0}),
    (66, 0, {"state_filters": [], "producer_id_filters": []}),
], ids=["v2", "v2-ongoing-pattern", "v1-duration", "v0"])
def test_list_transactions_lists_what_alice_may_describe(pair, request_):
    theirs = pair.same("alice", _transactions(_ask(request_)))
    assert [s["transactional_id"] for s in theirs[0]["transaction_states"]] == ["tx-open"]


def test_describe_producers(pair):
    pair.same("alice", _ask((61, 0, {"topics": [
        {"name": t, "partition_indexes": [0]}
        for t in (*TOPICS, "pay-unknown", "unknown-topic")]})))


# -- topics --------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [7, 4])
def test_create_topics_without_create(pair, version):
    """pay-new is described (the prefix) but not creatable, new-topic neither, orders
    exists; validate_only or not."""
    def request(validate_only):
        return 19, version, {"topics": [
            {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": []} for n in ("pay-new", "new-topic", "orders")],
            "timeout_ms": 5000, "validate_only": validate_only}
    theirs = pair.same("alice", _ask(request(False), request(True)))
    assert {t["error_code"] for t in theirs[0]["topics"]} == {TOPIC_AUTH}


@pytest.mark.parametrize("version", [7, 4])
def test_topics_alice_may_not_touch_leave_no_deadline_to_miss(pair, version):
    """With a timeout of 0, Kafka's controller times out only a request that
    leaves it something to do: topics the client may not create or alter are
    refused before it is asked, and answered as with any timeout."""
    theirs = pair.same("alice", _ask((19, version, {"topics": [
        {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []} for n in ("pay-new", "new-topic", "orders")],
        "timeout_ms": 0, "validate_only": False})))
    assert {t["error_code"] for t in theirs[0]["topics"]} == {TOPIC_AUTH}
    grown = pair.same("alice", _ask((37, 3, {"topics": [
        {"name": n, "count": 2, "assignments": None} for n in ("secret", "orders")],
        "timeout_ms": 0, "validate_only": False})))
    assert {r["error_code"] for r in grown[0]["results"]} == {TOPIC_AUTH}


@pytest.mark.parametrize("version", [6, 3])
def test_delete_topics_without_delete(pair, version):
    names = ["payments", "secret", "orders", "pay-unknown", "unknown-topic"]

    def body(side):
        if version < 6:
            return {"topic_names": names, "timeout_ms": 5000}
        return {"timeout_ms": 5000, "topics": [{"name": n, "topic_id": ZERO_UUID} for n in names]
                + [{"name": None, "topic_id": side.topic_id(t)}
                   for t in ("secret", "payments", "unknown-topic")]}
    theirs = pair.same("alice", _ask((20, version, body)))
    named = {r["name"]: r["error_code"] for r in theirs[0]["responses"] if r["name"]}
    # pay-unknown: alice may describe it (the prefix), so she learns it does not exist
    assert named["pay-unknown"] == UNKNOWN_TOPIC
    assert {c for n, c in named.items() if n != "pay-unknown"} == {TOPIC_AUTH}


@pytest.mark.parametrize("version", [3, 1])
def test_create_partitions_without_alter(pair, version):
    pair.same("alice", _ask((37, version, {"topics": [
        {"name": n, "count": 2, "assignments": None}
        for n in ("payments", "secret", "orders", "pay-unknown")],
        "timeout_ms": 5000, "validate_only": False})))


@pytest.mark.parametrize("version", [2, 0])
def test_delete_records_without_delete(pair, version):
    pair.same("alice", _ask((21, version, {"topics": [
        {"name": n, "partitions": [{"partition_index": 0, "offset": 0}]}
        for n in ("payments", "secret", "orders", "pay-unknown")], "timeout_ms": 5000})))


@pytest.mark.parametrize("version", [11, 1])
def test_list_offsets(pair, version):
    def partitions(timestamp):
        partition = {"partition_index": 0, "timestamp": timestamp}
        if version >= 4:
            partition["current_leader_epoch"] = -1
        return [partition]
    body = {"replica_id": -1, "topics": [
        {"name": n, "partitions": partitions(-2 if i % 2 else -1)}
        for i, n in enumerate(("payments", "secret", "orders", "pay-unknown", "unknown-topic"))]}
    if version >= 2:
        body["isolation_level"] = 0
    if version >= 10:
        body["timeout_ms"] = 5000
    pair.same("alice", _ask((2, version, body)))


@pytest.mark.parametrize("version", [5, 1])
def test_describe_log_dirs_without_describe_on_the_cluster(pair, version):
    pair.same("alice", _ask(
        (35, version, {"topics": None}),
        (35, version, {"topics": [{"topic": "orders", "partitions": [0]}]})))


# -- configs -------------------------------------------------------------------------------------

CONFIG_RESOURCES = [(TOPIC, "payments"), (TOPIC, "secret"), (TOPIC, "orders"),
                    (BROKER, "1"), (BROKER, ""), (BROKER_LOGGER, "1"),
                    (GROUP_CONFIG, "billing"), (GROUP_CONFIG, "other")]


@pytest.mark.parametrize("version", [4, 1])
def test_describe_configs_without_describe_configs(pair, version):
    body = {"resources": [{"resource_type": t, "resource_name": n, "configuration_keys": None}
                          for t, n in CONFIG_RESOURCES], "include_synonyms": False}
    if version >= 3:
        body["include_documentation"] = False
    pair.same("alice", _ask((32, version, body)))


ALTERED = {TOPIC: "retention.ms", BROKER: "log.cleaner.threads",
           BROKER_LOGGER: "kafka.server", GROUP_CONFIG: "consumer.session.timeout.ms"}
VALUES = {TOPIC: "60000", BROKER: "2", BROKER_LOGGER: "INFO", GROUP_CONFIG: "50000"}


@pytest.mark.parametrize("version", [2, 0])
@pytest.mark.parametrize("validate_only", [False, True])
def test_alter_configs_without_alter_configs(pair, version, validate_only):
    pair.same("alice", _ask((33, version, {"resources": [
        {"resource_type": t, "resource_name": n,
         "configs": [{"name": ALTERED[t], "value": VALUES[t]}]}
        for t, n in CONFIG_RESOURCES if t != BROKER_LOGGER], "validate_only": validate_only})))


@pytest.mark.parametrize("version", [1, 0])
@pytest.mark.parametrize("validate_only", [False, True])
def test_incremental_alter_configs_without_alter_configs(pair, version, validate_only):
    pair.same("alice", _ask((44, version, {"resources": [
        {"resource_type": t, "resource_name": n,
         "configs": [{"name": ALTERED[t], "config_operation": 0, "value": VALUES[t]}]}
        for t, n in CONFIG_RESOURCES], "validate_only": validate_only})))


# What Kafka checks before the authorization of a config change (ConfigAdminManager's
# preprocessing on the broker, then the controller's checks): duplicate keys and
# null values of every resource type; a broker's id and operations; an unknown
# resource type.
REFUSED_FIRST = {
    "duplicate keys": lambda t: [{"name": ALTERED[t], "config_operation": 0, "value": VALUES[t]},
                                 {"name": ALTERED[t], "config_operation": 0, "value": VALUES[t]}],
    "null values": lambda t: [{"name": ALTERED[t], "config_operation": 0, "value": None},
                              {"name": "other.name", "config_operation": 0, "value": None}],
    "an unknown operation": lambda t: [{"name": ALTERED[t], "config_operation": 7,
                                        "value": VALUES[t]}],
}


@pytest.mark.parametrize("case", REFUSED_FIRST)
def test_incremental_config_changes_refused_before_their_authorization(pair, case):
    resources = [(t, n) for t, n in CONFIG_RESOURCES] + [(BROKER, "2"), (BROKER_LOGGER, "2")]
    pair.same("alice", _ask((44, 1, {"resources": [
        {"resource_type": t, "resource_name": n, "configs": REFUSED_FIRST[case](t)}
        for t, n in resources], "validate_only": False})))


@pytest.mark.parametrize("case", ["duplicate keys", "null values"])
def test_config_changes_refused_before_their_authorization(pair, case):
    pair.same("alice", _ask((33, 2, {"resources": [
        {"resource_type": t, "resource_name": n,
         "configs": [{"name": c["name"], "value": c["value"]} for c in REFUSED_FIRST[case](t)]}
        for t, n in CONFIG_RESOURCES + [(BROKER, "2")] if t != BROKER_LOGGER],
        "validate_only": False})))


def test_config_changes_of_an_unknown_resource_type_refused_before_their_authorization(pair):
    for api, version in ((44, 1), (33, 2)):
        config = {"name": "retention.ms", "value": "1"}
        if api == 44:
            config["config_operation"] = 0
        pair.same("alice", _ask((api, version, {"resources": [
            {"resource_type": 99, "resource_name": "x", "configs": [config]},
            {"resource_type": 3 if api == 44 else 99, "resource_name": "y",
             "configs": [config]}], "validate_only": False})))


# -- Metadata and DescribeCluster ----------------------------------------------------------------

def _metadata(version: int, topics, auto_create: bool = False, topic_ops: bool = False,
              cluster_ops: bool = False) -> tuple[int, int, dict]:
    body = {"topics": None if topics is None else [{"name": t} for t in topics]}
    if version >= 4:
        body["allow_auto_topic_creation"] = auto_create
    if version >= 8:
        body["include_topic_authorized_operations"] = topic_ops
        if version <= 10:
            body["include_cluster_authorized_operations"] = cluster_ops
    return 3, version, body


METADATA = {
    "all topics": dict(topics=None),
    "all topics with their operations": dict(topics=None, topic_ops=True),
    "named topics": dict(topics=["orders", "payments", "secret", "pay-unknown",
                                 "unknown-topic"]),
    "named topics with their operations": dict(topics=["orders", "payments", "secret"],
                                               topic_ops=True),
    "auto-creation without CREATE": dict(topics=["pay-new", "new-topic"], auto_create=True),
}


# pay-unknown and pay-new: described (the prefix) but unknown, and not creatable
METADATA_CODES = {
    "all topics": {"orders": NONE, "payments": NONE},
    "all topics with their operations": {"orders": NONE, "payments": NONE},
    "named topics": {"orders": NONE, "payments": NONE, "secret": TOPIC_AUTH,
                     "pay-unknown": UNKNOWN_TOPIC, "unknown-topic": TOPIC_AUTH},
    "named topics with their operations": {"orders": NONE, "payments": NONE,
                                           "secret": TOPIC_AUTH},
    "auto-creation without CREATE": {"pay-new": TOPIC_AUTH, "new-topic": TOPIC_AUTH},
}


@pytest.mark.parametrize("version, case", [
    (version, case) for version in (13, 10, 4) for case in METADATA
    # authorized operations exist from v8
    if version >= 8 or not METADATA[case].get("topic_ops")])
def test_metadata(pair, version, case):
    theirs = pair.same("alice", _ask(_metadata(version, **METADATA[case])))
    listed = {t["name"]: t["error_code"] for t in theirs[0]["topics"]}
    assert listed == METADATA_CODES[case]


# Kafka answers the cluster's authorized operations only to whom may DESCRIBE the
# cluster (0 to the others): alice may not, bob may (and CLUSTER_ACTION).
CLUSTER_OPS = {"alice": 0, "bob": 1 << DESCRIBE | 1 << CLUSTER_ACTION}


@pytest.mark.parametrize("version", [10, 8])
@pytest.mark.parametrize("user", ["alice", "bob"])
def test_metadata_cluster_authorized_operations(pair, version, user):
    theirs = pair.same(user, _ask(
        _metadata(version, ["orders"], topic_ops=True, cluster_ops=True),
        _metadata(version, ["orders"], topic_ops=False, cluster_ops=False)))
    assert [a["cluster_authorized_operations"] for a in theirs] == [
        CLUSTER_OPS[user], NOT_ASKED]


@pytest.mark.parametrize("version", [2, 0])
@pytest.mark.parametrize("user", ["alice", "bob"])
def test_describe_cluster(pair, version, user):
    def request(ops):
        body = {"include_cluster_authorized_operations": ops}
        if version >= 1:
            body["endpoint_type"] = 1
        if version >= 2:
            body["include_fenced_brokers"] = False
        return 60, version, body
    theirs = pair.same(user, _ask(request(True), request(False)))
    assert [a["cluster_authorized_operations"] for a in theirs] == [
        CLUSTER_OPS[user], NOT_ASKED]


# -- consumer groups (KIP-848) -------------------------------------------------------------------

def _consumer_heartbeat(group: str, member: str, epoch: int, *, topics=None, regex=None,
                        owned=None) -> tuple[int, int, dict]:
    return 68, 1, {"group_id": group, "member_id": member, "member_epoch": epoch,
                   "instance_id": None, "rack_id": None,
                   "rebalance_timeout_ms": 60000 if epoch == 0 else -1,
                   "subscribed_topic_names": topics, "subscribed_topic_regex": regex,
                   "server_assignor": None, "topic_partitions": owned}


def _assigned_topics(answer: dict, side: Side) -> list:
    assignment = answer["assignment"] or {"topic_partitions": []}
    return sorted(side.label(t["topic_id"]) for t in assignment["topic_partitions"])


def _consumer_describe(group: str, ops: bool) -> tuple[int, int, dict]:
    return 69, 1, {"group_ids": [group], "include_authorized_operations": ops}


def test_consumer_group_heartbeat_with_topics_alice_may_not_describe(pair):
    """A subscription naming secret is refused; one naming orders is not."""
    theirs = pair.same("alice", _ask(
        _consumer_heartbeat("kip848-names", "member-n", 0, topics=["orders", "secret"],
                            owned=[]),
        _consumer_heartbeat("other", "member-n", 0, topics=["orders"], owned=[])))
    assert [a["error_code"] for a in theirs] == [TOPIC_AUTH, GROUP_AUTH]


def test_a_regex_resolves_to_the_topics_the_member_may_describe(pair):
    """alice subscribes to orders|payments|secret by regular expression: the group
    resolves it to orders and payments, the topics she may DESCRIBE, and she is
    assigned those; the group she may describe shows them."""
    def scenario(client: WireClient, side: Side):
        group, member = "kip848-regex", "member-r"
        joined = client.call(*_consumer_heartbeat(
            group, member, 0, regex="orders|payments|secret", owned=[]))
        assert joined["error_code"] == NONE, (side.name, joined)
        answer = _until(f"{side.name}: the regular expression resolved", lambda: (
            lambda a: a if a["error_code"] or a["assignment"] and
            a["assignment"]["topic_partitions"] else None)(
            client.call(*_consumer_heartbeat(group, member, joined["member_epoch"],
                                             owned=[]))))
        described = _normal(69, client.call(*_consumer_describe(group, True)), side)
        left = client.call(*_consumer_heartbeat(group, member, -1))
        return {"joined": _normal(68, joined, side), "epoch": answer["member_epoch"],
                "assigned": _assigned_topics(answer, side), "described": described,
                "left": _normal(68, left, side)}
    theirs = pair.same("alice", scenario)
    assert theirs["assigned"] == ["<id of orders>", "<id of payments>"]
    assert theirs["described"]["groups"][0]["error_code"] == NONE


def test_a_group_holding_a_topic_alice_may_not_describe_is_not_described(pair):
    """The admin's member of kip848-mixed is assigned orders and secret: alice may
    describe the group but not secret, so Kafka tells her nothing of it."""
    for side in pair.sides:
        with _login(side.port, "admin") as admin:
            joined = admin.call(*_consumer_heartbeat(
                "kip848-mixed", "member-admin", 0, topics=["orders", "secret"], owned=[]))
            assert joined["error_code"] == NONE, (side.name, joined)
            assert _assigned_topics(joined, side) == ["<id of orders>", "<id of secret>"]
    theirs = pair.same("alice", _ask(_consumer_describe("kip848-mixed", True),
                                     _consumer_describe("kip848-mixed", False)))
    assert [a["groups"][0]["error_code"] for a in theirs] == [TOPIC_AUTH] * 2
    # the admin sees it whole
    theirs = pair.same("admin", _ask(_consumer_describe("kip848-mixed", False)))
    assert theirs[0]["groups"][0]["error_code"] == NONE
