"""The broker's wire behaviour, spoken through kafka-python's protocol classes and raw
bytes: ApiVersions negotiation, old Metadata versions, ordering, and bad input."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
import uuid

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from kcoord.broker.apis import advertised_versions
from tests.support import RawClient


def _api_versions_frame(version: int, correlation_id: int) -> bytes:
    """An ApiVersions request at any version, built by hand (v5+ has no schema anywhere)."""
    body = b""
    if version >= 3:
        body = b"\x03kp\x02v\x00"  # compact strings "kp", "v", empty tags
    client_id = struct.pack(">h", 5) + b"tests"
    header = struct.pack(">hhi", 18, version, correlation_id) + client_id
    if version >= 3:
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_every_served_api(broker, version):
    with RawClient(broker.port) as client:
        request = ApiVersionsRequest[version](client_software_name="kcoord-tests",
                                              client_software_version="1.0") \
            if version >= 3 else ApiVersionsRequest[version]()
        response = client.request(request)
    assert response.error_code == 0
    served = {(k.api_key, k.min_version, k.max_version) for k in response.api_keys}
    assert served == set(advertised_versions(broker.broker))
    keys = {k for k, _, _ in served}
    assert {3, 18, 19, 20, 32, 60} <= keys


def test_api_versions_unknown_version_gets_v0_fallback(broker):
    with RawClient(broker.port) as client:
        client.send_raw(_api_versions_frame(9, 42))
        frame = client.recv_frame()
    # header v0 (correlation id only), error 35, classic array with only ApiVersions' range
    assert frame == bytes.fromhex("0000002a" "0023" "00000001" "0012" "0000" "0005")
    decoded = ApiVersionsResponse.decode(frame[4:], version=0)
    assert decoded.error_code == 35


def test_api_versions_v3_invalid_software_name(broker):
    # Kafka validates the v3+ software name and version and answers INVALID_REQUEST
    # in the request's (flexible) format with an empty list.
    with RawClient(broker.port) as client:
        request = ApiVersionsRequest[3](client_software_name="bad name!",
                                        client_software_version="1")
        correlation_id = client.send(request)
        frame = client.recv_frame()
    assert frame == struct.pack(">i", correlation_id) + bytes.fromhex("002a" "01" "00000000" "00")


def test_metadata_v0_empty_list_means_all_topics(broker):
    broker.call(lambda: broker.broker.topics.create("wire-v0", 2, {}))
    with RawClient(broker.port) as client:
        response = client.request(MetadataRequest[0](topics=[]))
    names = {t.name for t in response.topics}
    assert {"wire-v0", "__consumer_offsets"} <= names
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", broker.port)]


def test_metadata_v1_null_all_and_empty_none(broker):
    broker.call(lambda: broker.broker.topics.create("wire-v1", 1, {}))
    with RawClient(broker.port) as client:
        everything = client.request(MetadataRequest[1](topics=None))
        nothing = client.request(MetadataRequest[1](topics=[]))
    assert "wire-v1" in {t.name for t in everything.topics}
    assert {t.name: t.is_internal for t in everything.topics}["__consumer_offsets"] is True
    assert everything.controller_id == 1
    assert nothing.topics == []


@pytest.mark.parametrize("version", range(0, 13))
def test_metadata_every_version_auto_creates_named_topic(broker, version):
    name = f"wire-auto-{version}"
    topic = MetadataRequest.MetadataRequestTopic(name=name, topic_id=None)
    kwargs = {"allow_auto_topic_creation": True} if version >= 4 else {}
    with RawClient(broker.port) as client:
        # the request that creates it is answered UNKNOWN_TOPIC_OR_PARTITION, as on
        # Kafka; the topic is there for the next one
        first = client.request(MetadataRequest[version](topics=[topic], **kwargs))
        assert [(t.name, t.error_code, len(t.partitions)) for t in first.topics] == \
            [(name, 3, 0)]
        response = client.request(MetadataRequest[version](topics=[topic], **kwargs))
    (entry,) = response.topics
    assert entry.error_code == 0
    assert entry.name == name
    assert [p.partition_index for p in entry.partitions] == [0]
    if version >= 10:
        assert str(entry.topic_id) != "00000000-0000-0000-0000-000000000000"
    if version >= 2:
        assert response.cluster_id == broker.broker.cluster_id


def test_metadata_without_auto_create_reports_unknown_topic(broker):
    topic = MetadataRequest.MetadataRequestTopic(name="wire-not-created", topic_id=None)
    with RawClient(broker.port) as client:
        response = client.request(MetadataRequest[9](topics=[topic], allow_auto_topic_creation=False))
    assert response.topics[0].error_code == 3
    assert "wire-not-created" not in broker.broker.topics.topics


def test_metadata_v12_lookup_by_topic_id(broker):
    created = broker.call(lambda: broker.broker.topics.create("wire-by-id", 3, {}))
    unknown = MetadataRequest.MetadataRequestTopic(name=None,
                                                   topic_id=uuid.UUID(int=2))
    known = MetadataRequest.MetadataRequestTopic(name=None, topic_id=created.topic_id)
    with RawClient(broker.port) as client:
        response = client.request(MetadataRequest[12](topics=[known, unknown],
                                                      allow_auto_topic_creation=False))
    by_error = {t.error_code: t for t in response.topics}
    assert by_error[0].name == "wire-by-id" and len(by_error[0].partitions) == 3
    assert by_error[100].name is None  # UNKNOWN_TOPIC_ID


def test_create_topics_v0_with_minus_one_defaults(broker):
    # kafkajs sends -1/-1 at v3 and below; Kafka's broker accepts it at any version.
    topic = CreateTopicsRequest.CreatableTopic(name="wire-ct-v0", num_partitions=-1,
                                               replication_factor=-1, assignments=[], configs=[])
    with RawClient(broker.port) as client:
        response = client.request(CreateTopicsRequest[0](topics=[topic], timeout_ms=1000))
    assert response.topics[0].error_code == 0
    assert broker.broker.topics.get("wire-ct-v0").partitions == 1


def test_create_topics_echoes_configs_as_written_and_refuses_empty_list_items(broker):
    """As Kafka 4.4: the answer's configs carry each value the request sets as it
    was written (DescribeConfigs shows them parsed); an empty item of a list is
    refused with Kafka 4's ValidList message."""
    ct = CreateTopicsRequest
    config = ct.CreatableTopic.CreatableTopicConfig

    def topic(name, **configs):
        return ct.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                 assignments=[], configs=[config(name=k.replace("_", "."),
                                                                 value=v)
                                                          for k, v in configs.items()])
    with RawClient(broker.port) as client:
        response = client.request(ct[7](topics=[
            topic("wire-as-written", cleanup_policy="compact , delete", retention_ms=" +1000"),
            topic("wire-gap", cleanup_policy="compact,,delete"),
            topic("wire-trail", cleanup_policy="delete,"),
        ], timeout_ms=1000, validate_only=False))
    results = {t.name: t for t in response.topics}
    written = {c.name: c.value for c in results["wire-as-written"].configs}
    assert (written["cleanup.policy"], written["retention.ms"]) == ("compact , delete", " +1000")
    for name in ("wire-gap", "wire-trail"):
        assert (results[name].error_code, results[name].error_message) == (
            40, "Configuration 'cleanup.policy' values must not be empty.")
    stored = broker.broker.topics.effective_config_strings(
        broker.broker.topics.get("wire-as-written"))
    assert (stored["cleanup.policy"], stored["retention.ms"]) == ("compact,delete", "1000")


