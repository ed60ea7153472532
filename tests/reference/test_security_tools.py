"""Apache Kafka's own command-line tools against kcoord's secured listeners, with
client property files as a user writes them: kafka-console-producer and
kafka-console-consumer over SASL_SSL with SCRAM-SHA-512 and over SSL with a
client certificate in a PEM keystore (the files ``devcerts`` writes, unchanged),
kafka-configs adding, describing and deleting a user's SCRAM credential, and
what the tools print for a wrong password.

The broker is ``tests.support.Secured`` (its SSL listener requires a client
certificate); each tool is run the way its script runs it and what it prints
is checked as a user reads it.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import pytest

from kcoord.protocol.client import WireClient
from tests.reference import kafka
from tests.support import SASL_USERS, Secured

PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
DEV_USER, DEV_PASSWORD = "kcoord", "kcoord-secret"  # of client-sasl-ssl.properties


@pytest.fixture(scope="module")
def tools(_reference_pool):
    """The Kafka jars, resolved (and skipped or failed like the reference brokers)."""
    _reference_pool.get(kafka.MAIN_VERSION)
    return kafka


@pytest.fixture(scope="module")
def secured(tools, tmp_path_factory):
    """kcoord with PLAINTEXT, SASL_PLAINTEXT, SSL and SASL_SSL listeners; the user
    of the development client files given a SCRAM-SHA-512 credential as
    ``kafka-configs`` gives one (AlterUserScramCredentials)."""
    setup = Secured(tmp_path_factory.mktemp("tools-data"),
                    tmp_path_factory.mktemp("tools-certs")).start()
    try:
        salt = os.urandom(16)
        with WireClient.to(setup.bootstrap("PLAINTEXT")) as client:
            answer = client.call(51, 0, {"deletions": [], "upsertions": [{
                "name": DEV_USER, "mechanism": 2, "iterations": 4096, "salt": salt,
                "salted_password": hashlib.pbkdf2_hmac("sha512", DEV_PASSWORD.encode(), salt,
                                                       4096)}]})
        assert answer["results"][0]["error_code"] == 0, answer
        yield setup
    finally:
        setup.stop()


def _properties(folder: Path, name: str, **settings: str) -> str:
    """A client properties file (``--command-config``), as a user writes one."""
    path = folder / f"{name}.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return str(path)


def _sasl(folder: Path, name: str, secured: Secured, protocol: str, mechanism: str,
          user: str, password: str) -> str:
    module = PLAIN_LOGIN if mechanism == "PLAIN" else SCRAM_LOGIN
    settings = {"security.protocol": protocol, "sasl.mechanism": mechanism,
                "sasl.jaas.config": f'{module} required username="{user}" '
                                    f'password="{password}";'}
    if protocol == "SASL_SSL":
        settings.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": secured.ca})
    return _properties(folder, name, **settings)


def _ok(done) -> str:
    assert done.returncode == 0, f"exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _produce(bootstrap: str, config: str, topic: str, lines: list[str],
             config_option: str = "--command-config"):
    return kafka.run_tool(PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
                          config_option, config, "--reader-property", "parse.key=true",
                          "--reader-property", "key.separator=:",
                          stdin="".join(f"{line}\n" for line in lines))


def _consume(bootstrap: str, config: str, topic: str, count: int,
             config_option: str = "--command-config") -> list[str]:
    out = _ok(kafka.run_tool(CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic,
                             config_option, config, "--from-beginning", "--max-messages",
                             str(count), "--formatter-property", "print.key=true",
                             "--timeout-ms", "30000"))
    return [line for line in out.splitlines() if "\t" in line]


def _no_errors(done) -> None:
    """A producer run that wrote everything: exit 0 and no ERROR logged."""
    _ok(done)
    assert " ERROR " not in done.stderr, done.stderr


def test_console_tools_over_sasl_ssl_with_scram_sha_512(secured):
    """client-sasl-ssl.properties as ``kcoord serve --dev-tls`` writes it: TLS
    with the development CA, SCRAM-SHA-512 as the development user."""
    config = str(secured.certs / "client-sasl-ssl.properties")
    topic = f"scram-{uuid.uuid4().hex[:8]}"
    bootstrap = secured.bootstrap("SASL_SSL")
    _no_errors(_produce(bootstrap, config, topic, ["apple:1", "banana:2", "cherry:3"]))
    assert _consume(bootstrap, config, topic, 3) == ["apple\t1", "banana\t2", "cherry\t3"]


@pytest.mark.parametrize("config_option", ["--command-config", "--producer.config"])
def test_console_tools_over_ssl_with_a_pem_client_certificate(secured, config_option):
    """client-ssl.properties: ``ssl.keystore.type=PEM`` with client.pem (an EC
    P-256 PKCS#8 key and its certificate) as ``ssl.keystore.location``, on a
    listener that requires a client certificate.  The deprecated
    ``--producer.config`` / ``--consumer.config`` of older scripts too."""
    config = str(secured.certs / "client-ssl.properties")
    topic = f"ssl-{uuid.uuid4().hex[:8]}"
    bootstrap = secured.bootstrap("SSL")
    consumer_option = config_option.replace("producer", "consumer")
    _no_errors(_produce(bootstrap, config, topic, ["k1:v1", "k2:v2"], config_option))
    assert _consume(bootstrap, config, topic, 2, consumer_option) == ["k1\tv1", "k2\tv2"]


def _configs(secured: Secured, admin: str, *args: str):
    return kafka.run_tool(CONFIGS, "--bootstrap-server", secured.bootstrap("SASL_SSL"),
                          "--command-config", admin, "--entity-type", "users", *args)


def _admin(secured: Secured, folder: Path) -> str:
    return _sasl(folder, "admin", secured, "SASL_SSL", "SCRAM-SHA-512", "admin",
                 SASL_USERS["admin"])


SCRAM_FAILED = ("Authentication failed during authentication due to invalid credentials with "
                "SASL mechanism {}")


def test_kafka_configs_adds_a_scram_user_who_logs_in_until_it_is_deleted(secured, tmp_path):
    admin = _admin(secured, tmp_path)
    added = _ok(_configs(secured, admin, "--alter", "--add-config",
                         "SCRAM-SHA-256=[iterations=8192,password=x]", "--entity-name", "bob"))
    assert added == "Completed updating config for user bob.\n"
    bob = _sasl(tmp_path, "bob", secured, "SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "x")
    topic = f"bobs-{uuid.uuid4().hex[:8]}"
    bootstrap = secured.bootstrap("SASL_PLAINTEXT")
    _no_errors(_produce(bootstrap, bob, topic, ["from:bob"]))
    assert _consume(bootstrap, bob, topic, 1) == ["from\tbob"]
    deleted = _ok(_configs(secured, admin, "--alter", "--delete-config", "SCRAM-SHA-256",
                           "--entity-name", "bob"))
    assert deleted == "Completed updating config for user bob.\n"
    refused = _produce(bootstrap, bob, topic, ["again:bob"])
    assert f"failed authentication due to: {SCRAM_FAILED.format('SCRAM-SHA-256')}" \
        in refused.stderr
    # deleting it again: Kafka's tool fails with the broker's reason
    again = _configs(secured, admin, "--alter", "--delete-config", "SCRAM-SHA-256",
                     "--entity-name", "bob")
    assert again.returncode == 1
    assert ("ResourceNotFoundException: Attempt to delete a user credential that does not "
            "exist") in again.stderr


def test_kafka_configs_describes_a_scram_user(secured, tmp_path):
    """``--describe`` of users, as Kafka 4.4's tool prints it against Kafka 4.4
    (it asks DescribeClientQuotas, then DescribeUserScramCredentials)."""
    admin = _admin(secured, tmp_path)
    _ok(_configs(secured, admin, "--alter", "--add-config",
                 "SCRAM-SHA-256=[iterations=8192,password=x]", "--entity-name", "carol"))
    described = _ok(_configs(secured, admin, "--describe", "--entity-name", "carol"))
    assert described == ("SCRAM credential configs for user-principal 'carol' are "
                         "SCRAM-SHA-256=iterations=8192\n")
    _ok(_configs(secured, admin, "--alter", "--delete-config", "SCRAM-SHA-256",
                 "--entity-name", "carol"))
    assert _ok(_configs(secured, admin, "--describe", "--entity-name", "carol")) == ""


def test_kafka_configs_refuses_too_few_iterations(secured, tmp_path):
    refused = _configs(secured, _admin(secured, tmp_path), "--alter", "--add-config",
                       "SCRAM-SHA-256=[iterations=100,password=x]", "--entity-name", "dave")
    assert refused.returncode == 1
    assert "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256" \
        in refused.stdout + refused.stderr


@pytest.mark.parametrize("listener, mechanism, message", [
    ("SASL_SSL", "SCRAM-SHA-512", SCRAM_FAILED.format("SCRAM-SHA-512")),
    ("SASL_PLAINTEXT", "PLAIN", "Authentication failed: Invalid username or password"),
], ids=["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_is_reported_in_kafka_s_words(secured, tmp_path, listener, mechanism,
                                                       message):
    config = _sasl(tmp_path, "wrong", secured, listener, mechanism, "alice", "not-her-password")
    bootstrap = secured.bootstrap(listener)
    produced = _produce(bootstrap, config, "never-written", ["k:v"])
    assert f"failed authentication due to: {message}" in produced.stderr, produced.stderr
    assert f"SaslAuthenticationException: {message}" in produced.stderr
    consumed = kafka.run_tool(CONSUMER, "--bootstrap-server", bootstrap, "--topic",
                              "never-written", "--command-config", config, "--from-beginning",
                              "--timeout-ms", "10000")
    assert "Error processing message, terminating consumer process" in consumed.stderr
    assert f"SaslAuthenticationException: {message}" in consumed.stderr
    assert "Processed a total of 0 messages" in consumed.stderr
    described = kafka.run_tool(CONFIGS, "--bootstrap-server", bootstrap, "--command-config",
                               config, "--entity-type", "topics", "--describe")
    assert described.returncode == 1
    assert f"ExecutionException: org.apache.kafka.common.errors.SaslAuthenticationException: " \
           f"{message}" in described.stderr
