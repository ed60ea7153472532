"""DescribeLogDirs (key 35): versions 1-5, flexible from 2.

Version notes: v3 adds a top-level error code; v4 each directory's total and
usable bytes; v5 whether a directory is cordoned.  ``topics`` null asks for
every partition.
"""

from kcoord.protocol.schema import F, S, Api

DESCRIBE_LOG_DIRS = Api(
    key=35,
    name="DescribeLogDirs",
    versions="1-5",
    flexible="2+",
    request=S(
        F("topics", [S(
            F("topic", "string"),
            F("partitions", ["int32"]),
        )], nullable="0+"),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", v="3+", default=0),
        F("results", [S(
            F("error_code", "int16"),
            F("log_dir", "string"),
            F("topics", [S(
                F("name", "string"),
                F("partitions", [S(
                    F("partition_index", "int32"),
                    F("partition_size", "int64"),
                    F("offset_lag", "int64"),
                    F("is_future_key", "bool"),
                )]),
            )]),
            F("total_bytes", "int64", v="4+", default=-1),
            F("usable_bytes", "int64", v="4+", default=-1),
            F("is_cordoned", "bool", v="5+", default=False),
        )]),
    ),
)