def test_create_topics_v1_words_its_refusals_as_kafka_3_9(broker):
    """v1, which only Kafka 3.9 serves, is answered in 3.9's words (asked of 3.9 in
    tests/reference); v2 on in 4.4's."""
    ct = CreateTopicsRequest
    config = ct.CreatableTopic.CreatableTopicConfig
    topics = [ct.CreatableTopic(name="wire-v1-rf3", num_partitions=1, replication_factor=3,
                                assignments=[], configs=[]),
              ct.CreatableTopic(name="wire-v1-gap", num_partitions=1, replication_factor=1,
                                assignments=[],
                                configs=[config(name="cleanup.policy", value="compact,,delete")])]
    answers = {}
    with RawClient(broker.port) as client:
        for version in (1, 2):
            response = client.request(ct[version](topics=topics, timeout_ms=1000,
                                                  validate_only=True))
            answers[version] = {t.name: t.error_message for t in response.topics}
    rf3 = ("Unable to replicate the partition 3 time(s): The target replication factor of 3 "
           "cannot be reached because only 1 broker(s) are registered")
    assert answers[1] == {
        "wire-v1-rf3": rf3 + ".",
        "wire-v1-gap": "Invalid value  for configuration cleanup.policy: String must be one of: "
                       "compact, delete"}
    assert answers[2] == {
        "wire-v1-rf3": rf3 + " or some brokers have all their log directories cordoned.",
        "wire-v1-gap": "Configuration 'cleanup.policy' values must not be empty."}


