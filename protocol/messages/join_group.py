"""JoinGroup (key 11): versions 0-9, flexible from 6.

Version notes:
- v1 adds ``rebalance_timeout_ms`` (v0 uses the session timeout for both).
- v2 adds the throttle time; v3 and v4 only change behaviour (v4: a member
  without an id gets MEMBER_ID_REQUIRED and must rejoin with the given id).
- v5 adds static membership (``group_instance_id``).
- v7 answers ``protocol_type`` and lets ``protocol_name`` be null.
- v8 adds the join ``reason``; v9 ``skip_assignment`` in the answer.
"""

from kcoord.protocol.schema import F, S, Api

JOIN_GROUP = Api(
    key=11,
    name="JoinGroup",
    versions="0-9",
    flexible="6+",
    request=S(
        F("group_id", "string"),
        F("session_timeout_ms", "int32"),
        F("rebalance_timeout_ms", "int32", v="1+", default=-1),
        F("member_id", "string"),
        F("group_instance_id", "string", v="5+", nullable="5+", default=None),
        F("protocol_type", "string"),
        F("protocols", [S(
            F("name", "string"),
            F("metadata", "bytes"),
        )]),
        F("reason", "string", v="8+", nullable="8+", default=None),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="2+"),
        F("error_code", "int16"),
        F("generation_id", "int32", default=-1),
        F("protocol_type", "string", v="7+", nullable="7+", default=None),
        F("protocol_name", "string", nullable="7+"),
        F("leader", "string"),
        F("skip_assignment", "bool", v="9+", default=False),
        F("member_id", "string"),
        F("members", [S(
            F("member_id", "string"),
            F("group_instance_id", "string", v="5+", nullable="5+", default=None),
            F("metadata", "bytes"),
        )]),
    ),
)
