"""SaslHandshake (key 17), versions 0-1, outside an authentication exchange: on a
listener without SASL, or on a connection that has authenticated (and cannot
re-authenticate), Kafka answers ILLEGAL_SASL_STATE with no mechanisms.  The
exchange itself is ``broker/security/sasl.py``'s."""

from kcoord.broker.apis import api
from kcoord.protocol.errors import ErrorCode


@api(key=17, versions=(0, 1))
def sasl_handshake(ctx, request):
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