def test_create_topics_v7_duplicate_and_manual_assignment(broker):
    ct = CreateTopicsRequest
    assign = ct.CreatableTopic.CreatableReplicaAssignment
    topics = [
        ct.CreatableTopic(name="wire-dup", num_partitions=1, replication_factor=1,
                          assignments=[], configs=[]),
        ct.CreatableTopic(name="wire-dup", num_partitions=1, replication_factor=1,
                          assignments=[], configs=[]),
        ct.CreatableTopic(name="wire-manual", num_partitions=-1, replication_factor=-1,
                          assignments=[assign(partition_index=0, broker_ids=[1]),
                                       assign(partition_index=1, broker_ids=[1])], configs=[]),
        ct.CreatableTopic(name="wire-elsewhere", num_partitions=-1, replication_factor=-1,
                          assignments=[assign(partition_index=0, broker_ids=[2])], configs=[]),
    ]
    with RawClient(broker.port) as client:
        response = client.request(ct[7](topics=topics, timeout_ms=1000, validate_only=False))
    results = {t.name: t for t in response.topics}
    assert results["wire-dup"].error_code == 42
    assert results["wire-manual"].error_code == 0 and results["wire-manual"].num_partitions == 2
    assert results["wire-elsewhere"].error_code == 39
    assert "wire-dup" not in broker.broker.topics.topics


def test_delete_topics_v6_by_id_and_unknown_id(broker):
    created = broker.call(lambda: broker.broker.topics.create("wire-del-id", 1, {}))
    state = DeleteTopicsRequest.DeleteTopicState
    with RawClient(broker.port) as client:
        response = client.request(DeleteTopicsRequest[6](
            topics=[state(name=None, topic_id=created.topic_id),
                    state(name=None, topic_id=uuid.UUID(int=3))],
            timeout_ms=1000))
    codes = sorted(r.error_code for r in response.responses)
    assert codes == [0, 100]
    assert broker.broker.topics.get("wire-del-id") is None


def test_delete_internal_topic_is_refused(broker):
    with RawClient(broker.port) as client:
        response = client.request(DeleteTopicsRequest[3](
            topics=[DeleteTopicsRequest.DeleteTopicState(name="__consumer_offsets")],
            timeout_ms=1000))
    assert response.responses[0].error_code == 42
    assert broker.broker.topics.get("__consumer_offsets") is not None


def test_describe_configs_unknown_topic_and_foreign_broker(broker):
    res = DescribeConfigsRequest.DescribeConfigsResource
    with RawClient(broker.port) as client:
        response = client.request(DescribeConfigsRequest[4](resources=[
            res(resource_type=2, resource_name="wire-nope", configuration_keys=None),
            res(resource_type=4, resource_name="7", configuration_keys=None),
            res(resource_type=4, resource_name="1", configuration_keys=["num.partitions", "nope"]),
        ], include_synonyms=False, include_documentation=False))
    unknown, foreign, mine = response.results
    assert unknown.error_code == 3
    assert foreign.error_code == 42
    assert [(c.name, c.value, c.read_only) for c in mine.configs] == [("num.partitions", "1", True)]


def test_pipelined_requests_are_answered_in_order(broker):
    with RawClient(broker.port) as client:
        sent = []
        for i in range(50):
            request = MetadataRequest[1](topics=[]) if i % 2 else ApiVersionsRequest[2]()
            sent.append((request, client.send(request)))
        for request, correlation_id in sent:
            client.read_response(request, correlation_id)


def _assert_still_serving(broker):
    with RawClient(broker.port) as client:
        assert client.request(ApiVersionsRequest[0]()).error_code == 0


def test_unknown_api_key_closes_connection(broker):
    with RawClient(broker.port) as client:
        payload = struct.pack(">hhih", 999, 0, 1, -1)
        client.send_raw(struct.pack(">i", len(payload)) + payload)
        assert client.is_closed_by_peer()
    _assert_still_serving(broker)


def test_unsupported_version_closes_connection(broker):
    with RawClient(broker.port) as client:
        payload = struct.pack(">hhih", 3, 99, 1, -1)
        client.send_raw(struct.pack(">i", len(payload)) + payload)
        assert client.is_closed_by_peer()
    _assert_still_serving(broker)


@pytest.mark.parametrize("size", [-1, 104_857_601, 2**31 - 1])
def test_oversize_or_negative_frame_closes_connection(broker, size):
    with RawClient(broker.port) as client:
        client.send_raw(struct.pack(">i", size) + b"\x00" * 16)
        assert client.is_closed_by_peer()
    _assert_still_serving(broker)


