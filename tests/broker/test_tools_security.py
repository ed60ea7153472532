"""``kcoord groups`` and ``kcoord topics`` against secured listeners with a Java
client's ``--command-config``, as Kafka's tools take it: the development
certificates' ``client-sasl-ssl.properties`` (SCRAM-SHA-512 over TLS) and
``client-ssl.properties`` (a client certificate) work unchanged."""

from __future__ import annotations

import io

import pytest

from kcoord.broker.tools import groups, topics
from tests.support import Secured


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    setup = Secured(tmp_path_factory.mktemp("tools-data"), tmp_path_factory.mktemp("tools-certs"),
                    extra={"connection.failed.authentication.delay.ms": "0"}).start()
    # the user client-sasl-ssl.properties logs in as
    setup.node.call(setup.node.broker.scram_credentials.set_password, "kcoord",
                    "SCRAM-SHA-512", "kcoord-secret")
    yield setup
    setup.stop()


def _run(tool, *argv) -> tuple[int, str, str]:
    from kcoord.broker.cli import _parser
    args = _parser().parse_args([tool.__name__.rsplit(".", 1)[1], *argv])
    out, err = io.StringIO(), io.StringIO()
    code = tool.run(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("listener, properties", [("SASL_SSL", "client-sasl-ssl.properties"),
                                                  ("SSL", "client-ssl.properties")])
def test_tools_use_a_java_client_config(secured, listener, properties):
    config = str(secured.certs / properties)
    server = ("--bootstrap-server", secured.bootstrap(listener), "--command-config", config)
    code, out, err = _run(topics, *server, "--create", "--topic", f"via-{listener.lower()}",
                          "--partitions", "2")
    assert code == 0, out + err
    code, out, err = _run(topics, *server, "--list")
    assert f"via-{listener.lower()}" in out.split()
    code, out, err = _run(groups, *server, "--list")
    assert code == 0, out + err


def test_a_wrong_password_or_a_plain_config_is_refused_in_one_line(secured, tmp_path):
    wrong = tmp_path / "wrong.properties"
    wrong.write_text((secured.certs / "client-sasl-ssl.properties").read_text().replace(
        'password="kcoord-secret"', 'password="nope"'))
    code, out, err = _run(topics, "--bootstrap-server", secured.bootstrap("SASL_SSL"),
                          "--command-config", str(wrong), "--list")
    assert code == 1
    assert ("Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512") in out + err
    code, out, err = _run(groups, "--bootstrap-server", secured.bootstrap("SASL_PLAINTEXT"),
                          "--command-config", str(wrong), "--list")
    # Kafka's consumer-groups tool reports every failure through its catch-all,
    # with exit status 0; kafka-topics ends with 1.
    assert code == 0 and "Executing consumer group command failed due to" in out + err
