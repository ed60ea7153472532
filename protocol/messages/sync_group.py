"""SyncGroup (key 14): versions 0-5, flexible from 4.

Version notes:
- v1 adds the throttle time; v2 only changes behaviour.
- v3 adds static membership (``group_instance_id``).
- v5 carries ``protocol_type`` and ``protocol_name`` both ways so the broker
  and the members can check them.
"""

from kcoord.protocol.schema import F, S, Api

SYNC_GROUP = Api(
    key=14,
    name="SyncGroup",
    versions="0-5",
    flexible="4+",
    request=S(
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", v="3+", nullable="3+", default=None),
        F("protocol_type", "string", v="5+", nullable="5+", default=None),
        F("protocol_name", "string", v="5+", nullable="5+", default=None),
        F("assignments", [S(
            F("member_id", "string"),
            F("assignment", "bytes"),
        )]),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="1+"),
        F("error_code", "int16"),
        F("protocol_type", "string", v="5+", nullable="5+", default=None),
        F("protocol_name", "string", v="5+", nullable="5+", default=None),
        F("assignment", "bytes"),
    ),
)
