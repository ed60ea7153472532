"""FindCoordinator (key 10): versions 0-6, flexible from 3.

Version notes:
- v0 looks up a group coordinator by ``key``; v1 adds ``key_type``
  (0 group, 1 transaction), the throttle time and an error message.
- v4 batches: ``coordinator_keys`` replaces ``key`` and the answer moves into
  the ``coordinators`` list, one entry per key with its own error.
- v5 and v6 change nothing on the wire (new error codes, share groups).
"""

from kcoord.protocol.schema import F, S, Api

FIND_COORDINATOR = Api(
    key=10,
    name="FindCoordinator",
    versions="0-6",
    flexible="3+",
    request=S(
        F("key", "string", v="0-3"),
        F("key_type", "int8", v="1+", default=0),
        F("coordinator_keys", ["string"], v="4+"),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="1+"),
        F("error_code", "int16", v="0-3"),
        F("error_message", "string", v="1-3", nullable="1-3", default=None),
        F("node_id", "int32", v="0-3"),
        F("host", "string", v="0-3"),
        F("port", "int32", v="0-3"),
        F("coordinators", [S(
            F("key", "string", v="4+"),
            F("node_id", "int32", v="4+"),
            F("host", "string", v="4+"),
            F("port", "int32", v="4+"),
            F("error_code", "int16", v="4+"),
            F("error_message", "string", v="4+", nullable="4+", default=None),
        )], v="4+"),
    ),
)
