"""A topic's configs changed at run time by the admin clients of confluent-kafka
(IncrementalAlterConfigs), kafka-python and aiokafka (AlterConfigs): applied
at once (retention deletes, produce checks the new size, the cleaner
compacts), shown by DescribeConfigs, and kept over a restart."""

from __future__ import annotations

import asyncio
import time

import pytest

from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kcoord.protocol.client import WireClient

FAST = {"log.retention.check.interval.ms": "200", "log.cleaner.backoff.ms": "200"}


def _create(admin: AdminClient, name: str, **configs) -> None:
    for future in admin.create_topics([NewTopic(name, 1, 1, config=configs)]).values():
        future.result(10)


def _produce(bootstrap: str, topic: str, count: int, size: int = 100, keys: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.size": 1})
    for i in range(count):
        key = f"k{i % keys}".encode() if keys else None
        producer.produce(topic, b"x" * size, key=key)
        producer.flush(10)


def _earliest(bootstrap: str, topic: str) -> int:
    with WireClient.to(bootstrap) as client:
        answer = client.call(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": -2}]}]})
    return answer["topics"][0]["partitions"][0]["offset"]


def _described(admin: AdminClient, topic: str) -> dict[str, tuple[str, int]]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    (future,) = admin.describe_configs([resource]).values()
    return {name: (entry.value, entry.source) for name, entry in future.result(10).items()}


def _until(done, timeout=15.0, what="") -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not done in {timeout} s: {what}"
        time.sleep(0.1)


def test_a_shorter_retention_set_at_run_time_deletes_at_the_next_pass(make_broker):
    node = make_broker(overrides=FAST)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    _create(admin, "ac-retention", **{"internal.segment.bytes": "1024"})
    _produce(node.bootstrap, "ac-retention", 40)
    assert _earliest(node.bootstrap, "ac-retention") == 0
    resource = ConfigResource(ResourceType.TOPIC, "ac-retention", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(10)
    assert _described(admin, "ac-retention")["retention.ms"][0] == "1"
    _until(lambda: _earliest(node.bootstrap, "ac-retention") > 0, what="retention")


def test_a_smaller_max_message_bytes_refuses_the_next_produce(make_broker):
    from kafka.admin import ConfigResource as KPResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    node = make_broker()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    _create(admin, "ac-size")
    _produce(node.bootstrap, "ac-size", 1, size=1000)
    kp = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    kp.alter_configs([KPResource(ConfigResourceType.TOPIC, "ac-size",
                                 configs={"max.message.bytes": "200"})])
    kp.close()
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
    errors = []
    producer.produce("ac-size", b"x" * 1000, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None and "too large" in errors[0].str().lower()
    assert _described(admin, "ac-size")["max.message.bytes"] == ("200", 1)


def test_max_decompressed_message_bytes_set_at_run_time_refuses_larger_compressed_records(
        make_broker):
    """Kafka 4.4's bound on a record's decompressed size: set for the broker at run
    time, a gzip producer's larger record fails with INVALID_RECORD and a smaller
    one is appended; a topic's own larger value lets the larger one in."""
    node = make_broker()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    _create(admin, "ac-decompressed")
    _create(admin, "ac-decompressed-own", **{"max.decompressed.message.bytes": "5000"})
    cluster = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("max.decompressed.message.bytes", "500",
                    incremental_operation=AlterConfigOpType.SET)])
    (future,) = admin.incremental_alter_configs([cluster]).values()
    future.result(10)
    assert _described(admin, "ac-decompressed")["max.decompressed.message.bytes"][0] == "500"
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0,
                         "compression.type": "gzip", "retries": 0})
    outcomes = []
    for topic, size in (("ac-decompressed", 1000), ("ac-decompressed", 100),
                        ("ac-decompressed-own", 1000)):
        producer.produce(topic, b"x" * size,
                         on_delivery=lambda err, _m, t=topic, n=size: outcomes.append(
                             (t, n, err.name() if err else None)))
        producer.flush(10)
    assert outcomes == [("ac-decompressed", 1000, "INVALID_RECORD"),
                        ("ac-decompressed", 100, None), ("ac-decompressed-own", 1000, None)]


