"""SaslAuthenticate (key 36), versions 0-2, outside an authentication exchange:
ILLEGAL_SASL_STATE with Kafka's message.  The exchange itself is
``broker/security/sasl.py``'s."""

from kcoord.broker.apis import api
from kcoord.protocol.errors import ErrorCode


@api(key=36, versions=(0, 2))
def sasl_authenticate(ctx, request):
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
            "error_message": "SaslAuthenticate request received after successful "
                             "authentication",
            "auth_bytes": b"", "session_lifetime_ms": 0}