def test_undecodable_body_closes_connection(broker):
    with RawClient(broker.port) as client:
        # Metadata v1 claiming 1000 topics with no bytes behind the count
        payload = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 1000)
        client.send_raw(struct.pack(">i", len(payload)) + payload)
        assert client.is_closed_by_peer()
    _assert_still_serving(broker)


def test_truncated_frame_then_disconnect_leaves_broker_serving(broker):
    with RawClient(broker.port) as client:
        client.send_raw(struct.pack(">i", 100) + b"\x00\x03\x00\x01")
    _assert_still_serving(broker)


def test_random_garbage_never_takes_the_broker_down(broker):
    rng = random.Random(1234)
    for _ in range(40):
        with RawClient(broker.port) as client:
            size = rng.randrange(0, 200)
            body = bytes(rng.randrange(256) for _ in range(size))
            if rng.random() < 0.7:
                # a plausible header: a served key, a random version
                key = rng.choice([3, 18, 19, 20, 32, 60])
                body = struct.pack(">hhi", key, rng.randrange(0, 13), 7) + body
            try:
                client.send_raw(struct.pack(">i", len(body)) + body)
                client.sock.settimeout(2)
                client.sock.recv(65536)
            except (ConnectionError, socket.timeout, OSError):
                pass
    _assert_still_serving(broker)


def test_other_connections_keep_working_while_one_misbehaves(broker):
    with RawClient(broker.port) as good, RawClient(broker.port) as bad:
        bad.send_raw(struct.pack(">i", 50) + os.urandom(10))  # half a frame, never finished
        assert good.request(MetadataRequest[1](topics=None)).controller_id == 1
        bad.send_raw(os.urandom(40))
        assert good.request(ApiVersionsRequest[1]()).error_code == 0


def test_idle_connection_is_closed(make_broker):
    node = make_broker(overrides={"connections.max.idle.ms": 200})
    with RawClient(node.port) as client:
        assert client.request(ApiVersionsRequest[0]()).error_code == 0
        assert client.is_closed_by_peer(wait=5)


def test_half_closed_connection_gets_its_answers_then_closes(broker):
    with RawClient(broker.port) as client:
        versions, metadata = ApiVersionsRequest[1](), MetadataRequest[1](topics=[])
        first = client.send(versions)
        second = client.send(metadata)
        client.sock.shutdown(socket.SHUT_WR)
        assert client.read_response(versions, first).error_code == 0
        assert client.read_response(metadata, second).controller_id == 1
        assert client.is_closed_by_peer()


@pytest.mark.parametrize("version", range(0, 8))
def test_create_topics_every_version(broker, version):
    name = f"wire-ct-every-{version}"
    cfg = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name="retention.ms", value="1000")
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=2, replication_factor=1,
                                               assignments=[], configs=[cfg])
    kwargs = {"validate_only": False} if version >= 1 else {}
    with RawClient(broker.port) as client:
        response = client.request(CreateTopicsRequest[version](topics=[topic], timeout_ms=1000, **kwargs))
    (result,) = response.topics
    assert (result.name, result.error_code) == (name, 0)
    if version >= 5:
        assert result.num_partitions == 2 and result.replication_factor == 1
        assert {c.name: c.value for c in result.configs}["retention.ms"] == "1000"
    if version >= 7:
        assert result.topic_id == broker.broker.topics.get(name).topic_id
    assert broker.broker.topics.get(name).configs == {"retention.ms": "1000"}


@pytest.mark.parametrize("version", range(0, 7))
def test_delete_topics_every_version(broker, version):
    name = f"wire-dt-every-{version}"
    broker.call(lambda: broker.broker.topics.create(name, 1, {}))
    state = DeleteTopicsRequest.DeleteTopicState(name=name)
    with RawClient(broker.port) as client:
        response = client.request(DeleteTopicsRequest[version](topics=[state], timeout_ms=1000))
    assert [(r.name, r.error_code) for r in response.responses] == [(name, 0)]
    assert broker.broker.topics.get(name) is None


