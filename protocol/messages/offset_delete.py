"""OffsetDelete (key 47): version 0 only, never flexible.
"""

from kcoord.protocol.schema import F, S, Api

OFFSET_DELETE = Api(
    key=47,
    name="OffsetDelete",
    versions="0",
    flexible=None,
    request=S(
        F("group_id", "string"),
        F("topics", [S(
            F("name", "string"),
            F("partitions", [S(
                F("partition_index", "int32"),
            )]),
        )]),
    ),
    response=S(
        F("error_code", "int16"),
        F("throttle_time_ms", "int32"),
        F("topics", [S(
            F("name", "string"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("error_code", "int16"),
            )]),
        )]),
    ),
)
