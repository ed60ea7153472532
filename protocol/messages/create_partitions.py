"""CreatePartitions (key 37): versions 0-3, flexible from 2.

Version notes: v1 only changes how the broker throttles; v2 is the flexible
form; v3 changes nothing on the wire.  ``assignments`` (null: the broker
places the new partitions) lists the replicas of each new partition.
"""

from kcoord.protocol.schema import F, S, Api

CREATE_PARTITIONS = Api(
    key=37,
    name="CreatePartitions",
    versions="0-3",
    flexible="2+",
    request=S(
        F("topics", [S(
            F("name", "string"),
            F("count", "int32"),
            F("assignments", [S(F("broker_ids", ["int32"]))], nullable="0+", default=None),
        )]),
        F("timeout_ms", "int32"),
        F("validate_only", "bool"),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("results", [S(
            F("name", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
        )]),
    ),
)