@pytest.mark.parametrize("version", range(0, 5))
def test_describe_configs_every_version(broker, version):
    name = f"wire-dc-every-{version}"
    broker.call(lambda: broker.broker.topics.create(name, 1, {"cleanup.policy": "compact"}))
    res = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name=name, configuration_keys=["cleanup.policy", "retention.ms"])
    kwargs = {"include_synonyms": True} if version >= 1 else {}
    if version >= 3:
        kwargs["include_documentation"] = False
    with RawClient(broker.port) as client:
        response = client.request(DescribeConfigsRequest[version](resources=[res], **kwargs))
    (result,) = response.results
    configs = {c.name: c for c in result.configs}
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "604800000"
    if version == 0:
        # Kafka 3.9 answers is_default false at v0 whatever the source (asked in
        # tests/reference).
        assert configs["cleanup.policy"].is_default is False
        assert configs["retention.ms"].is_default is False
    else:
        assert configs["cleanup.policy"].config_source == 1  # TOPIC_CONFIG
        assert configs["retention.ms"].config_source == 5  # DEFAULT_CONFIG
        # Kafka looks only at log.retention.ms, which is unset: no synonym, even
        # though log.retention.hours supplies the value (asked in tests/reference).
        assert [(s.name, s.value) for s in configs["retention.ms"].synonyms] == []
        assert [s.name for s in configs["cleanup.policy"].synonyms] == [
            "cleanup.policy", "log.cleanup.policy"]
    if version >= 3:
        assert configs["cleanup.policy"].config_type == 7  # LIST


def test_broker_configs_are_typed_and_named_as_kafka_4_4_describes_them(broker):
    res = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=4, resource_name="1", configuration_keys=[
            "listeners", "advertised.listeners", "log.dirs", "log.dir",
            "group.consumer.assignors", "group.consumer.assignment.interval.ms"])
    with RawClient(broker.port) as client:
        response = client.request(DescribeConfigsRequest[4](
            resources=[res], include_synonyms=False, include_documentation=False))
    configs = {c.name: c for c in response.results[0].configs}
    assert {name: configs[name].config_type for name in (
        "listeners", "advertised.listeners", "log.dirs", "log.dir")} == dict.fromkeys(
        ("listeners", "advertised.listeners", "log.dirs", "log.dir"), 7)  # LIST
    assert configs["group.consumer.assignors"].value == "uniform,range"
    interval = configs["group.consumer.assignment.interval.ms"]
    assert (interval.config_type, interval.read_only) == (3, False)  # INT, dynamic


@pytest.mark.parametrize("version", range(0, 2))
def test_describe_cluster_every_version(broker, version):
    from kafka.protocol.admin import DescribeClusterRequest
    kwargs = {"endpoint_type": 1} if version >= 1 else {}
    with RawClient(broker.port) as client:
        response = client.request(DescribeClusterRequest[version](
            include_cluster_authorized_operations=False, **kwargs))
    assert response.error_code == 0
    assert response.cluster_id == broker.broker.cluster_id
    assert [(b.broker_id, b.port) for b in response.brokers] == [(1, broker.port)]


@pytest.mark.parametrize("endpoint_type,code", [(2, 114), (3, 115)])
def test_describe_cluster_other_endpoint_types(broker, endpoint_type, code):
    from kafka.protocol.admin import DescribeClusterRequest
    with RawClient(broker.port) as client:
        response = client.request(DescribeClusterRequest[1](
            include_cluster_authorized_operations=False, endpoint_type=endpoint_type))
    # MISMATCHED_ENDPOINT_TYPE / UNSUPPORTED_ENDPOINT_TYPE with nothing else filled in
    assert response.error_code == code
    assert response.brokers == [] and response.cluster_id == ""


def test_describe_configs_invalid_topic_name(broker):
    res = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name="bad name!", configuration_keys=None)
    with RawClient(broker.port) as client:
        response = client.request(DescribeConfigsRequest[2](resources=[res], include_synonyms=False))
    assert response.results[0].error_code == 17


def test_metadata_answers_a_topic_named_twice_once(broker):
    broker.call(lambda: broker.broker.topics.create("wire-twice", 1, {}))
    topic = MetadataRequest.MetadataRequestTopic(name="wire-twice", topic_id=None)
    with RawClient(broker.port) as client:
        response = client.request(MetadataRequest[9](topics=[topic, topic],
                                                     allow_auto_topic_creation=False))
    assert [t.name for t in response.topics] == ["wire-twice"]


def test_metadata_topic_id_below_v12_is_an_invalid_request(broker):
    created = broker.call(lambda: broker.broker.topics.create("wire-id-v10", 1, {}))
    topic = MetadataRequest.MetadataRequestTopic(name="wire-id-v10", topic_id=created.topic_id)
    with RawClient(broker.port) as client:
        response = client.request(MetadataRequest[10](topics=[topic],
                                                      allow_auto_topic_creation=False))
        assert [t.error_code for t in response.topics] == [42]
        # the connection stays usable, as on Kafka
        assert client.request(ApiVersionsRequest[0]()).error_code == 0


