"""SASL and TLS on the wire, request by request, as Kafka's
SaslServerAuthenticator serves them: the handshake and authentication
exchanges (v0 raw tokens and v1 SaslAuthenticate), the errors and closes of a
failed or out-of-order exchange, re-authentication, the principal of a TLS
client certificate, and the SCRAM credential APIs.  Kafka 4.4 answers the same
exchanges the same way (tests/reference/test_differential_security.py)."""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import time

import pytest
from kafka.net.sasl.scram import ScramClient

from kcoord.protocol.client import WireClient
from tests.support import SASL_USERS, Secured, captured_logs

UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    setup = Secured(tmp_path_factory.mktemp("secured-data"),
                    tmp_path_factory.mktemp("secured-certs"),
                    extra={"connection.failed.authentication.delay.ms": "0"}).start()
    yield setup
    setup.stop()


@pytest.fixture
def logs():
    with captured_logs(logging.DEBUG) as captured:
        yield captured


def _client(secured, listener: str, **kwargs) -> WireClient:
    if listener in ("SSL", "SASL_SSL"):
        kwargs.setdefault("ssl_context", secured.client_context())
    return WireClient("127.0.0.1", secured.port(listener), timeout=10, **kwargs)


def _closed(client: WireClient, wait: float = 5) -> bool:
    client.sock.settimeout(wait)
    try:
        return client.sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True
    except socket.timeout:
        return False


