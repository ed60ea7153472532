"""The security layer's parts on their own: SCRAM against RFC 7677's example,
JAAS values as Kafka reads them, certificate principals and their mapping
rules, key and trust stores in each form, and the listener settings refused
at start with a line that says what to fix."""

from __future__ import annotations

import base64
import ssl

import pytest

from kcoord.broker.config import BrokerConfig
from kcoord.broker.security import devcerts
from kcoord.broker.security.jaas import JaasError, parse, plain_users
from kcoord.broker.security.listeners import SecurityConfigError, build
from kcoord.broker.security.scram import (
    MECHANISMS,
    Credential,
    SaslError,
    ScramServer,
    make_credential,
)
from kcoord.broker.security.tls import PrincipalMapper, TlsConfigError


def test_scram_sha_256_exchange_of_rfc_7677():
    """RFC 7677 section 3: user "user", password "pencil"."""
    mechanism = MECHANISMS["SCRAM-SHA-256"]
    credential = make_credential(mechanism, "pencil", 4096,
                                 base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    server = ScramServer(mechanism, {"user": credential}.get,
                         server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


def test_scram_refuses_a_wrong_proof_a_wrong_nonce_and_malformed_messages():
    mechanism = MECHANISMS["SCRAM-SHA-256"]
    credential = make_credential(mechanism, "pencil", 4096, b"salt")
    lookup = {"user": credential, "u,=x": credential}.get
    cases = [
        (b"c=biws,r=rOprNGfwEbeRWgbNEkqONONCE,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
         "Invalid client credentials"),
        (b"c=biws,r=otherNONCE,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
         "Invalid client nonce in the final client message."),
        (b"c=biws,r=rOprNGfwEbeRWgbNEkqONONCE", "Invalid SCRAM client final message format"),
    ]
    for final, message in cases:
        server = ScramServer(mechanism, lookup, server_nonce="NONCE")
        server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
        with pytest.raises(SaslError, match=message):
            server.evaluate(final)
        assert not server.complete
    with pytest.raises(SaslError, match="Invalid SCRAM client first message format"):
        ScramServer(mechanism, lookup).evaluate(b"p=tls-unique,,n=user,r=abc")
    with pytest.raises(SaslError, match="Invalid user credentials"):
        ScramServer(mechanism, lookup).evaluate(b"n,,n=nobody,r=abc")
    # =2C and =3D stand for "," and "=" in a SCRAM user name
    named = ScramServer(mechanism, lookup)
    assert named.evaluate(b"n,,n=u=2C=3Dx,r=abc").startswith(b"r=abc")
    weak = make_credential(mechanism, "pencil", 1000, b"salt")
    with pytest.raises(SaslError, match="Iterations 1000 is less than the minimum 4096"):
        ScramServer(mechanism, {"user": weak}.get).evaluate(b"n,,n=user,r=abc")


def test_a_credential_is_kept_as_salted_keys_only():
    credential = make_credential(MECHANISMS["SCRAM-SHA-512"], "secret", 8192)
    text = credential.to_text()
    assert "secret" not in text and "iterations=8192" in text
    assert Credential.from_text(text) == credential


def test_jaas_values_as_kafka_reads_them():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_admin="admin-secret" '
            'user_alice="al\\"ice" user_bob=bare;')
    assert plain_users(text) == {"admin": "admin-secret", "alice": 'al"ice', "bob": "bare"}
    (module,) = parse(text)
    assert module.flag == "required" and module.options["username"] == "admin"
    for bad, message in [('x required a="b"', "Expected ';'"),
                         ("x required a=;", "Value not specified for key 'a'"),
                         ("x maybe;", "Invalid login module control flag 'maybe'"),
                         ("", "not terminated by semi-colon")]:
        with pytest.raises(JaasError, match=message):
            parse(bad)


def test_principal_mapping_rules_as_kafka_s_ssl_principal_mapper():
    dn = "CN=kafka-client,OU=ServiceUsers,O=Example,C=US"
    assert PrincipalMapper("DEFAULT").name(dn) == dn
    mapper = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT")
    assert mapper.name(dn) == "kafka-client"
    assert mapper.name("CN=other,O=Example") == "CN=other,O=Example"
    upper = PrincipalMapper("RULE:^CN=([^,]*),.*$/$1/U")
    assert upper.name(dn) == "KAFKA-CLIENT"
    with pytest.raises(TlsConfigError, match="No rules apply"):
        upper.name("O=nobody")
    with pytest.raises(TlsConfigError, match="Invalid rule"):
        PrincipalMapper("RULE:nonsense")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return devcerts.ensure(tmp_path_factory.mktemp("certs"))


def _security(props: dict, listener: str = "SSL"):
    config = BrokerConfig.build({"listeners": f"{listener}://127.0.0.1:0", **props}, warn=False)
    return build(config, listener, lambda user, mechanism: None)


def _serves_tls(context: ssl.SSLContext, certs) -> bool:
    """A handshake against ``context`` in memory, trusting the development CA."""
    client = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    client.load_cert_chain(str(certs / "client.pem"))
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    a = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    b = context.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for obj in (a, b):
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    try:
        a.do_handshake()
        b.do_handshake()
    except ssl.SSLWantReadError:
        return False
    return True


def test_key_stores_in_every_form_python_can_read(certs, tmp_path):
    pem = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker.pem")}
    assert _serves_tls(_security(pem).ssl_context, certs)
    text = (certs / "broker.pem").read_text()
    key_end = text.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----")
    inline = {"ssl.keystore.type": "PEM", "ssl.keystore.key": text[:key_end],
              "ssl.keystore.certificate.chain": text[key_end:],
              "ssl.truststore.type": "PEM",
              "ssl.truststore.certificates": (certs / "ca.pem").read_text(),
              "ssl.client.auth": "required"}
    assert _serves_tls(_security(inline).ssl_context, certs)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography import x509
    key = serialization.load_pem_private_key(text[:key_end].encode(), None)
    cert = x509.load_pem_x509_certificate(text[key_end:].encode())
    store = tmp_path / "broker.p12"
    store.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, cert, None, serialization.BestAvailableEncryption(b"store-pass")))
    p12 = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store),
           "ssl.keystore.password": "store-pass"}
    assert _serves_tls(_security(p12).ssl_context, certs)