class _Transport:
    """Collects what a connection writes; never pushes back."""

    def __init__(self):
        self.written = bytearray()
        self.closed = False
        self.reading = True
        self.pauses = 0

    def write(self, data):
        self.written += data
        self.writes = getattr(self, "writes", 0) + 1

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 4242) if name == "peername" else default

    def close(self):
        self.closed = True

    def pause_reading(self):
        assert self.reading
        self.reading = False
        self.pauses += 1

    def resume_reading(self):
        assert not self.reading
        self.reading = True


def _feed(broker, chunks, transport_out=None):
    """The bytes one connection answers to ``chunks`` received in that order."""
    from kcoord.broker.server import KafkaConnection

    async def run():
        connection = KafkaConnection(broker.broker)
        transport = _Transport()
        if transport_out is not None:
            transport_out.append(transport)
        connection.connection_made(transport)
        for chunk in chunks:
            connection.data_received(chunk)
        # A pass may stop after its time budget and go on in a later turn.
        for _ in range(1000):
            if connection.idle and not connection._pass_scheduled:
                break
            await asyncio.sleep(0.001)
        connection.connection_lost(None)
        return bytes(transport.written), transport.closed

    return broker.call(run)


def test_frames_split_anywhere_across_reads_get_the_same_answers(broker):
    frames = b"".join(_api_versions_frame(v, i) for i, v in enumerate([0, 3, 1, 3, 2, 4]))
    whole, closed = _feed(broker, [frames])
    assert not closed
    pos, correlation_ids = 0, []
    while pos < len(whole):
        size, correlation_id = struct.unpack_from(">ii", whole, pos)
        correlation_ids.append(correlation_id)
        pos += 4 + size
    assert correlation_ids == list(range(6))
    rng = random.Random(7)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(frames)), rng.randint(1, 12)))
        chunks = [frames[a:b] for a, b in zip([0] + cuts, cuts + [len(frames)])]
        assert _feed(broker, chunks) == (whole, False), cuts
    assert _feed(broker, [frames[i:i + 1] for i in range(len(frames))]) == (whole, False)


@pytest.mark.parametrize("split", [0, 2, 3, 5])
def test_oversize_frame_after_a_good_one_closes_connection_in_any_split(broker, split):
    good = _api_versions_frame(0, 1)
    bad = struct.pack(">i", 104_857_601) + b"\x00" * 8
    data = good + bad
    chunks = [data[:len(good) + split], data[len(good) + split:]] if split else [data]
    answer, closed = _feed(broker, chunks)
    assert closed
    # A good frame read together with the bad size is dropped with the connection;
    # one read before the size is complete is answered first.
    assert answer == (_feed(broker, [good])[0] if 0 < split < 4 else b"")


def _waiting_fetch_frame(correlation_id: int, topic: str, max_wait_ms: int) -> bytes:
    """A Fetch v12 of partition 0 that waits ``max_wait_ms`` (it asks for more
    bytes than there are)."""
    from kcoord.protocol.headers import frame_request
    from kcoord.protocol.messages.fetch import FETCH

    return frame_request(FETCH, 12, correlation_id, "tests", {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1 << 30,
        "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
             "last_fetched_epoch": -1, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})


