"""SASL authentication of one connection, as Kafka's ``SaslServerAuthenticator``
does it.

A connection on a SASL listener serves nothing before it has authenticated:
its first requests may be one ApiVersions and then a SaslHandshake naming a
mechanism; with SaslHandshake v1 the mechanism's tokens travel in
SaslAuthenticate requests, with v0 as raw size-prefixed frames.  Any other
request closes the connection, as on Kafka.  A failed exchange is answered
(SASL_AUTHENTICATION_FAILED with Kafka's message, UNSUPPORTED_SASL_MECHANISM
with the mechanisms enabled) and the connection closed after
``connection.failed.authentication.delay.ms``.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` set, the
session lasts that long (answered as SaslAuthenticate's
``session_lifetime_ms``); the client authenticates again on the same connection
with a new SaslHandshake before then, with the same mechanism and principal; a
connection whose session has expired is closed at its next request.
"""

from __future__ import annotations

import hmac
import re
import struct
import time
from dataclasses import dataclass, field
from typing import Callable

import structlog

from kcoord.broker.security.oauthbearer import OAuthBearerServer
from kcoord.broker.security.scram import (
    MECHANISMS as SCRAM_MECHANISMS,
    AuthenticationFailed,
    Credential,
    ExchangeBroken,
    SaslError,
    ScramServer,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import decode_request, frame_response
from kcoord.protocol.messages.sasl_authenticate import SASL_AUTHENTICATE
from kcoord.protocol.messages.sasl_handshake import SASL_HANDSHAKE

log = structlog.get_logger("kcoord.security")

API_VERSIONS_KEY = 18
SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_KEY_VERSION = struct.Struct(">hhi")


def _api_name(api_key: int) -> str:
    """Kafka's ApiKeys name of an API (METADATA, SASL_HANDSHAKE ...), as its
    messages name a request; the number for a key no schema has."""
    from kcoord.protocol.messages import ALL_APIS

    api = ALL_APIS.get(api_key)
    if api is None:
        return str(api_key)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", api.name).upper()


class AuthenticationFailure(Exception):
    """The exchange failed: send ``response`` (a whole frame, or None), then
    close the connection after the failed-authentication delay."""

    def __init__(self, response: bytes | None, reason: str):
        super().__init__(reason)
        self.response = response


class ProtocolViolation(Exception):
    """Close the connection at once (Kafka: an IllegalStateException)."""


@dataclass
class SaslSettings:
    """What a SASL listener authenticates with (built once, at start)."""

    listener: str
    mechanisms: list[str]  # enabled, in sasl.enabled.mechanisms order
    plain_users: dict[str, str] = field(default_factory=dict)
    oauthbearer_options: dict[str, str] = field(default_factory=dict)  # its JAAS options
    scram_lookup: Callable[[str, str], Credential | None] = lambda user, mechanism: None
    reauth_ms: dict[str, int] = field(default_factory=dict)  # per mechanism
    failed_delay_ms: int = 100
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time


class PlainServer:
    """RFC 4616 PLAIN, checked against the JAAS users (PlainSaslServer)."""

    def __init__(self, users: dict[str, str]):
        self._users = users
        self.authorization_id: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\0", 3)
        if len(parts) != 3:
            raise AuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authzid, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from username")
        self.authorization_id = user
        self.complete = True
        return b""


class SaslAuthenticator:
    """The SASL state of one connection.  ``pending`` while its requests must go
    to ``handle`` instead of the broker's handlers."""

    def __init__(self, settings: SaslSettings, peer: str):
        self.settings = settings
        self.peer = peer
        self.state = "initial"
        self.mechanism: str | None = None
        self.principal: str | None = None  # "User:<name>" once authenticated
        self.expires_at: float | None = None  # the session's end (monotonic seconds)
        self._server = None
        self._kafka_headers = False  # SaslHandshake v1+: tokens in SaslAuthenticate
        self._previous: tuple[str, str] | None = None  # re-authentication: mechanism, principal
        self._lifetime_ms = 0

    @property
    def pending(self) -> bool:
        return self.state != "complete"

    @property
    def session_ms(self) -> int | None:
        """The session's length (None: no end)."""
        return self._lifetime_ms if self.expires_at is not None else None

    def expired(self) -> bool:
        return self.expires_at is not None and self.settings.clock() > self.expires_at

    def begin_reauthentication(self) -> bool:
        """A SaslHandshake on an authenticated connection: re-authentication if the
        session has an end (else the request is served as any other: Kafka answers
        ILLEGAL_SASL_STATE)."""
        if self.expires_at is None:
            return False
        self._previous = (self.mechanism, self.principal)
        self.state = "reauth"
        self._server = None
        return True

    @property
    def _action(self) -> str:
        return "re-authentication" if self._previous else "authentication"

    def handle(self, frame: bytes, serve_api_versions: Callable[[bytes], bytes]) -> bytes | None:
        """Serve one frame of the exchange: the answer to send (a whole frame), or
        raise AuthenticationFailure / ProtocolViolation."""
        state = self.state
        if state in ("initial", "versions_or_handshake", "handshake", "reauth"):
            return self._kafka_request(frame, serve_api_versions)
        if state == "bad_mechanism":
            raise AuthenticationFailure(None, self._bad_mechanism)
        if state == "authenticate":
            return self._authenticate(frame)
        raise ProtocolViolation(f"request in SASL state {state}")

    def _kafka_request(self, frame: bytes, serve_api_versions) -> bytes | None:
        if len(frame) < 8:
            if self.state == "initial":
                raise AuthenticationFailure(None, "Exception handling first SASL packet from "
                                                  "client, GSSAPI is not supported by server")
            raise ProtocolViolation("a truncated request header")
        api_key, version, correlation_id = _KEY_VERSION.unpack_from(frame, 0)
        if api_key not in (API_VERSIONS_KEY, SASL_HANDSHAKE.key):
            if self.state == "initial" and _api_name(api_key).isdigit():
                raise AuthenticationFailure(None, "Exception handling first SASL packet from "
                                                  "client, GSSAPI is not supported by server")
            raise AuthenticationFailure(
                None, f"Unexpected Kafka request of type {_api_name(api_key)} "
                      "during SASL handshake.")
        if api_key == API_VERSIONS_KEY:
            if self.state not in ("initial", "versions_or_handshake"):
                raise ProtocolViolation("Unexpected ApiVersions request received during SASL "
                                        f"authentication state {self.state}")
            self.state = "handshake"
            return serve_api_versions(frame)
        if not SASL_HANDSHAKE.min_version <= version <= SASL_HANDSHAKE.max_version:
            raise ProtocolViolation(f"SaslHandshake v{version} is not supported")
        request = _decode(SASL_HANDSHAKE, version, frame)
        mechanism = request.mechanism
        self._kafka_headers = version >= 1
        enabled = self.settings.mechanisms
        if mechanism not in enabled:
            response = frame_response(SASL_HANDSHAKE, version, correlation_id, {
                "error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled})
            raise AuthenticationFailure(response, f"Unsupported SASL mechanism {mechanism}")
        response = frame_response(SASL_HANDSHAKE, version, correlation_id,
                                  {"error_code": 0, "mechanisms": enabled})
        if self._previous and self._previous[0] != mechanism:
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not "
                                   f"supported for re-authentication of mechanism "
                                   f"'{self._previous[0]}'")
            self.state = "bad_mechanism"
            return response
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = PlainServer(self.settings.plain_users)
        elif mechanism == "OAUTHBEARER":
            self._server = OAuthBearerServer(self.settings.oauthbearer_options,
                                             self.settings.wall_clock)
        else:
            lookup = self.settings.scram_lookup
            self._server = ScramServer(SCRAM_MECHANISMS[mechanism],
                                       lambda user: lookup(user, mechanism))
        self.state = "authenticate"
        return response

    def _authenticate(self, frame: bytes) -> bytes | None:
        if not self._kafka_headers:  # v0: the frame is the token, answered raw
            try:
                answer = self._evaluate(frame)
            except (AuthenticationFailed, SaslError, ExchangeBroken) as exc:
                raise AuthenticationFailure(None, str(exc)) from None
            return struct.pack(">i", len(answer)) + answer
        if len(frame) < 8:
            raise ProtocolViolation("a truncated request header")
        api_key, version, correlation_id = _KEY_VERSION.unpack_from(frame, 0)
        if api_key != SASL_AUTHENTICATE.key:
            raise AuthenticationFailure(
                _illegal_state_answer(api_key, version, correlation_id),
                f"Unexpected Kafka request of type {_api_name(api_key)} "
                "during SASL authentication.")
        if not SASL_AUTHENTICATE.min_version <= version <= SASL_AUTHENTICATE.max_version:
            raise ProtocolViolation(f"Version {version} is not supported for apiKey "
                                    "SASL_AUTHENTICATE")
        request = _decode(SASL_AUTHENTICATE, version, frame)

        def failed(message: str):
            answer = frame_response(SASL_AUTHENTICATE, version, correlation_id, {
                "error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": message,
                "auth_bytes": b""})
            return AuthenticationFailure(answer, message)

        try:
            answer = self._evaluate(bytes(request.auth_bytes))
        except ExchangeBroken as exc:
            raise ProtocolViolation(str(exc)) from None
        except AuthenticationFailed as exc:
            raise failed(str(exc)) from None
        except SaslError as exc:
            log.debug("connection.sasl_failed", peer=self.peer, mechanism=self.mechanism,
                      reason=str(exc))
            raise failed(f"Authentication failed during {self._action} due to invalid "
                         f"credentials with SASL mechanism {self.mechanism}") from None
        lifetime_ms = self._lifetime_ms if self.state == "complete" else 0
        return frame_response(SASL_AUTHENTICATE, version, correlation_id, {
            "error_code": 0, "error_message": "", "auth_bytes": answer,
            "session_lifetime_ms": lifetime_ms})

    def _evaluate(self, token: bytes) -> bytes:
        server = self._server
        answer = server.evaluate(token)
        if server.complete:
            principal = f"User:{server.authorization_id}"
            if self._previous and self._previous[1] != principal:
                raise AuthenticationFailed(
                    f"Cannot change principals during re-authentication from "
                    f"{self._previous[1].replace(':', '.', 1)}: {principal.replace(':', '.', 1)}")
            self.principal = principal
            self.state = "complete"
            self._previous = None
            self._server = None
            self._start_session(getattr(server, "expires_ms", None))
        return answer

    def _start_session(self, credential_end_ms: float | None) -> None:
        """The session's length (Kafka's calcCompletionTimesAndReturnSessionLifetimeMs):
        ``connections.max.reauth.ms``, or what is left of the credential (an
        OAUTHBEARER token), whichever ends first; no end if neither is set."""
        reauth_ms = self.settings.reauth_ms.get(self.mechanism, 0)
        if credential_end_ms is None and reauth_ms <= 0:
            self.expires_at, self._lifetime_ms = None, 0
            return
        lifetime = reauth_ms if credential_end_ms is None else \
            credential_end_ms - self.settings.wall_clock() * 1000
        if credential_end_ms is not None and reauth_ms > 0:
            lifetime = min(lifetime, reauth_ms)
        self._lifetime_ms = max(int(lifetime), 0)
        self.expires_at = self.settings.clock() + self._lifetime_ms / 1000


# The error answers (ILLEGAL_SASL_STATE) Kafka gives a request sent in place of
# a SaslAuthenticate, for the requests a client could send there; any other is
# closed without one.
_ILLEGAL_STATE_ANSWERS = {
    SASL_HANDSHAKE.key: {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []},
    API_VERSIONS_KEY: {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "api_keys": [],
                       "throttle_time_ms": 0, "supported_features": [],
                       "finalized_features_epoch": -1, "finalized_features": []},
    3: {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
        "topics": [], "cluster_authorized_operations": -(1 << 31),
        "error_code": ErrorCode.ILLEGAL_SASL_STATE},
}


def _illegal_state_answer(api_key: int, version: int, correlation_id: int) -> bytes | None:
    from kcoord.protocol.messages import ALL_APIS

    body = _ILLEGAL_STATE_ANSWERS.get(api_key)
    api = ALL_APIS.get(api_key)
    if body is None or api is None or not api.min_version <= version <= api.max_version:
        return None
    return frame_response(api, version, correlation_id, body)


def _decode(api, version: int, frame: bytes):
    """The body of a SASL request; a malformed one closes the connection (Kafka:
    an InvalidRequestException, which fails the exchange at once)."""
    try:
        return decode_request(api, version, frame)[1]
    except Exception as exc:  # any malformed body
        raise ProtocolViolation(f"an undecodable {api.name} v{version}: "
                                f"{exc or type(exc).__name__}") from None


def served_mechanisms(enabled: list[str]) -> list[str]:
    return [m for m in enabled if m in SERVED_MECHANISMS]
