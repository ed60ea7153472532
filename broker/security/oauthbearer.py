"""OAUTHBEARER (RFC 7628) with unsecured JWS tokens, as Kafka's default
development validator (``OAuthBearerUnsecuredValidatorCallbackHandler``)
accepts them: a token ``header.claims.`` with ``"alg": "none"`` and no
signature, an expiration time (``exp``), the principal in a claim (``sub``
unless the JAAS option ``unsecuredValidatorPrincipalClaimName`` names another),
optionally ``iat`` and a scope that must hold ``unsecuredValidatorRequiredScope``.

A refused token is answered, as on Kafka, with a JSON challenge
(``{"status":"invalid_token"}``) that the client acknowledges with one 0x01
byte; the exchange then fails with that JSON as the message.  The token's
expiration bounds the session: past it the client must re-authenticate.
"""

from __future__ import annotations

import base64
import json
import re
import time

from kcoord.broker.security.scram import AuthenticationFailed, SaslError

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*"
_INITIAL = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01",
                      re.DOTALL)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


class InvalidToken(Exception):
    def __init__(self, reason: str, scope: str | None = None):
        super().__init__(reason)
        self.scope = scope


def _part(text: str) -> dict:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise InvalidToken("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(raw)
    except ValueError:
        raise InvalidToken("malformed JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken("malformed JSON")
    return value


def _number(claims: dict, name: str) -> float | None:
    value = claims.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InvalidToken(f"The '{name}' claim was not of type Number: {value}")
    return value


class OAuthBearerServer:
    def __init__(self, options: dict[str, str], wall_clock=time.time):
        self._principal_claim = (
            options.get("unsecuredValidatorPrincipalClaimName") or "sub").strip()
        self._scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "scope").strip()
        required = options.get("unsecuredValidatorRequiredScope") or ""
        self._required = [s for s in required.split() if s]
        self._skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs") or 0)
        self._wall = wall_clock
        self._error: str | None = None
        self.authorization_id: str | None = None
        self.expires_ms: float | None = None  # the token's end (wall-clock ms)
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise AuthenticationFailed(self._error)
        self._error = None
        message = token.decode("utf-8", "replace")
        match = _INITIAL.fullmatch(message)
        if match is None:
            raise SaslError("Invalid OAUTHBEARER client first message")
        pairs = dict(pair.split("=", 1) for pair in match["kvpairs"].split("\x01") if pair)
        auth = pairs.get("auth")
        if auth is None:
            raise SaslError("Invalid OAUTHBEARER client first message: 'auth' not specified")
        found = _AUTH.fullmatch(auth)
        if found is None:
            raise SaslError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
        if found["scheme"].lower() != "bearer":
            raise SaslError("Invalid scheme in OAUTHBEARER client first message")
        try:
            principal, expires_ms = self._validate(found["token"])
        except InvalidToken as exc:
            if exc.scope is not None:
                self._error = f'{{"status":"insufficient_scope", "scope":"{exc.scope}"}}'
            else:
                self._error = '{"status":"invalid_token"}'
            return self._error.encode()
        authzid = match["authzid"] or ""
        if authzid and authzid != principal:
            raise AuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({principal})")
        self.authorization_id = principal
        self.expires_ms = expires_ms
        self.complete = True
        return b""

    def _validate(self, token: str) -> tuple[str, float]:
        if ".." in token:
            raise InvalidToken("Malformed compact serialization contains '..'")
        splits = token.split(".")
        if len(splits) != 3:
            raise InvalidToken("Unsecured JWS compact serializations must have 3 parts")
        header, claims = _part(splits[0]), _part(splits[1])
        if header.get("alg") != "none":
            raise InvalidToken("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise InvalidToken("Unsecured JWS must not contain a digital signature")
        expires = _number(claims, "exp")
        if expires is None:
            raise InvalidToken("No expiration time in JWT")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken(f"No principal name in JWT claim: {self._principal_claim}")
        now_ms = self._wall() * 1000
        issued = _number(claims, "iat")
        if issued is not None and 1000 * issued > now_ms + self._skew_ms:
            raise InvalidToken("The Issued At value was after the indicated time")
        if now_ms - self._skew_ms >= 1000 * expires:
            raise InvalidToken("The indicated time was on or after the Expiration Time value")
        if issued is not None and expires <= issued:
            raise InvalidToken("The Expiration Time time was not after the Issued At time")
        scope = claims.get(self._scope_claim)
        held = set(scope.split()) if isinstance(scope, str) else \
            {str(s).strip() for s in scope} if isinstance(scope, list) else set()
        for element in self._required:
            if element not in held:
                raise InvalidToken("The provided scope was missing a required scope",
                                   scope="[" + ", ".join(self._required) + "]")
        return principal, 1000 * expires