def _produce_frame(correlation_id: int, topic: str, size: int) -> bytes:
    from kcoord.protocol.headers import frame_request
    from kcoord.protocol.messages.produce import PRODUCE
    from kcoord.protocol.records import Record, build_batch

    batch = build_batch([Record(None, 1_700_000_000_000, None, os.urandom(size // 2).hex().encode())])
    return frame_request(PRODUCE, 9, correlation_id, "tests", {
        "transactional_id": None, "acks": -1, "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})


def test_large_frames_split_anywhere_across_reads_get_the_same_answers(broker):
    from kcoord.broker.server import LARGE_FRAME

    # Small and large frames (received into buffers of their own) in turn, each
    # run into a topic of its own: the batches are appended (a byte lost or
    # moved fails their CRC) and the answers are the same.
    runs = iter(range(10_000))
    sizes = [LARGE_FRAME, 5 * LARGE_FRAME, 100]

    def frames_for_a_new_topic():
        topic = f"split-{next(runs):05d}"
        broker.call(broker.broker.topics.create, topic, 1, {})
        parts = [_api_versions_frame(3, 0), _produce_frame(1, topic, sizes[0]),
                 _api_versions_frame(0, 2), _produce_frame(3, topic, sizes[1]),
                 _produce_frame(4, topic, sizes[2]), _api_versions_frame(1, 5)]
        return topic.encode(), parts

    def feed(cut):
        topic, parts = frames_for_a_new_topic()
        frames = b"".join(parts)
        answer, closed = _feed(broker, cut(frames, parts))
        return answer.replace(topic, b"T" * len(topic)), closed

    whole, closed = feed(lambda frames, parts: [frames])
    assert not closed
    pos, answers = 0, []
    while pos < len(whole):
        size, correlation_id = struct.unpack_from(">ii", whole, pos)
        answers.append((correlation_id, whole[pos + 4:pos + 4 + size]))
        pos += 4 + size
    assert [c for c, _ in answers] == list(range(6))
    from kcoord.protocol.messages.produce import PRODUCE
    offsets = [PRODUCE.codec(9, "response").decode(body[5:]).responses[0]
               .partition_responses[0] for c, body in answers if c in (1, 3, 4)]
    assert [(p.error_code, p.base_offset) for p in offsets] == [(0, 0), (0, 1), (0, 2)]
    rng = random.Random(11)
    for _ in range(20):
        def random_cuts(frames, parts):
            cuts = sorted(rng.sample(range(1, len(frames)), rng.randint(1, 12)))
            return [frames[a:b] for a, b in zip([0] + cuts, cuts + [len(frames)])]
        assert feed(random_cuts) == (whole, False)
    # Around the start, the size prefix and the end of every frame, in two and
    # three reads.
    for index in range(len(sizes) + 3):
        for near_start in (1, 3, 4, 5, 40):
            for near_end in (-1, 0, 1):
                def cuts(frames, parts, index=index, near_start=near_start, near_end=near_end):
                    start = sum(len(p) for p in parts[:index])
                    end = start + len(parts[index])
                    points = sorted({max(1, start + near_start),
                                     min(len(frames) - 1, end + near_end)})
                    return [frames[a:b] for a, b in zip([0] + points, points + [len(frames)])]
                assert feed(cuts) == (whole, False), (index, near_start, near_end)


def test_reading_pauses_while_megabytes_of_frames_wait(broker):
    from kcoord.broker import server
    from kcoord.protocol.messages.produce import PRODUCE

    topic = f"pause-{uuid.uuid4().hex[:8]}"
    broker.call(broker.broker.topics.create, topic, 1, {})
    # A long-poll fetch first: the produce requests behind it wait for its answer.
    waiting = _waiting_fetch_frame(99, topic, 300)
    frames = [_produce_frame(i, topic, 900_000) for i in range(12)]
    transports = []
    answers, closed = _feed(broker, [waiting + b"".join(frames)], transports)
    assert not closed
    (transport,) = transports
    # 11 MB arrived at once behind it: reading paused (beyond 4 MB queued), and
    # resumed.
    assert transport.pauses >= 1 and transport.reading
    offsets = []
    (pos,) = struct.unpack_from(">i", answers, 0)
    pos += 4  # past the fetch's answer
    while pos < len(answers):
        (size,) = struct.unpack_from(">i", answers, pos)
        # Header v1: correlation id, no tags; then the Produce v9 answer.
        answer = PRODUCE.codec(9, "response").decode(answers[pos + 9:pos + 4 + size])
        (partition,) = answer.responses[0].partition_responses
        assert partition.error_code == 0
        offsets.append(partition.base_offset)
        pos += 4 + size
    assert offsets == list(range(12))
    # A few small frames do not pause it.
    transports = []
    _feed(broker, [b"".join(_api_versions_frame(0, i) for i in range(50))], transports)
    assert transports[0].pauses == 0 and server._MAX_QUEUED_BYTES == 4 << 20



def test_pipelined_produce_requests_are_answered_together_in_one_write(broker, monkeypatch):
    """Produce requests that arrive together (a producer keeps up to five in
    flight) are appended at once and their answers leave in one write, in order,
    not one task, turn of the loop and write each; a long-poll fetch among them
    still holds back the answers behind it until it is answered."""
    from kcoord.broker import server
    from kcoord.protocol.messages.produce import PRODUCE

    # One pass serves them all, however slow this machine is just now.
    monkeypatch.setattr(server, "PASS_BUDGET_S", 60.0)
    topic = f"together-{uuid.uuid4().hex[:8]}"
    broker.call(broker.broker.topics.create, topic, 1, {})
    transports = []
    answers, closed = _feed(broker, [b"".join(_produce_frame(i, topic, 1000)
                                               for i in range(5))], transports)
    assert not closed and transports[0].writes == 1

    def produce_answers(data, pos=0):
        found = []
        while pos < len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            (correlation_id,) = struct.unpack_from(">i", data, pos + 4)
            answer = PRODUCE.codec(9, "response").decode(data[pos + 9:pos + 4 + size])
            (partition,) = answer.responses[0].partition_responses
            found.append((correlation_id, partition.error_code, partition.base_offset))
            pos += 4 + size
        return found
    assert produce_answers(answers) == [(i, 0, i) for i in range(5)]
    waiting = _waiting_fetch_frame(99, topic, 200)
    transports = []
    answers, closed = _feed(broker, [_produce_frame(10, topic, 1000) + waiting
                                     + _produce_frame(11, topic, 1000)], transports)
    assert not closed
    (first_size,) = struct.unpack_from(">i", answers, 0)
    (fetch_size,) = struct.unpack_from(">i", answers, 4 + first_size)
    assert struct.unpack_from(">i", answers, 8 + first_size)[0] == 99  # the fetch, second
    assert produce_answers(answers[:4 + first_size]) == [(10, 0, 5)]
    assert produce_answers(answers, 8 + first_size + fetch_size) == [(11, 0, 6)]


def test_produce_requests_up_to_2_mb_are_decoded_on_the_event_loop(broker, monkeypatch):
    from kcoord.broker import server
    from kcoord.broker.apis import REGISTRY

    offloaded = []
    real = server._decode_large

    def recording(reg, api_version, frame):
        offloaded.append((reg.key, len(frame)))
        return real(reg, api_version, frame)

    monkeypatch.setattr(server, "_decode_large", recording)
    assert REGISTRY[0].decode_on_loop == 2 << 20
    inline = _produce_frame(1, "nowhere", server.OFFLOAD_BYTES + 1000)
    large = _produce_frame(2, "nowhere", (2 << 20) + 1000)
    answers, closed = _feed(broker, [inline, large])
    assert not closed and answers.count(b"nowhere") == 2
    assert offloaded == [(0, len(large) - 4)]
    # Other APIs (no generated codec) are decoded in a worker thread from OFFLOAD_BYTES.
    assert all(reg.decode_on_loop == 0 for key, reg in REGISTRY.items() if key != 0)


def test_frames_beyond_the_preallocation_limit_grow_as_they_arrive(broker, monkeypatch):
    from kcoord.broker import server

    monkeypatch.setattr(server, "PREALLOCATE_MAX", 50_000)
    frame = _produce_frame(1, "nowhere", 120_000)
    header_only, _ = _feed(broker, [frame[:8]])
    assert header_only == b""

    async def announced_only():
        connection = server.KafkaConnection(broker.broker)
        connection.connection_made(_Transport())
        connection.data_received(frame[:100])
        kept = connection._frame, len(connection._buffer)
        connection.connection_lost(None)
        return kept

    # Nothing the size of the frame is set aside for a frame not yet received...
    assert broker.call(announced_only) == (None, 100)
    # ...and it is answered all the same, however it arrives.
    whole, closed = _feed(broker, [frame])
    assert not closed and b"nowhere" in whole
    rng = random.Random(5)
    cuts = sorted(rng.sample(range(1, len(frame)), 8))
    assert _feed(broker, [frame[a:b] for a, b in zip([0] + cuts, cuts + [len(frame)])]) == \
        (whole, False)


async def test_a_handler_started_at_once_is_resumed_with_what_it_waited_for():
    """An async handler runs until it first waits when its request is served; a
    task then drives the rest: it gets the result or the error of what it
    waited for, and a cancellation (its connection closed) reaches it."""
    from kcoord.broker.server import _resumed

    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()

    async def handler():
        value = await first
        try:
            await second
        except ValueError as exc:
            value += len(str(exc))
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return ("cancelled", value)
        return ("not cancelled", value)

    async def also_waiting():  # another request awaiting the same future meanwhile
        return await first

    coro = handler()
    awaited = coro.send(None)
    assert awaited is first
    rest = _resumed(coro, awaited)  # what the connection's task will await
    other = asyncio.ensure_future(also_waiting())
    await asyncio.sleep(0)  # it awaits the same future before that task starts
    task = asyncio.ensure_future(rest)
    await asyncio.sleep(0)
    first.set_result(5)
    await asyncio.sleep(0)
    second.set_exception(ValueError("four"))
    await asyncio.sleep(0.01)
    assert not task.done()
    task.cancel()
    assert await asyncio.wait_for(task, 5) == ("cancelled", 9)
    assert await other == 5
