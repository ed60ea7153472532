"""``kcoord serve`` as a user runs it: a child process, its flags, its data dir."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.metadata import MetadataRequest

from tests.support import REPO, BrokerProcess, RawClient


def _broker_config(port: int, *names: str) -> dict[str, tuple[str, int]]:
    res = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=4, resource_name="1", configuration_keys=list(names))
    with RawClient(port) as client:
        response = client.request(DescribeConfigsRequest[1](resources=[res], include_synonyms=False))
    return {c.name: (c.value, c.config_source) for c in response.results[0].configs}


def test_restart_keeps_cluster_id_topics_and_ids(tmp_path):
    first = BrokerProcess(tmp_path).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=first.bootstrap, request_timeout_ms=10000)
        admin.create_topics({"kept": {"num_partitions": 4, "replication_factor": 1,
                                      "configs": {"cleanup.policy": "compact"}}})
        before = admin.describe_topics(["kept"])[0]
        cluster_before = admin.describe_cluster()["cluster_id"]
        admin.close()
    finally:
        assert first.terminate() == 0

    second = BrokerProcess(tmp_path).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=second.bootstrap, request_timeout_ms=10000)
        after = admin.describe_topics(["kept"])[0]
        assert admin.describe_cluster()["cluster_id"] == cluster_before
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kept")])
        admin.close()
    finally:
        assert second.terminate() == 0
    assert after["topic_id"] == before["topic_id"]
    assert len(after["partitions"]) == 4
    assert configs["topic"]["kept"]["cleanup.policy"]["value"] == "compact"
    assert (tmp_path / "meta.properties").read_text().count(f"cluster.id={cluster_before}") == 1


def test_sigterm_stops_cleanly_and_logs_json(tmp_path):
    node = BrokerProcess(tmp_path).start()
    node.proc.send_signal(signal.SIGTERM)
    assert node.proc.wait(15) == 0
    node._reader.join(5)
    names = node.event_names()
    assert "broker.started" in names and "broker.stopped" in names
    started = next(e for e in node.events if e.get("event") == "broker.started")
    assert started["level"] == "info" and "timestamp" in started


def test_config_file_overrides_and_unknown_properties(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(
        "# a Kafka server.properties\n"
        "node.id=1\n"
        "num.partitions=3\n"
        "some.unknown.property=42\n"
        "process.roles=broker,controller\n"
        f"log.dirs={tmp_path / 'from-file'}\n"
    )
    node = BrokerProcess(tmp_path / "data", "--config", str(props),
                         "--override", "auto.create.topics.enable=false").start()
    try:
        values = _broker_config(node.port, "num.partitions", "auto.create.topics.enable")
        assert values["num.partitions"] == ("3", 4)  # STATIC_BROKER_CONFIG
        assert values["auto.create.topics.enable"] == ("false", 4)
        topic = MetadataRequest.MetadataRequestTopic(name="not-auto", topic_id=None)
        with RawClient(node.port) as client:
            response = client.request(MetadataRequest[4](topics=[topic],
                                                         allow_auto_topic_creation=True))
        assert response.topics[0].error_code == 3
    finally:
        assert node.terminate() == 0
    warnings = [e for e in node.events if e.get("event") == "config.unknown_property_ignored"]
    assert [w["property"] for w in warnings] == ["some.unknown.property"]
    # --data-dir wins over log.dirs from the file
    assert (tmp_path / "data" / "meta.properties").exists()
    assert not (tmp_path / "from-file").exists()


def test_kafka_defaults_switch_restores_kafka_values(tmp_path):
    dev = BrokerProcess(tmp_path / "dev").start()
    try:
        dev_values = _broker_config(dev.port, "group.initial.rebalance.delay.ms",
                                    "offsets.topic.segment.bytes")
    finally:
        dev.terminate()
    kafka = BrokerProcess(tmp_path / "kafka", "--kafka-defaults").start()
    try:
        kafka_values = _broker_config(kafka.port, "group.initial.rebalance.delay.ms",
                                      "offsets.topic.segment.bytes",
                                      "offsets.topic.replication.factor")
    finally:
        kafka.terminate()
    assert dev_values["group.initial.rebalance.delay.ms"][0] == "0"
    assert kafka_values["group.initial.rebalance.delay.ms"][0] == "3000"
    assert kafka_values["offsets.topic.segment.bytes"][0] == "104857600"
    assert kafka_values["offsets.topic.replication.factor"][0] == "1"


def test_advertised_address_is_what_metadata_returns(tmp_path):
    node = BrokerProcess(tmp_path, "--advertised-host", "broker.example", "--advertised-port",
                         "19999").start()
    try:
        with RawClient(node.port) as client:
            response = client.request(MetadataRequest[1](topics=[]))
        assert [(b.host, b.port) for b in response.brokers] == [("broker.example", 19999)]
    finally:
        node.terminate()


def test_second_broker_on_same_data_dir_is_refused(tmp_path):
    first = BrokerProcess(tmp_path).start()
    try:
        second = BrokerProcess(tmp_path)
        result = subprocess.run(second.args, cwd=REPO, env=second.env,
                                capture_output=True, text=True, timeout=20)
        assert result.returncode == 1
        assert "broker.start_failed" in result.stdout + result.stderr
    finally:
        first.terminate()


def test_node_id_mismatch_is_refused(tmp_path):
    node = BrokerProcess(tmp_path).start()
    node.terminate()
    other = BrokerProcess(tmp_path, "--override", "node.id=5")
    result = subprocess.run(other.args, cwd=REPO, env=other.env, capture_output=True, text=True,
                            timeout=20)
    assert result.returncode == 1
    assert "doesn't match" in result.stdout + result.stderr


def _run_cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "kcoord.broker.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=30)


def test_bad_command_lines_exit_2_with_one_clear_line(tmp_path):
    cases = [
        (("serve", "--config", str(tmp_path / "missing.properties")), "cannot read --config"),
        (("serve", "--override", "novalue"), "expects KEY=VALUE"),
        (("serve", "--override", "num.partitions=0"), "must be at least 1"),
        (("serve", "--override", "listeners=SSL://127.0.0.1:9093"),
             "a TLS listener needs a key and a certificate"),
            (("serve", "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:9093"),
             "sasl.enabled.mechanisms=GSSAPI names no mechanism kcoord serves"),
        (("serve", "--log-level", "loud"), "invalid choice"),
        (("serve", "--port", "70000"), "port 70000 is outside 0-65535"),
        (("serve", "--port", "-1"), "port -1 is outside 0-65535"),
        (("serve", "--override", "listeners=PLAINTEXT://h:x"), "expected [NAME://]host:port"),
        (("serve", "--advertised-port", "65536"), "port 65536 is outside 0-65535"),
        (("serve", "--override", "listeners=PLAINTEXT://127.0.0.1:99999"),
         "port 99999 is outside 0-65535"),
        # serve's own usage, listing its flags, not only the top level's
        (("serve", "--foo"), "usage: kcoord serve"),
    ]
    for args, message in cases:
        result = _run_cli(*args, "--data-dir", str(tmp_path / "d"))
        assert result.returncode == 2, args
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "d").exists()
    # an empty data dir would be the current directory: refused, nothing written there
    for empty in (("--data-dir", ""), ("--override", "log.dirs=")):
        result = _run_cli("serve", "--port", "0", *empty, cwd=tmp_path)
        assert result.returncode == 2, (empty, result.stderr)
        assert "log.dirs (the data dir, --data-dir) is empty" in result.stderr
        assert list(tmp_path.iterdir()) == []
    assert _run_cli("--version").stdout.startswith("kcoord ")
    unknown = _run_cli("--foo")
    assert unknown.returncode == 2 and "unrecognized arguments: --foo" in unknown.stderr


def test_port_in_use_fails_without_touching_the_data_dir(tmp_path):
    first = BrokerProcess(tmp_path / "first").start()
    try:
        result = _run_cli("serve", "--port", str(first.port), "--data-dir", str(tmp_path / "second"))
        assert result.returncode == 1
        assert "address already in use" in result.stderr.lower()
        assert not (tmp_path / "second").exists()
    finally:
        first.terminate()


@pytest.mark.parametrize("damage", ["cluster.id=\\uZZZZ\n", "node.id=one\n"])
def test_a_damaged_meta_properties_is_named_and_kept(tmp_path, damage):
    """A malformed escape or node id in meta.properties: one error line naming the
    file, exit status 1, no traceback, and the file left as it was."""
    (tmp_path / "meta.properties").write_text(damage)
    result = _run_cli("serve", "--port", "0", "--data-dir", str(tmp_path))
    assert result.returncode == 1
    assert f"{tmp_path / 'meta.properties'} cannot be read" in result.stderr
    assert "Traceback" not in result.stderr
    assert (tmp_path / "meta.properties").read_text() == damage


def test_a_data_dir_that_is_a_file_is_said_to_be_one(tmp_path):
    afile = tmp_path / "data"
    afile.write_text("not a directory")
    result = _run_cli("serve", "--port", "0", "--data-dir", str(afile))
    assert result.returncode == 1
    assert f"the data dir {afile} is a file, not a directory" in result.stderr
    assert "Traceback" not in result.stderr
    assert afile.read_text() == "not a directory"


def test_an_advertised_port_other_than_the_one_listened_on_is_warned_about(tmp_path):
    node = BrokerProcess(tmp_path, "--advertised-port", "19999").start()
    try:
        warned = [e for e in node.events if e.get("event") == "broker.advertised_port_differs"]
        assert len(warned) == 1
        assert warned[0]["port"] == node.port and warned[0]["advertised"] == "127.0.0.1:19999"
    finally:
        node.terminate()
    same = BrokerProcess(tmp_path / "same").start()
    try:
        assert "broker.advertised_port_differs" not in same.event_names()
    finally:
        same.terminate()
    # a server.properties advertising its own port, and --port moving the listener
    # elsewhere: clients would dial the file's port, and the log says so
    config = tmp_path / "server.properties"
    config.write_text("listeners=PLAINTEXT://127.0.0.1:19092\n"
                      "advertised.listeners=PLAINTEXT://127.0.0.1:19092\n")
    moved = BrokerProcess(tmp_path / "moved", "--config", str(config)).start()  # --port 0
    try:
        warned = [e for e in moved.events if e.get("event") == "broker.advertised_port_differs"]
        assert len(warned) == 1
        assert warned[0]["port"] == moved.port and warned[0]["advertised"] == "127.0.0.1:19092"
    finally:
        moved.terminate()


def test_a_data_dir_deleted_under_the_broker_stops_it_with_one_critical_line(tmp_path):
    import shutil

    from kcoord.protocol.client import WireClient

    data = tmp_path / "data"
    node = BrokerProcess(data).start()
    try:
        with WireClient("127.0.0.1", node.port) as client:
            created = client.call(19, 5, {"topics": [{"name": "t", "num_partitions": 1,
                                                      "replication_factor": 1, "assignments": [],
                                                      "configs": []}], "timeout_ms": 5000})
            assert created["topics"][0]["error_code"] == 0
        shutil.rmtree(data)
        rc = node.proc.wait(15)  # noticed within a second or two, not at the next restart
    finally:
        node.kill()
    node._reader.join(5)
    assert rc == 1
    failed = [e for e in node.events if e.get("event") == "broker.log_dir_failed"]
    assert len(failed) == 1 and "was deleted or replaced" in failed[0]["reason"]
    assert failed[0]["level"] == "critical"
    assert not any("Traceback" in str(e) for e in node.events)
    assert not data.exists()  # nothing wrote a new, empty data dir in its place


def test_the_start_logs_every_value_that_is_not_a_default_once(tmp_path):
    node = BrokerProcess(tmp_path, "--override", "num.partitions=3").start()
    node.terminate()
    configs = [e for e in node.events if e.get("event") == "broker.config"]
    assert len(configs) == 1
    shown = configs[0]["not_default"]
    assert shown["num.partitions"] == "3 (default 1; set)"
    assert shown["group.initial.rebalance.delay.ms"] == "0 (default 3000; development default)"
    assert "offsets.topic.num.partitions" not in shown  # a default is not listed
    # where kcoord listens and keeps its data differs from Kafka's defaults too
    assert shown["log.dirs"] == f"{tmp_path} (default /tmp/kafka-logs; set)"
    assert shown["listeners"].endswith("(default PLAINTEXT://:9092; set)")
    effective = configs[0]["effective"]
    assert effective["num.partitions"] == "3"
    assert effective["offsets.topic.num.partitions"] == "50"
    assert set(shown) <= set(effective)
    kafka = BrokerProcess(tmp_path / "k", "--kafka-defaults").start()
    kafka.terminate()
    shown = next(e for e in kafka.events if e.get("event") == "broker.config")["not_default"]
    assert not any("development default" in v for v in shown.values())


def test_at_debug_level_connections_and_requests_are_traced_and_no_field_is_empty(tmp_path):
    from kafka import KafkaConsumer

    from kcoord.protocol.client import WireClient

    node = BrokerProcess(tmp_path, "--log-level", "debug").start()
    try:
        with WireClient("127.0.0.1", node.port, client_id="tracer") as client:
            client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        # A consumer group: JoinGroup before v8 gives no reason, which the log leaves out.
        consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id="g",
                                 api_version=(2, 3), consumer_timeout_ms=500)
        consumer.subscribe(["t"])
        for _ in range(20):
            consumer.poll(timeout_ms=100)
            if consumer.assignment():
                break
        consumer.close()
    finally:
        node.terminate()
    traced = [e for e in node.events if e.get("event") == "request"
              and e.get("client_id") == "tracer"]
    assert [(e["api"], e["version"]) for e in traced] == [("ApiVersions", 3)]
    opened = [e for e in node.events if e.get("event") == "connection.opened"]
    closed = [e for e in node.events if e.get("event") == "connection.closed"]
    assert traced[0]["peer"] in {e["peer"] for e in opened} & {e["peer"] for e in closed}
    assert any(e.get("event") == "group.member_joined" for e in node.events)
    empty = [(e["event"], k) for e in node.events for k, v in e.items() if v in (None, "")]
    assert empty == []
    # a listener on every interface (an empty host, as Kafka's image sets it) is
    # named, not left empty
    every = BrokerProcess(tmp_path / "every", "--host", "").start()
    every.terminate()
    started = next(e for e in every.events if e.get("event") == "broker.started")
    assert started["host"] == "0.0.0.0"
    empty = [(e["event"], k) for e in every.events for k, v in e.items() if v in (None, "")]
    assert empty == []


def test_serve_help_gives_examples_port_0_and_the_development_defaults():
    from kcoord.broker.config import DEV_DEFAULTS

    result = _run_cli("serve", "--help")
    assert result.returncode == 0
    text = result.stdout
    assert "examples:" in text and "kcoord serve --port 0" in text and "--kafka-defaults" in text
    for name, (dev, kafka) in DEV_DEFAULTS.items():
        row = next(line for line in text.splitlines() if line.strip().startswith(name + " "))
        assert row.split()[1:] == [str(dev), "(Kafka:", f"{kafka})"], row
    assert "kcoord serve" in _run_cli("--help").stdout
