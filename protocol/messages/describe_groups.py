"""DescribeGroups (key 15): versions 0-6, flexible from 5.

Version notes:
- v1 adds the throttle time; v2 only changes behaviour.
- v3 adds ``include_authorized_operations`` and the group's authorized
  operations; v4 static members' ``group_instance_id``.
- v6 answers a group it does not describe GROUP_ID_NOT_FOUND with a message
  (KIP-1043) where earlier versions answer the Dead state.
"""

from kcoord.protocol.schema import F, S, Api

DESCRIBE_GROUPS = Api(
    key=15,
    name="DescribeGroups",
    versions="0-6",
    flexible="5+",
    request=S(
        F("groups", ["string"]),
        F("include_authorized_operations", "bool", v="3+"),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="1+"),
        F("groups", [S(
            F("error_code", "int16"),
            F("error_message", "string", v="6+", nullable="6+", default=None),
            F("group_id", "string"),
            F("group_state", "string"),
            F("protocol_type", "string"),
            F("protocol_data", "string"),
            F("members", [S(
                F("member_id", "string"),
                F("group_instance_id", "string", v="4+", nullable="4+", default=None),
                F("client_id", "string"),
                F("client_host", "string"),
                F("member_metadata", "bytes"),
                F("member_assignment", "bytes"),
            )]),
            F("authorized_operations", "int32", v="3+", default=-2147483648),
        )]),
    ),
)