def test_compaction_turned_on_at_run_time_compacts_and_survives_a_restart(make_broker, tmp_path):
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AIOResource
    from aiokafka.admin.config_resource import ConfigResourceType as AIOType

    node = make_broker(tmp_path / "compact", overrides=FAST)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    _create(admin, "ac-compact", **{"internal.segment.bytes": "1024"})

    def records() -> int:
        """How many records the partition holds from its start to its end."""
        from confluent_kafka import Consumer
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "ac-reader",
                             "enable.auto.commit": False})
        _low, high = consumer.get_watermark_offsets(TopicPartition("ac-compact", 0), 10)
        consumer.assign([TopicPartition("ac-compact", 0, 0)])
        seen, last = 0, -1
        deadline = time.monotonic() + 10
        while last < high - 1 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                seen, last = seen + 1, message.offset()
        consumer.close()
        assert last == high - 1, (last, high)
        return seen

    _produce(node.bootstrap, "ac-compact", 60, keys=3)
    time.sleep(1)  # several cleaner passes: none compacts a topic of policy delete
    assert records() == 60

    async def alter():
        client = AIOKafkaAdminClient(bootstrap_servers=node.bootstrap)
        await client.start()
        try:
            await client.alter_configs([AIOResource(AIOType.TOPIC, "ac-compact", configs={
                "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                "internal.segment.bytes": "1024", "segment.bytes": "2097152"})])
        finally:
            await client.close()

    asyncio.run(alter())

    def compacted() -> bool:
        return records() < 60

    _until(compacted, timeout=30, what="compaction")
    node.stop()
    again = make_broker(tmp_path / "compact", overrides=FAST)
    described = _described(AdminClient({"bootstrap.servers": again.bootstrap}), "ac-compact")
    assert described["cleanup.policy"] == ("compact", 1)
    assert described["segment.bytes"] == ("2097152", 1)
    # internal: listed only because the topic sets it, as on Kafka 4.4
    assert described["internal.segment.bytes"] == ("1024", 1)


def _alter_broker(admin: AdminClient, name: str, **configs) -> None:
    """IncrementalAlterConfigs of a broker; the cluster-wide default ("") as
    ``kafka-configs --entity-default`` sends it (the admin clients name brokers)."""
    if name == "":
        bootstrap = admin.list_topics(timeout=10).orig_broker_name.split("/")[0]
        with WireClient.to(bootstrap) as client:
            answer = client.call(44, 1, {"resources": [{
                "resource_type": 4, "resource_name": "", "configs": [
                    {"name": k.replace("_", "."), "config_operation": 0, "value": v}
                    for k, v in configs.items()]}], "validate_only": False})
        assert answer["responses"][0]["error_code"] == 0, answer
        return
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(10)


def test_a_cluster_wide_retention_set_at_run_time_deletes_topics_without_their_own(
        make_broker, tmp_path):
    """``kafka-configs --entity-type brokers --entity-default --alter``: every topic
    that does not set retention.ms itself follows it at the next pass; one that
    sets it keeps its own; the setting survives a restart."""
    node = make_broker(overrides=FAST, data_dir=tmp_path)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    _create(admin, "ac-follows", **{"internal.segment.bytes": "1024"})
    _create(admin, "ac-own", **{"internal.segment.bytes": "1024", "retention.ms": "86400000"})
    for topic in ("ac-follows", "ac-own"):
        _produce(node.bootstrap, topic, 40)
    _alter_broker(admin, "", log_retention_ms="1")
    assert _described(admin, "ac-follows")["retention.ms"] == ("1", 3)  # DYNAMIC_DEFAULT
    _until(lambda: _earliest(node.bootstrap, "ac-follows") > 0, what="retention")
    assert _earliest(node.bootstrap, "ac-own") == 0
    # this broker's own value wins over the cluster's
    _alter_broker(admin, "1", log_retention_ms="86400000")
    assert _described(admin, "ac-follows")["retention.ms"] == ("86400000", 2)
    node.stop()
    again = make_broker(overrides=FAST, data_dir=tmp_path)
    admin = AdminClient({"bootstrap.servers": again.bootstrap})
    assert _described(admin, "ac-follows")["retention.ms"] == ("86400000", 2)
    with WireClient.to(again.bootstrap) as client:  # (the admin clients ask by id only)
        answer = client.call(32, 4, {"resources": [
            {"resource_type": 4, "resource_name": "", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    # (min.insync.replicas: the cluster's own, as on Kafka 4.4 with eligible leader
    # replicas)
    assert [(c["name"], c["value"], c["config_source"])
            for c in answer["results"][0]["configs"]] == [("log.retention.ms", "1", 3),
                                                          ("min.insync.replicas", "1", 3)]


def test_broker_configs_kafka_does_not_change_while_running_are_refused(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name, value in (("node.id", "3"), ("auto.create.topics.enable", "false")):
        try:
            _alter_broker(admin, "1", **{name.replace(".", "_"): value})
        except KafkaException as error:
            assert f"Cannot update these configs dynamically: [{name}]" in str(error)
        else:
            raise AssertionError(f"{name} was changed")


def test_a_logger_s_level_changes_while_the_broker_runs(tmp_path):
    """kafka-configs --entity-type broker-loggers (IncrementalAlterConfigs of a
    BROKER_LOGGER): a logger set to DEBUG logs each request at once, one without
    a level of its own follows its ancestor, and a level taken away (DELETE)
    falls back to the ancestor's; DescribeConfigs shows each logger's level."""
    from tests.support import BrokerProcess

    process = BrokerProcess(tmp_path).start()  # logs at INFO
    try:
        with WireClient.to(process.bootstrap) as client:
            def levels():
                answer = client.call(32, 4, {"resources": [
                    {"resource_type": 8, "resource_name": "1", "configuration_keys": None}],
                    "include_synonyms": False, "include_documentation": False})
                return {c["name"]: c["value"] for c in answer["results"][0]["configs"]}

            def alter(*changes, validate_only=False):
                answer = client.call(44, 1, {"resources": [{
                    "resource_type": 8, "resource_name": "1", "configs": [
                        {"name": n, "config_operation": op, "value": v} for n, op, v in changes]}],
                    "validate_only": validate_only})
                return answer["responses"][0]["error_code"]

            def requests_logged():
                return sum(e.get("event") == "request" and e.get("api") == "ApiVersions"
                           for e in process.events)

            def api_versions():
                client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})

            assert levels()["root"] == "INFO" and levels()["kcoord.server"] == "INFO"
            api_versions()
            assert alter(("kcoord.server", 0, "DEBUG"), validate_only=True) == 0
            assert levels()["kcoord.server"] == "INFO"  # validated, not applied
            assert alter(("kcoord.server", 0, "DEBUG")) == 0
            assert {n: v for n, v in levels().items() if v != "INFO"} == {"kcoord.server": "DEBUG"}
            api_versions()
            _until(lambda: requests_logged() == 1, what="the request logged at DEBUG")
            assert alter(("kcoord", 0, "ERROR"), ("kcoord.server", 1, None)) == 0
            seen = levels()
            assert seen["kcoord.server"] == seen["kcoord.groups"] == "ERROR"
            assert seen["root"] == "INFO"
            api_versions()  # not logged: kcoord.server follows kcoord again
            assert alter(("kcoord.server", 0, "TRACE")) == 0
            api_versions()
            _until(lambda: requests_logged() >= 2, what="the request logged at TRACE")
            assert requests_logged() == 2
    finally:
        process.kill()


def test_the_broker_s_logger_level_is_described_as_kafka_describes_its_loggers(tmp_path):
    """DescribeConfigs of a BROKER_LOGGER (Admin.describeConfigs, kafka-configs
    --entity-type broker-loggers): the level the broker logs at, in log4j's name,
    as a dynamic logger config with no type, at every version; kcoord answered
    nothing and closed the connection, and Java's Admin retried until its timeout."""
    from tests.support import BrokerProcess

    process = BrokerProcess(tmp_path).start()  # logs at INFO
    try:
        with WireClient.to(process.bootstrap) as client:
            for version in range(5):
                answer = client.call(32, version, {
                    "resources": [{"resource_type": 8, "resource_name": "1",
                                   "configuration_keys": None}],
                    "include_synonyms": True, "include_documentation": True})
                (result,) = answer["results"]
                assert result["error_code"] == 0, (version, result)
                (root,) = [c for c in result["configs"] if c["name"] == "root"]
                assert root["value"] == "INFO" and root["read_only"] is False, (version, root)
                if version >= 1:
                    assert root["config_source"] == 6 and root["synonyms"] == [], root
                if version >= 3:
                    # (Kafka answers an empty documentation for its loggers)
                    assert root["config_type"] == 0 and root["documentation"] == "", root
            # the connection still serves
            assert client.call(18, 3, {"client_software_name": "t",
                                       "client_software_version": "1"})["error_code"] == 0
    finally:
        process.kill()


@pytest.mark.parametrize("level,log4j", [("debug", "DEBUG"), ("info", "INFO"),
                                         ("warning", "WARN"), ("error", "ERROR")])
def test_log_levels_are_named_as_log4j_names_them(level, log4j):
    from kcoord.broker import logs

    try:
        logs.configure("json", level)
        assert logs.root_level() == log4j
    finally:
        logs.configure("console", "warning")  # as tests/conftest.py has it


def test_altered_configs_survive_a_kill(tmp_path):
    """A topic's configs and the dynamic broker configs, acknowledged, then the
    broker killed (SIGKILL): the next start has them all."""
    from tests.support import BrokerProcess

    process = BrokerProcess(tmp_path).start()
    try:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        _create(admin, "ac-killed")
        resource = ConfigResource(ResourceType.TOPIC, "ac-killed", incremental_configs=[
            ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
        (future,) = admin.incremental_alter_configs([resource]).values()
        future.result(10)
        _alter_broker(admin, "1", log_cleaner_delete_retention_ms="4000000")
        _alter_broker(admin, "", message_max_bytes="2000000")
    finally:
        process.kill()  # SIGKILL
    again = BrokerProcess(tmp_path).start()
    try:
        admin = AdminClient({"bootstrap.servers": again.bootstrap})
        described = _described(admin, "ac-killed")
        assert described["retention.ms"] == ("123456", 1)
        assert described["delete.retention.ms"] == ("4000000", 2)  # DYNAMIC_BROKER_CONFIG
        assert described["max.message.bytes"] == ("2000000", 3)  # DYNAMIC_DEFAULT_BROKER
    finally:
        again.terminate()


def test_numbers_of_thousands_of_digits_are_refused_in_kafka_s_words(broker):
    """A config value or a broker id of 5,000 digits (past Python's int() limit):
    refused as Kafka refuses a number it cannot read, the connection still
    serving; kcoord closed it."""
    huge = "1" * 5000
    with WireClient.to(broker.bootstrap) as client:
        for resource_type, name, key, code in ((4, "", "log.retention.ms", 42),
                                               (2, "__consumer_offsets", "retention.ms", 40)):
            answer = client.call(44, 1, {"resources": [{
                "resource_type": resource_type, "resource_name": name, "configs": [
                    {"name": key, "config_operation": 0, "value": huge}]}],
                "validate_only": True})["responses"][0]
            assert answer["error_code"] == code, answer
            assert answer["error_message"].endswith("Not a number of type LONG")
        for resource_type in (4, 8):
            (result,) = client.call(32, 4, {"resources": [
                {"resource_type": resource_type, "resource_name": huge,
                 "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False})["results"]
            assert result["error_code"] == 42
            assert result["error_message"] == f"Broker id must be an integer, but it is: {huge}"
        answer = client.call(44, 1, {"resources": [{
            "resource_type": 8, "resource_name": huge, "configs": [
                {"name": "root", "config_operation": 0, "value": "INFO"}]}],
            "validate_only": True})["responses"][0]
        assert answer["error_message"] == f"Node id must be an integer, but it is: {huge}"
