"""Kafka's ``kafka-acls`` against kcoord with an authorizer, as an operator runs
it (``--command-config`` with the super user's SASL login), and a console
producer and consumer logged in as the user those ACLs are for."""

from __future__ import annotations

import pytest

from tests.reference import kafka
from tests.support import Secured

ACLS = "org.apache.kafka.tools.AclCommand"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def tools(_reference_pool):
    _reference_pool.get(kafka.MAIN_VERSION)
    return kafka


@pytest.fixture
def secured(tmp_path):
    setup = Secured(tmp_path / "data", tmp_path / "certs",
                    extra={"authorizer.class.name": AUTHORIZER,
                           "super.users": "User:admin"}).start()
    yield setup
    setup.stop()


def _properties(path, user: str, password: str):
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";\n')
    return str(path)


def _run(main_class: str, *args: str, ok: bool = True, stdin: str | None = None):
    done = kafka.run_tool(main_class, *args, stdin=stdin)
    if ok:
        assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n" \
                                     f"{done.stderr}"
    return done


def test_kafka_acls_adds_lists_and_removes_acls_that_then_decide(tools, secured, tmp_path):
    admin = _properties(tmp_path / "admin.properties", "admin", "admin-secret")
    alice = _properties(tmp_path / "alice.properties", "alice", "alice-secret")
    server = ("--bootstrap-server", secured.bootstrap("SASL_PLAINTEXT"))
    _run(ACLS, *server, "--command-config", admin, "--add", "--allow-principal", "User:alice",
         "--producer", "--topic", "orders")
    _run(ACLS, *server, "--command-config", admin, "--add", "--allow-principal", "User:alice",
         "--consumer", "--topic", "orders", "--group", "billing")
    _run(ACLS, *server, "--command-config", admin, "--add", "--deny-principal", "User:alice",
         "--operation", "Read", "--topic", "secret", "--resource-pattern-type", "prefixed")
    listed = _run(ACLS, *server, "--command-config", admin, "--list", "--topic", "orders").stdout
    assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in listed
    for operation in ("WRITE", "DESCRIBE", "CREATE", "READ"):
        assert (f"(principal=User:alice, host=*, operation={operation}, "
                "permissionType=ALLOW)") in listed, listed
    everything = _run(ACLS, *server, "--command-config", admin, "--list").stdout
    assert "name=billing, patternType=LITERAL" in everything
    assert "name=secret, patternType=PREFIXED" in everything
    assert "permissionType=DENY" in everything

    # alice produces to orders and reads it back in group billing
    produced = _run("org.apache.kafka.tools.ConsoleProducer", *server, "--topic", "orders",
                    "--command-config", alice, stdin="one\ntwo\n")
    assert produced.returncode == 0
    consumed = _run("org.apache.kafka.tools.consumer.ConsoleConsumer", *server, "--topic",
                    "orders", "--group", "billing", "--from-beginning", "--max-messages", "2",
                    "--timeout-ms", "20000", "--command-config", alice)
    assert consumed.stdout.split() == ["one", "two"]
    # but not in another group
    refused = _run("org.apache.kafka.tools.consumer.ConsoleConsumer", *server, "--topic",
                   "orders", "--group", "other", "--from-beginning", "--max-messages", "1",
                   "--timeout-ms", "10000", "--command-config", alice, ok=False)
    assert "GroupAuthorizationException" in refused.stdout + refused.stderr

    # alice may not change ACLs
    denied = _run(ACLS, *server, "--command-config", alice, "--add", "--allow-principal",
                  "User:alice", "--operation", "All", "--topic", "*", ok=False)
    assert "ClusterAuthorizationException" in denied.stdout + denied.stderr

    _run(ACLS, *server, "--command-config", admin, "--remove", "--force", "--topic", "orders")
    listed = _run(ACLS, *server, "--command-config", admin, "--list", "--topic", "orders").stdout
    assert "principal=User:alice" not in listed
    after = _run("org.apache.kafka.tools.ConsoleProducer", *server, "--topic", "orders",
                 "--command-config", alice, "--producer-property", "max.block.ms=5000",
                 stdin="three\n", ok=False)
    assert "TopicAuthorizationException" in after.stdout + after.stderr or \
        "Not authorized to access topics" in after.stdout + after.stderr
