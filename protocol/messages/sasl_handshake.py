"""SaslHandshake (key 17): versions 0-1, never flexible.

Version notes:
- v0: the SASL tokens follow as raw frames; v1: they travel in
  SaslAuthenticate requests.
"""

from kcoord.protocol.schema import F, S, Api

SASL_HANDSHAKE = Api(
    key=17,
    name="SaslHandshake",
    versions="0-1",
    flexible=None,
    request=S(
        F("mechanism", "string"),
    ),
    response=S(
        F("error_code", "int16"),
        F("mechanisms", ["string"]),
    ),
)
