"""Heartbeat (key 12): versions 0-4, flexible from 4.

Version notes:
- v1 adds the throttle time; v2 only changes behaviour.
- v3 adds static membership (``group_instance_id``).
"""

from kcoord.protocol.schema import F, S, Api

HEARTBEAT = Api(
    key=12,
    name="Heartbeat",
    versions="0-4",
    flexible="4+",
    request=S(
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", v="3+", nullable="3+", default=None),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="1+"),
        F("error_code", "int16"),
    ),
    # Every member of a classic group, every few seconds: generated
    # (protocol.generated), byte-identical to construct's.
    generated=True,
)
