"""Broker configuration: Kafka property names, development defaults, properties files."""

from __future__ import annotations

import pytest

from broker.config import DEV_DEFAULTS, BrokerConfig, parse_listener, read_properties


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
