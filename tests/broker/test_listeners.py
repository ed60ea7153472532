"""Several listeners, as a container setup has them (one for the host, one for the
other containers): each answers Metadata, FindCoordinator and DescribeCluster
with its own advertised address, as Kafka does; the listener settings are
checked as Kafka checks them."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer

from kcoord.broker.config import BrokerConfig
from kcoord.protocol.client import WireClient

TWO = {"listeners": "PLAINTEXT://127.0.0.1:0,HOST://127.0.0.1:0",
       "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT",
       "advertised.listeners": "PLAINTEXT://kcoord.internal:9092,HOST://localhost:0"}


def _ports(node) -> dict[str, int]:
    return {spec.name: server.sockets[0].getsockname()[1]
            for spec, server in zip(node.broker.config.listeners, node.broker._servers)}


def _addresses(port: int) -> dict[str, tuple[str, int]]:
    with WireClient("127.0.0.1", port) as client:
        metadata = client.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
        found = client.call(10, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        cluster = client.call(60, 0, {"include_cluster_authorized_operations": False})
    coordinator = found["coordinators"][0]
    return {"metadata": (metadata["brokers"][0]["host"], metadata["brokers"][0]["port"]),
            "coordinator": (coordinator["host"], coordinator["port"]),
            "cluster": (cluster["brokers"][0]["host"], cluster["brokers"][0]["port"])}


def test_each_listener_answers_with_its_own_advertised_address(make_broker):
    node = make_broker(overrides=TWO)
    ports = _ports(node)
    assert ports["PLAINTEXT"] != ports["HOST"]
    internal = _addresses(ports["PLAINTEXT"])
    assert set(internal.values()) == {("kcoord.internal", 9092)}
    host = _addresses(ports["HOST"])
    assert set(host.values()) == {("localhost", ports["HOST"])}  # port 0: the port bound


def test_a_client_bootstrapping_on_the_second_listener_produces_and_consumes(make_broker):
    node = make_broker(overrides={**TWO, "advertised.listeners":
                                  "PLAINTEXT://unreachable.invalid:1,HOST://127.0.0.1:0"})
    bootstrap = f"127.0.0.1:{_ports(node)['HOST']}"
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("through-host", b"hello")
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["through-host"])
    got = None
    for _ in range(100):
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got = message.value()
            break
    consumer.close()
    assert got == b"hello"


@pytest.mark.parametrize("props, message", [
    ({"listeners": "PLAINTEXT://127.0.0.1:0,HOST://127.0.0.1:0"},
     "listener HOST has no security protocol"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.1:9092",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"},
     "each listener must have a different port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,plaintext://127.0.0.1:9093"},
     "each listener must have a different name"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "HOST://h:1",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT"},
     "advertised.listeners: ['HOST'] are not among the listeners"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SECURE://127.0.0.1:9093",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:TLS"},
     "listener SECURE has an unknown security protocol TLS"),
    ({"listener.security.protocol.map": "PLAINTEXT"}, "is not NAME:PROTOCOL"),
])
def test_listener_settings_are_checked_as_kafka_checks_them(props, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        BrokerConfig.build(props)


def test_listener_names_are_case_insensitive_and_the_flags_set_the_first():
    config = BrokerConfig.build({"listeners": "plaintext://127.0.0.1:1,Host://127.0.0.1:2",
                                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                                                                   "HOST:PLAINTEXT"})
    assert [s.name for s in config.listeners] == ["PLAINTEXT", "HOST"]
    assert config.advertised_for("HOST") == ("127.0.0.1", 2)
    from kcoord.broker.cli import _parser, build_config
    args = _parser().parse_args(["serve", "--config", "/dev/null", "--port", "7",
                                 "--advertised-host", "outside", "--override",
                                 "listeners=PLAINTEXT://127.0.0.1:1,HOST://127.0.0.1:2",
                                 "--override", "listener.security.protocol.map="
                                               "PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT"])
    built = build_config(args)
    assert [(s.name, s.port) for s in built.listeners] == [("PLAINTEXT", 7), ("HOST", 2)]
    assert built.advertised_for("PLAINTEXT") == ("outside", 0)
    assert built.advertised_for("HOST") == ("127.0.0.1", 2)
