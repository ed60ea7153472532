"""LeaveGroup (key 13): versions 0-5, flexible from 4.

Version notes:
- v0-2 remove one member (``member_id``); v1 adds the throttle time.
- v3 removes a batch of members (``members``, with static instance ids) and
  answers per member.
- v5 adds a per-member leave ``reason``.
"""

from kcoord.protocol.schema import F, S, Api

LEAVE_GROUP = Api(
    key=13,
    name="LeaveGroup",
    versions="0-5",
    flexible="4+",
    request=S(
        F("group_id", "string"),
        F("member_id", "string", v="0-2"),
        F("members", [S(
            F("member_id", "string", v="3+"),
            F("group_instance_id", "string", v="3+", nullable="3+", default=None),
            F("reason", "string", v="5+", nullable="5+", default=None),
        )], v="3+"),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="1+"),
        F("error_code", "int16"),
        F("members", [S(
            F("member_id", "string", v="3+"),
            F("group_instance_id", "string", v="3+", nullable="3+"),
            F("error_code", "int16", v="3+"),
        )], v="3+"),
    ),
)
