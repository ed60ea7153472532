"""Broker configuration: Kafka property names, development defaults, properties files."""

from __future__ import annotations

import pytest

from kcoord.broker.config import DEV_DEFAULTS, BrokerConfig, parse_listener, read_properties


def test_development_defaults_and_kafka_defaults():
    dev = BrokerConfig.build({})
    kafka = BrokerConfig.build({}, kafka_defaults=True)
    for name, (dev_value, kafka_value) in DEV_DEFAULTS.items():
        assert dev[name] == dev_value
        assert kafka[name] == kafka_value
    assert dev["group.initial.rebalance.delay.ms"] == 0
    assert kafka["group.initial.rebalance.delay.ms"] == 3000
    # cannot work on one node, so never restored
    assert kafka["offsets.topic.replication.factor"] == 1


def test_replication_factor_above_one_is_forced_to_one():
    config = BrokerConfig.build({"offsets.topic.replication.factor": "3",
                                 "default.replication.factor": "3"})
    assert config["offsets.topic.replication.factor"] == 1
    assert config["default.replication.factor"] == 1


def test_invalid_value_is_an_error():
    with pytest.raises(ValueError, match="num.partitions"):
        BrokerConfig.build({"num.partitions": "many"})
    with pytest.raises(ValueError, match="kcoord.fsync.policy"):
        BrokerConfig.build({"kcoord.fsync.policy": "sometimes"})


def test_listeners_and_advertised_listeners():
    config = BrokerConfig.build({"listeners": "PLAINTEXT://0.0.0.0:9093"})
    assert config.listener == ("0.0.0.0", 9093)
    assert config.advertised == ("127.0.0.1", 9093)
    config = BrokerConfig.build({"listeners": "PLAINTEXT://0.0.0.0:9093",
                                 "advertised.listeners": "PLAINTEXT://kafka:29092"})
    assert config.advertised == ("kafka", 29092)
    assert parse_listener("[::1]:9092") == ("PLAINTEXT", "::1", 9092)
    with pytest.raises(ValueError):
        parse_listener("no-port")


def test_retention_and_roll_follow_kafka_precedence():
    assert BrokerConfig.build({}, kafka_defaults=True).retention_ms == 168 * 3_600_000
    assert BrokerConfig.build({"log.retention.minutes": "5"}).retention_ms == 300_000
    assert BrokerConfig.build({"log.retention.minutes": "5", "log.retention.ms": "7"}).retention_ms == 7
    assert BrokerConfig.build({}).topic_default("segment.ms") == 3_600_000
    assert BrokerConfig.build({"log.roll.ms": "1000"}).topic_default("segment.ms") == 1000


def test_node_id_and_legacy_broker_id():
    assert BrokerConfig.build({}).node_id == 1
    assert BrokerConfig.build({"broker.id": "4"}).node_id == 4
    assert BrokerConfig.build({"node.id": "2", "broker.id": "4"}).node_id == 2


def test_read_properties(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\n! also a comment\nnode.id = 3\nlog.dirs: /tmp/x\n"
                    "listeners=PLAINTEXT://a:1,\\\n  PLAINTEXT://b:2\nempty=\n")
    assert read_properties(path) == {
        "node.id": "3",
        "log.dirs": "/tmp/x",
        "listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2",
        "empty": "",
    }


# Every rule of Java's Properties.load that a server.properties can meet.
_JAVA_PROPERTIES = (
    "# a comment\n"
    "   ! another, after blanks\n"
    "\n"
    "plain=value\n"
    "spaced   =   value with  inner  blanks  \n"
    "colon:value\n"
    "blank-separated value\n"
    "both = : second separator kept\n"
    "escaped\\=key=v\n"
    "escaped\\:colon\\ and\\ blank=v\n"
    "backslash=a\\\\b\n"
    "tabs=a\\tb\\nc\\rd\\fe\n"
    "unicode=caf\\u00e9 \\u2603\n"
    "unknown-escape=\\q\\z\n"
    "continued=one,\\\n"
    "          two,\\\n"
    "\tthree\n"
    "even-backslashes=ends here\\\\\n"
    "not-continued=next\n"
    "#not-a-comment-inside=\\\n"
    "key-only\n"
    "empty=\n"
    "latin1=caf\xe9 \xa7\n"
    "\\\n"
    "\n"
    "after-a-lone-backslash=v\n"
    "\\\n"
    "#a-comment-after-a-lone-backslash=v\n"
    "crlf=a\r\n"
    "cr=b\rlast=\\\n"
)

