"""Real clients with the security settings of a production Kafka, unchanged:
confluent-kafka (librdkafka), kafka-python and aiokafka over SASL_SSL with
SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN and SSL with a client certificate,
each producing, consuming in a group and committing; and the errors they
report for a wrong password, a mechanism the broker does not enable and a TLS
port spoken to in plain text."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from kcoord.broker.testing import Kcoord
from tests.support import Secured


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    setup = Secured(tmp_path_factory.mktemp("clients-data"),
                    tmp_path_factory.mktemp("clients-certs")).start()
    yield setup
    setup.stop()


def _librdkafka(secured, kind: str) -> dict:
    if kind == "SASL_SSL+SCRAM-SHA-512":
        return {"bootstrap.servers": secured.bootstrap("SASL_SSL"), "security.protocol":
                "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                "sasl.password": "alice-secret", "ssl.ca.location": secured.ca}
    if kind == "SASL_PLAINTEXT+PLAIN":
        return {"bootstrap.servers": secured.bootstrap("SASL_PLAINTEXT"), "security.protocol":
                "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                "sasl.password": "alice-secret"}
    return {"bootstrap.servers": secured.bootstrap("SSL"), "security.protocol": "SSL",
            "ssl.ca.location": secured.ca,
            "ssl.certificate.location": str(secured.certs / "client.crt"),
            "ssl.key.location": str(secured.certs / "client.key")}


KINDS = ["SASL_SSL+SCRAM-SHA-512", "SASL_PLAINTEXT+PLAIN", "SSL+client-certificate"]
PRINCIPALS = {"SASL_SSL+SCRAM-SHA-512": "User:alice", "SASL_PLAINTEXT+PLAIN": "User:alice",
              "SSL+client-certificate": "User:CN=client"}
LISTENERS = {"SASL_SSL+SCRAM-SHA-512": "SASL_SSL", "SASL_PLAINTEXT+PLAIN": "SASL_PLAINTEXT",
             "SSL+client-certificate": "SSL"}


def _committed(secured, group: str, topic: str) -> int | None:
    return Kcoord(secured.bootstrap("PLAINTEXT")).committed(group).get((topic, 0))


def _principals(secured, listener: str) -> set[str]:
    return {c.principal for c in secured.node.broker.connections if c.listener == listener}


@pytest.mark.parametrize("kind", KINDS)
def test_confluent_kafka_produces_consumes_and_commits(secured, kind):
    conf = _librdkafka(secured, kind)
    topic, group = f"ck-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    for i in range(5):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    assert got == [f"m{i}".encode() for i in range(5)]
    assert PRINCIPALS[kind] in _principals(secured, LISTENERS[kind])
    consumer.commit(asynchronous=False)
    consumer.close()
    assert _committed(secured, group, topic) == 5


def _kafka_python(secured, kind: str) -> dict:
    if kind == "SASL_SSL+SCRAM-SHA-512":
        return {"bootstrap_servers": secured.bootstrap("SASL_SSL"),
                "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret",
                "ssl_cafile": secured.ca}
    if kind == "SASL_PLAINTEXT+PLAIN":
        return {"bootstrap_servers": secured.bootstrap("SASL_PLAINTEXT"),
                "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    return {"bootstrap_servers": secured.bootstrap("SSL"), "security_protocol": "SSL",
            "ssl_cafile": secured.ca, "ssl_certfile": str(secured.certs / "client.crt"),
            "ssl_keyfile": str(secured.certs / "client.key")}


@pytest.mark.parametrize("kind", KINDS)
def test_kafka_python_produces_consumes_and_commits(secured, kind):
    from kafka import KafkaConsumer, KafkaProducer

    conf = _kafka_python(secured, kind)
    topic, group = f"kp-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**conf)
    for i in range(5):
        producer.send(topic, f"m{i}".encode())
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20000, **conf)
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == 5:
            break
    assert got == [f"m{i}".encode() for i in range(5)]
    consumer.commit()
    consumer.close()
    assert _committed(secured, group, topic) == 5


def _aiokafka(secured, kind: str) -> dict:
    from aiokafka.helpers import create_ssl_context

    if kind == "SASL_SSL+SCRAM-SHA-512":
        return {"bootstrap_servers": secured.bootstrap("SASL_SSL"),
                "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret",
                "ssl_context": create_ssl_context(cafile=secured.ca)}
    if kind == "SASL_PLAINTEXT+PLAIN":
        return {"bootstrap_servers": secured.bootstrap("SASL_PLAINTEXT"),
                "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    return {"bootstrap_servers": secured.bootstrap("SSL"), "security_protocol": "SSL",
            "ssl_context": create_ssl_context(cafile=secured.ca,
                                              certfile=str(secured.certs / "client.crt"),
                                              keyfile=str(secured.certs / "client.key"))}


@pytest.mark.parametrize("kind", KINDS)
async def test_aiokafka_produces_consumes_and_commits(secured, kind):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    conf = _aiokafka(secured, kind)
    topic, group = f"ak-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = AIOKafkaProducer(**conf)
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, f"m{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, **conf)
    await consumer.start()
    try:
        got = []
        async with asyncio.timeout(30):
            async for message in consumer:
                got.append(message.value)
                if len(got) == 5:
                    break
        assert got == [f"m{i}".encode() for i in range(5)]
        await consumer.commit()
    finally:
        await consumer.stop()
    assert _committed(secured, group, topic) == 5


def _librdkafka_error(conf: dict, wait: float = 10) -> KafkaError:
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + wait
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) \
            and time.monotonic() < deadline:
        producer.poll(0.1)
    return next((e for e in errors if e.code() == KafkaError._AUTHENTICATION), None)


def test_clients_report_a_wrong_password_as_kafka_words_it(secured):
    conf = {**_librdkafka(secured, "SASL_SSL+SCRAM-SHA-512"), "sasl.password": "wrong"}
    error = _librdkafka_error(conf)
    assert error is not None
    assert ("Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512") in error.str()
    plain = {**_librdkafka(secured, "SASL_PLAINTEXT+PLAIN"), "sasl.password": "wrong"}
    assert "Invalid username or password" in _librdkafka_error(plain).str()



async def test_aiokafka_reports_a_wrong_password_as_kafka_words_it(secured, caplog):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    conf = {**_aiokafka(secured, "SASL_PLAINTEXT+PLAIN"), "sasl_plain_password": "wrong"}
    producer = AIOKafkaProducer(**conf)
    with pytest.raises(KafkaConnectionError):
        await producer.start()
    await producer.stop()
    assert ("SaslAuthenticationFailed: Authentication failed: Invalid username or password"
            in caplog.text)


def test_a_mechanism_the_broker_does_not_enable_is_refused(tmp_path):
    setup = Secured(tmp_path / "data", tmp_path / "certs",
                    extra={"listener.name.sasl_plaintext.sasl.enabled.mechanisms":
                           "SCRAM-SHA-256"}).start()
    try:
        conf = _librdkafka(setup, "SASL_PLAINTEXT+PLAIN")
        error = _librdkafka_error(conf)
        assert error is not None
        assert "PLAIN" in error.str() and "SCRAM-SHA-256" in error.str()
    finally:
        setup.stop()


def test_a_plain_client_on_a_tls_port_never_connects(secured):
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": secured.bootstrap("SASL_SSL"),
                         "error_cb": errors.append, "socket.timeout.ms": 2000})
    producer.produce("never", b"x")
    assert producer.flush(3) == 1  # nothing delivered
    assert errors and all(e.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
                          for e in errors)


def test_confluent_kafka_logs_in_with_an_unsecured_oauthbearer_token(tmp_path):
    setup = Secured(tmp_path / "data", tmp_path / "certs",
                    extra={"sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER"}).start()
    try:
        conf = {"bootstrap.servers": setup.bootstrap("SASL_SSL"), "security.protocol":
                "SASL_SSL", "ssl.ca.location": setup.ca, "sasl.mechanism": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": "principal=dora lifeSeconds=3600"}
        producer = Producer(conf)
        producer.produce("with-a-token", b"hello")
        assert producer.flush(20) == 0
        assert "User:dora" in _principals(setup, "SASL_SSL")
    finally:
        setup.stop()


def test_librdkafka_re_authenticates_before_its_session_ends(tmp_path):
    """With connections.max.reauth.ms, librdkafka logs in again on its open
    connection before the session ends (KIP-368): a producer keeps producing
    past several session lengths and no connection is cut."""
    import logging

    from tests.support import captured_logs

    setup = Secured(tmp_path / "data", tmp_path / "certs",
                    extra={"connections.max.reauth.ms": "1500"})
    try:
        with captured_logs(logging.DEBUG) as logs:
            setup.start()
            producer = Producer(_librdkafka(setup, "SASL_SSL+SCRAM-SHA-512"))
            delivered = []
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                producer.produce("renewed", b"x", on_delivery=lambda e, m: delivered.append(e))
                producer.poll(0.1)
            assert producer.flush(10) == 0
        events = [e["event"] for e in logs]
        assert delivered and all(e is None for e in delivered)
        assert "connection.session_expired" not in events
        assert events.count("connection.reauthenticated") >= 2
    finally:
        setup.stop()
