"""ListGroups (key 16): versions 0-5, flexible from 3.

Version notes:
- v1 adds the throttle time; v2 only changes behaviour.
- v4 adds ``states_filter`` and answers each group's state; v5 adds
  ``types_filter`` and answers each group's type (classic or consumer).
"""

from kcoord.protocol.schema import F, S, Api

LIST_GROUPS = Api(
    key=16,
    name="ListGroups",
    versions="0-5",
    flexible="3+",
    request=S(
        F("states_filter", ["string"], v="4+"),
        F("types_filter", ["string"], v="5+"),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="1+"),
        F("error_code", "int16"),
        F("groups", [S(
            F("group_id", "string"),
            F("protocol_type", "string"),
            F("group_state", "string", v="4+"),
            F("group_type", "string", v="5+"),
        )]),
    ),
)