def _plain_login(client: WireClient, user: str, password: str, version: int = 2) -> dict:
    handshake = client.call(17, 1, {"mechanism": "PLAIN"})
    assert handshake == {"error_code": 0,
                         "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]}
    return client.call(36, version, {"auth_bytes": f"\0{user}\0{password}".encode()})


def _scram_login(client: WireClient, mechanism: str, user: str, password: str) -> dict:
    assert client.call(17, 1, {"mechanism": mechanism})["error_code"] == 0
    scram = ScramClient(user, password, mechanism)
    first = client.call(36, 2, {"auth_bytes": scram.first_message()})
    if first["error_code"]:
        return first  # an unknown user: refused at once
    scram.process_server_first_message(first["auth_bytes"])
    final = client.call(36, 2, {"auth_bytes": scram.final_message()})
    if final["error_code"] == 0:
        scram.process_server_final_message(final["auth_bytes"])  # checks the server's proof
    return final


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_a_plain_login_then_requests_are_served_as_that_user(secured, listener):
    with _client(secured, listener) as client:
        versions = client.call(18, 3, {"client_software_name": "t",
                                       "client_software_version": "1"})
        offered = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}
        assert offered[17] == (0, 1) and offered[36] == (0, 2)
        answer = _plain_login(client, "alice", "alice-secret")
        assert answer == {"error_code": 0, "error_message": "", "auth_bytes": b"",
                          "session_lifetime_ms": 0}
        metadata = client.call(3, 12, METADATA_ALL)
        assert metadata["brokers"][0]["port"] == secured.port(listener)
        principals = {c.principal for c in secured.node.broker.connections
                      if c.listener == listener}
        assert "User:alice" in principals


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_logins_check_both_proofs(secured, mechanism):
    with _client(secured, "SASL_SSL") as client:
        answer = _scram_login(client, mechanism, "admin", "admin-secret")
        assert answer["error_code"] == 0
        assert answer["auth_bytes"].startswith(b"v=")
        assert client.call(3, 12, METADATA_ALL)["brokers"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_scram_password_or_unknown_user_fails_without_saying_which(secured, mechanism):
    for user, password in (("admin", "wrong"), ("nobody", "whatever")):
        with _client(secured, "SASL_PLAINTEXT") as client:
            assert client.call(17, 1, {"mechanism": mechanism})["error_code"] == 0
            scram = ScramClient(user, password, mechanism)
            first = client.call(36, 1, {"auth_bytes": scram.first_message()})
            if user == "nobody":  # refused at the first message, with the same words
                answer = first
            else:
                scram.process_server_first_message(first["auth_bytes"])
                answer = client.call(36, 1, {"auth_bytes": scram.final_message()})
            assert answer["error_code"] == SASL_AUTHENTICATION_FAILED
            assert answer["error_message"] == (
                "Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {mechanism}")
            assert _closed(client)


def test_a_wrong_plain_password_is_refused_and_the_connection_closed(secured, logs):
    with _client(secured, "SASL_PLAINTEXT") as client:
        answer = _plain_login(client, "alice", "not-her-password")
        assert answer["error_code"] == SASL_AUTHENTICATION_FAILED
        assert answer["error_message"] == "Authentication failed: Invalid username or password"
        assert _closed(client)
    failed = [e for e in logs if e["event"] == "connection.authentication_failed"]
    assert failed and failed[0]["mechanism"] == "PLAIN"
    # no secret in any line logged meanwhile
    text = repr(logs)
    assert "not-her-password" not in text and all(p not in text for p in SASL_USERS.values())


def test_plain_messages_for_malformed_tokens(secured):
    cases = [(b"\0alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
             (b"\0\0pw", "Authentication failed: username not specified"),
             (b"\0alice\0", "Authentication failed: password not specified"),
             (b"bob\0alice\0alice-secret", "Authentication failed: Client requested an "
                                           "authorization id that is different from username")]
    for token, message in cases:
        with _client(secured, "SASL_PLAINTEXT") as client:
            assert client.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
            answer = client.call(36, 0, {"auth_bytes": token})
            assert (answer["error_code"], answer["error_message"]) == (
                SASL_AUTHENTICATION_FAILED, message)


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones_then_closed(secured):
    with _client(secured, "SASL_PLAINTEXT") as client:
        answer = client.call(17, 1, {"mechanism": "GSSAPI"})
        assert answer == {"error_code": UNSUPPORTED_SASL_MECHANISM,
                          "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]}
        assert _closed(client)


def test_requests_before_authentication_close_the_connection(secured):
    with _client(secured, "SASL_PLAINTEXT") as client:
        client.send(3, 12, METADATA_ALL)
        assert _closed(client)
    with _client(secured, "SASL_PLAINTEXT") as client:  # a second ApiVersions
        client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        client.send(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert _closed(client)
    with _client(secured, "SASL_PLAINTEXT") as client:  # Metadata in place of a token
        assert client.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        answer = client.call(3, 12, METADATA_ALL)  # answered as Kafka answers it, then closed
        assert (answer["brokers"], answer["topics"], answer["controller_id"]) == ([], [], -1)
        assert _closed(client)


def test_handshake_v0_exchanges_raw_tokens(secured):
    with _client(secured, "SASL_PLAINTEXT") as client:
        assert client.call(17, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = b"\0alice\0alice-secret"
        client.send_raw(struct.pack(">i", len(token)) + token)
        assert client.recv_frame() == b""  # PLAIN's empty answer, size-prefixed
        assert client.call(3, 12, METADATA_ALL)["brokers"]


def test_outside_an_exchange_the_sasl_apis_answer_illegal_sasl_state(secured):
    with _client(secured, "PLAINTEXT") as client:
        assert client.call(17, 1, {"mechanism": "PLAIN"}) == {
            "error_code": ILLEGAL_SASL_STATE, "mechanisms": []}
        assert client.call(36, 2, {"auth_bytes": b"x"}) == {
            "error_code": ILLEGAL_SASL_STATE,
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"", "session_lifetime_ms": 0}
    with _client(secured, "SASL_PLAINTEXT") as client:  # authenticated, no session end
        assert _plain_login(client, "alice", "alice-secret")["error_code"] == 0
        assert client.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == ILLEGAL_SASL_STATE


def test_ssl_client_certificate_is_the_principal(secured):
    with _client(secured, "SSL") as client:
        assert client.call(3, 12, METADATA_ALL)["brokers"][0]["port"] == secured.port("SSL")
        principals = {c.principal for c in secured.node.broker.connections
                      if c.listener == "SSL"}
        assert principals == {"User:CN=client"}


def test_tls_failures_close_the_connection_with_a_log_line(secured, logs):
    # without the client certificate the listener requires
    with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
        with _client(secured, "SSL", ssl_context=secured.client_context(certificate=False)) \
                as client:
            client.call(3, 12, METADATA_ALL)
    # a plain Kafka client on the TLS port
    with WireClient("127.0.0.1", secured.port("SASL_SSL"), timeout=10) as client:
        client.send(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert _closed(client)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(
            e["event"] == "connection.tls_handshake_failed" for e in logs):
        time.sleep(0.05)
    assert any(e["event"] == "connection.tls_handshake_failed" for e in logs)


def test_untrusted_server_certificate_is_refused_by_the_client(secured, tmp_path):
    from kcoord.broker.security import devcerts
    other = devcerts.ensure(tmp_path / "other-ca")
    context = ssl.create_default_context(cafile=str(other / "ca.pem"))
    with pytest.raises(ssl.SSLCertVerificationError):
        WireClient("127.0.0.1", secured.port("SASL_SSL"), ssl_context=context)


def test_reauthentication_renews_the_session_and_an_expired_one_is_closed(tmp_path):
    setup = Secured(tmp_path / "data", tmp_path / "certs",
                    extra={"connections.max.reauth.ms": "400"}).start()
    try:
        with _client(setup, "SASL_PLAINTEXT") as client:
            answer = _plain_login(client, "alice", "alice-secret", version=1)
            assert answer["session_lifetime_ms"] == 400
            # re-authenticate on the same connection: a new session
            assert _plain_login(client, "alice", "alice-secret")["session_lifetime_ms"] == 400
            assert client.call(3, 12, METADATA_ALL)["brokers"]
            # past the session's end: the listener's clock moved on, not slept through
            (connection,) = [c for c in setup.node.broker.connections
                             if c.listener == "SASL_PLAINTEXT"]
            connection.auth.settings.clock = lambda: time.monotonic() + 0.5
            client.send(3, 12, METADATA_ALL)
            assert _closed(client)
        with _client(setup, "SASL_PLAINTEXT") as client:  # not as someone else
            _plain_login(client, "alice", "alice-secret")
            answer = _plain_login(client, "admin", "admin-secret")
            assert answer["error_code"] == SASL_AUTHENTICATION_FAILED
            assert answer["error_message"] == ("Cannot change principals during "
                                               "re-authentication from User.alice: User.admin")
    finally:
        setup.stop()


def test_scram_credentials_are_altered_described_and_kept(tmp_path):
    setup = Secured(tmp_path / "data", tmp_path / "certs").start()
    try:
        with _client(setup, "PLAINTEXT") as client:
            import hashlib
            salt = b"0123456789abcdef"
            salted = hashlib.pbkdf2_hmac("sha512", b"carol-secret", salt, 8192)
            altered = client.call(51, 0, {"deletions": [], "upsertions": [
                {"name": "carol", "mechanism": 2, "iterations": 8192, "salt": salt,
                 "salted_password": salted},
                {"name": "dave", "mechanism": 1, "iterations": 100, "salt": salt,
                 "salted_password": salted},
                {"name": "", "mechanism": 1, "iterations": 4096, "salt": salt,
                 "salted_password": salted},
                {"name": "erin", "mechanism": 9, "iterations": 4096, "salt": salt,
                 "salted_password": salted}]})
            results = {r["user"]: (r["error_code"], r["error_message"])
                       for r in altered["results"]}
            assert results == {"carol": (0, None), "dave": (93, "Too few iterations"),
                               "": (93, "Username must not be empty"),
                               "erin": (33, "Unknown SCRAM mechanism")}
            deleted = client.call(51, 0, {"upsertions": [], "deletions": [
                {"name": "alice", "mechanism": 1}, {"name": "nobody", "mechanism": 1}]})
            assert {r["user"]: r["error_code"] for r in deleted["results"]} == {
                "alice": 0, "nobody": 91}
            described = client.call(50, 0, {"users": [{"name": "carol"}, {"name": "alice"},
                                                      {"name": "zed"}]})
            by_user = {r["user"]: r for r in described["results"]}
            assert by_user["carol"]["credential_infos"] == [{"mechanism": 2,
                                                              "iterations": 8192}]
            assert by_user["alice"]["credential_infos"] == [{"mechanism": 2,
                                                              "iterations": 4096}]
            assert by_user["zed"]["error_code"] == 91
        setup.node.stop()
        setup.node = type(setup.node)(tmp_path / "data", overrides=setup.overrides).start()
        with _client(setup, "SASL_SSL") as client:  # the new user logs in after a restart
            assert _scram_login(client, "SCRAM-SHA-512", "carol", "carol-secret")[
                "error_code"] == 0
        with _client(setup, "SASL_SSL") as client:  # alice's SHA-256 credential is gone
            assert _scram_login(client, "SCRAM-SHA-256", "alice", "alice-secret")[
                "error_code"] == SASL_AUTHENTICATION_FAILED
    finally:
        setup.stop()


def _unsecured_jwt(claims: dict, header: dict | None = None) -> str:
    import base64
    import json

    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return f"{part(header or {'alg': 'none'})}.{part(claims)}."


@pytest.fixture(scope="module")
def oauth(tmp_path_factory):
    setup = Secured(tmp_path_factory.mktemp("oauth-data"), tmp_path_factory.mktemp("oauth-certs"),
                    extra={"sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
                           "connection.failed.authentication.delay.ms": "0",
                           "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                               "org.apache.kafka.common.security.oauthbearer."
                               "OAuthBearerLoginModule required "
                               'unsecuredValidatorRequiredScope="produce";'}).start()
    yield setup
    setup.stop()


def _bearer(client: WireClient, token: str) -> dict:
    assert client.call(17, 1, {"mechanism": "OAUTHBEARER"})["error_code"] == 0
    return client.call(36, 2, {"auth_bytes": f"n,,\x01auth=Bearer {token}\x01\x01".encode()})


def test_oauthbearer_accepts_an_unsecured_token_until_it_expires(oauth):
    now = time.time()
    token = _unsecured_jwt({"sub": "carol", "exp": now + 60, "iat": now, "scope": "produce x"})
    with _client(oauth, "SASL_PLAINTEXT") as client:
        answer = _bearer(client, token)
        assert answer["error_code"] == 0 and answer["auth_bytes"] == b""
        # the token's end is the session's end
        assert 58_000 <= answer["session_lifetime_ms"] <= 60_000
        assert client.call(3, 12, METADATA_ALL)["brokers"]
        assert "User:carol" in {c.principal for c in oauth.node.broker.connections}


@pytest.mark.parametrize("claims, header, challenge", [
    ({"sub": "carol", "exp": 1, "scope": "produce"}, None, '{"status":"invalid_token"}'),
    ({"sub": "carol", "scope": "produce"}, None, '{"status":"invalid_token"}'),
    ({"exp": 4e9, "scope": "produce"}, None, '{"status":"invalid_token"}'),
    ({"sub": "carol", "exp": 4e9, "scope": "produce"}, {"alg": "HS256"},
     '{"status":"invalid_token"}'),
    ({"sub": "carol", "exp": 4e9, "scope": "read"}, None,
     '{"status":"insufficient_scope", "scope":"[produce]"}'),
])
def test_oauthbearer_refuses_a_token_with_a_json_challenge(oauth, claims, header, challenge):
    with _client(oauth, "SASL_PLAINTEXT") as client:
        answer = _bearer(client, _unsecured_jwt(claims, header))
        assert (answer["error_code"], answer["auth_bytes"]) == (0, challenge.encode())
        final = client.call(36, 2, {"auth_bytes": b"\x01"})  # the client's acknowledgement
        assert (final["error_code"], final["error_message"]) == (
            SASL_AUTHENTICATION_FAILED, challenge)
        assert _closed(client)


def test_before_login_a_frame_is_held_to_the_sasl_receive_size(secured):
    """sasl.server.max.receive.size (512 KiB): a client that has not logged in
    cannot make the broker set aside more; after its login the usual limit holds."""
    with _client(secured, "SASL_PLAINTEXT") as client:
        client.send_raw(struct.pack(">i", 600_000) + b"x" * 1000)
        assert _closed(client)
    with _client(secured, "SASL_PLAINTEXT") as client:
        assert _plain_login(client, "alice", "alice-secret")["error_code"] == 0
        big = client.call(3, 12, {"topics": [{"name": f"t{i:05d}-" + "n" * 200, "topic_id": None}
                                             for i in range(3000)],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})
        assert len(big["topics"]) == 3000  # a 600 KB request, served once logged in


def test_a_malformed_sasl_request_closes_the_connection_with_a_log_line(tmp_path, logs):
    # a broker of its own: the bad-input lines of other tests are not rate-limiting it
    secured = Secured(tmp_path / "data", tmp_path / "certs").start()
    try:
        _malformed_requests_close(secured, logs)
    finally:
        secured.stop()


def _malformed_requests_close(secured, logs):
    from kcoord.protocol.headers import frame_request
    from kcoord.protocol.messages.sasl_authenticate import SASL_AUTHENTICATE
    from kcoord.protocol.messages.sasl_handshake import SASL_HANDSHAKE

    def cut(frame: bytes) -> bytes:  # the body three bytes short, the size saying so
        return struct.pack(">i", len(frame) - 7) + frame[4:-3]

    handshake = frame_request(SASL_HANDSHAKE, 1, 1, "c", {"mechanism": "PLAIN"})
    token = frame_request(SASL_AUTHENTICATE, 2, 2, "c", {"auth_bytes": b"\0alice\0pw"})
    with _client(secured, "SASL_PLAINTEXT") as client:
        client.send_raw(cut(handshake))
        assert _closed(client)
    with _client(secured, "SASL_PLAINTEXT") as client:
        assert client.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        client.send_raw(cut(token))
        assert _closed(client)
    # one line per client host and 10 s (the bad-input limiter): the first says why
    violations = [e for e in logs if e["event"] == "connection.sasl_protocol_violation"]
    assert [v["reason"].split(":")[0] for v in violations] == [
        "an undecodable SaslHandshake v1"]
