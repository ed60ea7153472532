"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's
``ScramSaslServer`` serves them, and the credentials it checks them against.

A credential keeps the salt, the iteration count and the two keys derived from
the password (``StoredKey``, ``ServerKey``), never the password itself, as
Kafka's ``ScramCredential`` does.  ``ScramServer`` is one exchange: the client's
first message, the server's first, the client's final with its proof, the
server's final with its signature.  Kafka's message patterns and error texts
are kept: the texts of ``SaslError`` never reach the client (it is told that the
credentials are invalid), those of ``AuthenticationFailed`` do.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass


class SaslError(Exception):
    """A failed exchange whose reason the client is not told (Kafka's SaslException)."""


class ExchangeBroken(Exception):
    """Input the exchange cannot go on with (Kafka fails it with an unexpected
    exception): the connection is closed without an answer."""


class AuthenticationFailed(Exception):
    """A failed exchange whose message is the client's answer
    (Kafka's SaslAuthenticationException)."""


@dataclass(frozen=True)
class Mechanism:
    name: str
    hash_name: str
    type_code: int  # ScramMechanism's type in DescribeUserScramCredentials
    min_iterations: int = 4096
    max_iterations: int = 16384

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


MECHANISMS = {m.name: m for m in (Mechanism("SCRAM-SHA-256", "sha256", 1),
                                  Mechanism("SCRAM-SHA-512", "sha512", 2))}
BY_TYPE = {m.type_code: m for m in MECHANISMS.values()}


@dataclass(frozen=True)
class Credential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        """Kafka's ScramCredentialUtils form:
        ``salt=..,stored_key=..,server_key=..,iterations=..``."""
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> "Credential":
        fields = dict(part.split("=", 1) for part in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def salted_password(mechanism: Mechanism, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password, salt, iterations)


def credential_from_salted(mechanism: Mechanism, salted: bytes, salt: bytes,
                           iterations: int) -> Credential:
    client_key = mechanism.hmac(salted, b"Client Key")
    return Credential(salt, mechanism.digest(client_key),
                      mechanism.hmac(salted, b"Server Key"), iterations)


def make_credential(mechanism: Mechanism, password: str, iterations: int = 4096,
                    salt: bytes | None = None) -> Credential:
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted(
        mechanism, salted_password(mechanism, password.encode(), salt, iterations), salt,
        iterations)


# ScramMessages' patterns.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_BASE64 = r"(?:[a-zA-Z0-9+/]{4})*(?:[a-zA-Z0-9+/]{2}==|[a-zA-Z0-9+/]{3}=)?"
_EXTENSIONS = r"(?:,[a-zA-Z]=[\x01-\x2b\x2d-\x7f]+)*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m=[\x01-\x2b\x2d-\x7f]+,)?"
    rf"n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})",
    re.DOTALL)
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})",
    re.DOTALL)


def username(sasl_name: str) -> str:
    """ScramFormatter.username: ``=2C`` and ``=3D`` decoded; another ``=`` is invalid."""
    name = sasl_name.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise SaslError(f"Invalid username: {sasl_name}")
    return name.replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange on the server side.  ``lookup(user)`` gives the user's
    credential for this mechanism, or None."""

    def __init__(self, mechanism: Mechanism, lookup, server_nonce: str | None = None):
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce  # given by tests; random otherwise
        self._state = "first"
        self.authorization_id: str | None = None
        self._credential: Credential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._first(token)
            if self._state == "final":
                return self._final(token)
            raise SaslError(f"Unexpected challenge in Sasl server state {self._state}")
        except (SaslError, AuthenticationFailed, ExchangeBroken):
            self._state = "failed"
            self._credential = None
            raise

    def _first(self, token: bytes) -> bytes:
        message = token.decode("utf-8", "replace")
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise SaslError(f"Invalid SCRAM client first message format: {message}")
        try:
            user = username(match["saslname"])
        except SaslError:
            raise SaslError("Authentication failed: Credentials could not be obtained") from None
        credential = self._lookup(user)
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        authzid = match["authzid"] or ""
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from username")
        if credential.iterations < self.mechanism.min_iterations:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum "
                            f"{self.mechanism.min_iterations} for {self.mechanism.name}")
        self._credential = credential
        self.authorization_id = user
        # client-first-message-bare: what follows the gs2 header
        self._client_first_bare = message[message.index(",", message.index(",") + 1) + 1:]
        self._nonce = match["nonce"] + (self._server_nonce or secrets.token_urlsafe(24))
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _final(self, token: bytes) -> bytes:
        message = token.decode("utf-8", "replace")
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise SaslError(f"Invalid SCRAM client final message format: {message}")
        if not match["nonce"].endswith(self._nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        mech, credential = self.mechanism, self._credential
        without_proof = message[:message.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = mech.hmac(credential.stored_key, auth_message)
        proof = base64.b64decode(match["proof"])
        if len(proof) != len(signature):
            raise ExchangeBroken(f"a client proof of {len(proof)} bytes")
        client_key = bytes(a ^ b for a, b in zip(signature, proof))
        if not hmac.compare_digest(mech.digest(client_key), credential.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = mech.hmac(credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        return b"v=" + base64.b64encode(server_signature)