_JAVA_DUMP = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class Dump {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) { props.load(in); }
        for (String key : new TreeSet<>(props.stringPropertyNames())) {
            System.out.println(hex(key) + " " + hex(props.getProperty(key)));
        }
    }
    static String hex(String s) {
        StringBuilder out = new StringBuilder("x");
        for (char c : s.toCharArray()) out.append(String.format("%04x", (int) c));
        return out.toString();
    }
}
"""


def test_properties_are_read_as_java_reads_them(tmp_path):
    import shutil
    import subprocess

    path = tmp_path / "server.properties"
    path.write_bytes(_JAVA_PROPERTIES.encode("iso-8859-1"))  # as Java reads a stream
    ours = read_properties(path)
    assert ours["latin1"] == "café §" and ours["after-a-lone-backslash"] == "v"
    assert "" not in ours and "#a-comment-after-a-lone-backslash" not in ours
    assert ours["escaped=key"] == "v" and ours["escaped:colon and blank"] == "v"
    assert ours["unicode"] == "café ☃" and ours["continued"] == "one,two,three"
    assert ours["backslash"] == "a\\b" and ours["even-backslashes"] == "ends here\\"
    java = shutil.which("java")
    assert java, "Java (the reference for .properties files) is not installed"
    (tmp_path / "Dump.java").write_text(_JAVA_DUMP)
    run = subprocess.run([java, str(tmp_path / "Dump.java"), str(path)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr

    def text(h):
        return "".join(chr(int(h[i:i + 4], 16)) for i in range(1, len(h), 4))

    theirs = dict(tuple(text(h) for h in line.split(" ")) for line in run.stdout.splitlines())
    assert ours == theirs


def test_a_malformed_unicode_escape_is_an_error_as_in_java(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("bad=\\u00zz\n")
    with pytest.raises(ValueError, match="malformed"):
        read_properties(path)


def test_kafka_variables_are_named_as_apache_kafka_s_image_names_them():
    from kcoord.broker.config import properties_from_env
    props = properties_from_env({
        "KAFKA_NUM_PARTITIONS": "3", "KAFKA_LOG_RETENTION_MS": "1000",
        "KAFKA_LISTENER_NAME_INTERNAL_SASL_ENABLED___MECHANISMS": "x",
        "KAFKA_CONFLUENT__SUPPORT": "y", "KAFKA_OPTS": "-Dsome=jvm", "KAFKA_HEAP_OPTS": "-Xmx1G",
        "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://broker:19092,HOST://localhost:9092",
        "OTHER": "z"})
    assert props == {
        "num.partitions": "3", "log.retention.ms": "1000",
        "listener.name.internal.sasl.enabled-mechanisms": "x", "confluent_support": "y",
        "advertised.listeners": "PLAINTEXT://broker:19092,HOST://localhost:9092",
        # without KAFKA_LISTENERS, the advertised ones on every address
        "listeners": "PLAINTEXT://0.0.0.0:19092,HOST://0.0.0.0:9092"}


def test_consumer_group_protocol_settings_are_checked_as_kafka_checks_them():
    from kcoord.broker.config import assignor_names
    config = BrokerConfig.build({"group.consumer.assignors": "range,uniform"}, warn=False)
    assert assignor_names(config["group.consumer.assignors"]) == ("range", "uniform")
    default = BrokerConfig.build({}, warn=False)
    assert assignor_names(default["group.consumer.assignors"]) == ("uniform", "range")
    # a list's value given twice is kept once (Kafka 4.4's ConfigDef, with a warning)
    twice = BrokerConfig.build({"group.consumer.assignors": "range,uniform,range"}, warn=False)
    assert assignor_names(twice["group.consumer.assignors"]) == ("range", "uniform")
    assert default["group.coordinator.rebalance.protocols"] == ["classic", "consumer"]
    assert default["group.consumer.migration.policy"] == "bidirectional"
    refused = [
        ({"group.coordinator.rebalance.protocols": "consumer"},
         "Disabling the 'classic' protocol is not supported."),
        ({"group.consumer.assignors": "uniform,sticky"}, "sticky is not a server assignor"),
        ({"group.consumer.migration.policy": "sideways"},
         "String must be one of (case insensitive): bidirectional, upgrade, downgrade, "
         "disabled"),
        ({"group.consumer.assignors":
          "uniform,org.apache.kafka.coordinator.group.assignor.UniformAssignor"},
         "Assignor name 'uniform' is already registered by another configured assignor."),
        ({"group.consumer.heartbeat.interval.ms": "100"},
         "group.consumer.heartbeat.interval.ms must be greater than or equal to "
         "group.consumer.min.heartbeat.interval.ms"),
        ({"group.consumer.heartbeat.interval.ms": "15000",
          "group.consumer.session.timeout.ms": "15000",
          "group.consumer.min.session.timeout.ms": "15000"},
         "group.consumer.heartbeat.interval.ms must be less than "
         "group.consumer.session.timeout.ms"),
        ({"group.consumer.session.timeout.ms": "90000"},
         "group.consumer.session.timeout.ms must be less than or equal to "
         "group.consumer.max.session.timeout.ms"),
    ]
    for properties, reason in refused:
        with pytest.raises(ValueError) as info:
            BrokerConfig.build(properties, warn=False)
        assert reason in str(info.value), properties


@pytest.mark.parametrize("kafka_defaults, delay, segment", [(False, "0", "67108864"),
                                                            (True, "3000", "1073741824")])
def test_development_defaults_are_described_as_defaults(kafka_defaults, delay, segment):
    """DescribeConfigs tells kcoord's development defaults as what they are,
    its defaults (DEFAULT_CONFIG), broker-wide and as a topic's synonym; with
    --kafka-defaults, Kafka's own defaults the same way."""
    from kcoord.broker.embedded import EmbeddedBroker
    from kcoord.protocol.client import WireClient
    from tests.broker.wire_ops import create_topic

    with EmbeddedBroker(kafka_defaults=kafka_defaults) as broker, \
            WireClient.to(broker.bootstrap) as wire:
        create_topic(wire, "t")
        answer = wire.call(32, 4, {"resources": [
            {"resource_type": 4, "resource_name": "1",
             "configuration_keys": ["group.initial.rebalance.delay.ms", "log.segment.bytes"]},
            {"resource_type": 2, "resource_name": "t", "configuration_keys": ["segment.bytes"]}],
            "include_synonyms": True, "include_documentation": False})
    described = [(c["name"], c["value"], c["config_source"],
                  [(s["name"], s["source"]) for s in c["synonyms"]])
                 for r in answer["results"] for c in r["configs"]]
    assert described == [
        ("group.initial.rebalance.delay.ms", delay, 5, [("group.initial.rebalance.delay.ms", 5)]),
        ("log.segment.bytes", segment, 5, [("log.segment.bytes", 5)]),
        ("segment.bytes", segment, 5, [("log.segment.bytes", 5)])]