@pytest.mark.parametrize("props, message", [
    ({"ssl.keystore.location": "/x/broker.jks"}, "ssl.keystore.type JKS is not supported"),
    ({}, "a TLS listener needs a key and a certificate"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent/broker.pem"},
     "the key or trust store cannot be loaded"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "x"},
     "give both ssl.keystore.key and ssl.keystore.certificate.chain"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{certs}/broker.pem",
      "ssl.client.auth": "required"}, "needs a trust store"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{certs}/broker.pem",
      "ssl.enabled.protocols": "TLSv1.1"}, "names neither TLSv1.2 nor TLSv1.3"),
])
def test_tls_settings_that_cannot_work_are_refused_with_what_to_fix(certs, props, message):
    props = {k: v.replace("{certs}", str(certs)) for k, v in props.items()}
    with pytest.raises(SecurityConfigError, match=message):
        _security(props)


def test_sasl_settings_per_listener_and_what_is_refused():
    users = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
             'user_alice="alice-secret";')
    security = _security({
        "sasl.enabled.mechanisms": "GSSAPI,PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": users,
        "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": "60000",
        "connection.failed.authentication.delay.ms": "250"}, "SASL_PLAINTEXT")
    sasl = security.sasl
    assert sasl.mechanisms == ["PLAIN", "SCRAM-SHA-512"]  # GSSAPI is not served
    assert sasl.plain_users == {"alice": "alice-secret"}
    assert sasl.reauth_ms == {"PLAIN": 0, "SCRAM-SHA-512": 60000}
    assert sasl.failed_delay_ms == 250
    with pytest.raises(SecurityConfigError, match="PLAIN is enabled but no user can log in"):
        _security({"sasl.enabled.mechanisms": "PLAIN"}, "SASL_PLAINTEXT")
    with pytest.raises(SecurityConfigError, match="names no mechanism kcoord serves"):
        _security({}, "SASL_PLAINTEXT")  # Kafka's default: GSSAPI
    with pytest.raises(SecurityConfigError, match="plain.sasl.jaas.config: Expected ';'"):
        _security({"sasl.enabled.mechanisms": "PLAIN",
                   "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x required"},
                  "SASL_PLAINTEXT")


