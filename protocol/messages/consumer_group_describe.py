"""ConsumerGroupDescribe (key 69): versions 0-1, flexible from 0 (KIP-848).

Describes consumer-protocol groups: their epochs, assignor, and each member's
subscription, current and target assignment.

Version notes:
- v1 adds each member's type (0 classic, 1 consumer; -1 unknown).
"""

from kcoord.protocol.schema import F, S, Api

_ASSIGNMENT = S(
    F("topic_partitions", [S(
        F("topic_id", "uuid"),
        F("topic_name", "string"),
        F("partitions", ["int32"]),
    )]),
)

CONSUMER_GROUP_DESCRIBE = Api(
    key=69,
    name="ConsumerGroupDescribe",
    versions="0-1",
    flexible="0+",
    request=S(
        F("group_ids", ["string"]),
        F("include_authorized_operations", "bool"),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("groups", [S(
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("group_id", "string"),
            F("group_state", "string"),
            F("group_epoch", "int32"),
            F("assignment_epoch", "int32"),
            F("assignor_name", "string"),
            F("members", [S(
                F("member_id", "string"),
                F("instance_id", "string", nullable="0+", default=None),
                F("rack_id", "string", nullable="0+", default=None),
                F("member_epoch", "int32"),
                F("client_id", "string"),
                F("client_host", "string"),
                F("subscribed_topic_names", ["string"]),
                F("subscribed_topic_regex", "string", nullable="0+", default=None),
                F("assignment", _ASSIGNMENT),
                F("target_assignment", _ASSIGNMENT),
                F("member_type", "int8", v="1+", default=-1),
            )]),
            F("authorized_operations", "int32", default=-2147483648),
        )]),
    ),
)
