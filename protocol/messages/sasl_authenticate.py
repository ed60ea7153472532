"""SaslAuthenticate (key 36): versions 0-2, flexible from 2.

Version notes:
- v1 answers ``session_lifetime_ms`` (0: no re-authentication needed).
"""

from kcoord.protocol.schema import F, S, Api

SASL_AUTHENTICATE = Api(
    key=36,
    name="SaslAuthenticate",
    versions="0-2",
    flexible="2+",
    request=S(
        F("auth_bytes", "bytes"),
    ),
    response=S(
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("auth_bytes", "bytes"),
        F("session_lifetime_ms", "int64", v="1+", default=0),
    ),
)