def test_the_start_line_hides_every_secret():
    config = BrokerConfig.build({
        "listeners": "SASL_SSL://127.0.0.1:0", "ssl.key.password": "key-pass",
        "ssl.keystore.password": "store-pass",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'x required user_alice="alice-secret";'}, warn=False)
    shown = repr(config.differences())
    assert "key-pass" not in shown and "store-pass" not in shown
    assert "alice-secret" not in shown
    assert config.differences()["listener.name.sasl_ssl.plain.sasl.jaas.config"] == \
        "[hidden] (set)"
    assert config.differences()["ssl.key.password"].startswith("[hidden]")


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _session(reauth_ms: int, mechanism: str = "PLAIN", wall=None):
    from kcoord.broker.security.sasl import SaslAuthenticator, SaslSettings
    clock = _Clock()
    settings = SaslSettings("L", ["PLAIN", "OAUTHBEARER"], plain_users={"alice": "pw"},
                            reauth_ms={mechanism: reauth_ms}, clock=clock,
                            wall_clock=wall or (lambda: 1_000_000.0))
    return SaslAuthenticator(settings, "peer"), clock


def _frames(mechanism: str, token: bytes):
    from kcoord.protocol.headers import frame_request
    from kcoord.protocol.messages.sasl_authenticate import SASL_AUTHENTICATE
    from kcoord.protocol.messages.sasl_handshake import SASL_HANDSHAKE
    return (frame_request(SASL_HANDSHAKE, 1, 1, "c", {"mechanism": mechanism})[4:],
            frame_request(SASL_AUTHENTICATE, 2, 2, "c", {"auth_bytes": token})[4:])


def _lifetime(answer: bytes) -> int:
    from kcoord.protocol.messages.sasl_authenticate import SASL_AUTHENTICATE
    body = SASL_AUTHENTICATE.codec(2, "response").decode(answer[9:])
    return body.session_lifetime_ms


def test_sessions_last_connections_max_reauth_ms_or_the_token_whichever_ends_first():
    import base64
    import json

    auth, clock = _session(0)
    handshake, login = _frames("PLAIN", b"\0alice\0pw")
    auth.handle(handshake, None)
    assert _lifetime(auth.handle(login, None)) == 0 and auth.expires_at is None
    assert not auth.expired()

    auth, clock = _session(60_000)
    auth.handle(handshake, None)
    assert _lifetime(auth.handle(login, None)) == 60_000
    clock.now += 59.9
    assert not auth.expired()
    clock.now += 0.2
    assert auth.expired()

    def token(exp):
        part = lambda v: base64.urlsafe_b64encode(json.dumps(v).encode()).decode().rstrip("=")  # noqa: E731
        return f"n,,\x01auth=Bearer {part({'alg': 'none'})}.{part({'sub': 'a', 'exp': exp})}.\x01\x01".encode()

    for reauth_ms, exp, expected in ((60_000, 1_000_030.0, 30_000),  # the token ends first
                                     (10_000, 1_000_030.0, 10_000),  # the setting does
                                     (0, 1_000_030.0, 30_000)):      # the token alone
        auth, clock = _session(reauth_ms, "OAUTHBEARER")
        handshake, login = _frames("OAUTHBEARER", token(exp))
        auth.handle(handshake, None)
        assert _lifetime(auth.handle(login, None)) == expected, (reauth_ms, exp)
        clock.now += expected / 1000 + 0.01
        assert auth.expired()
