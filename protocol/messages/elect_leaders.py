"""ElectLeaders (key 43): versions 0-2, flexible from 2.

Version notes: v1 adds the election type (0 preferred, 1 unclean) and a
top-level error code.  ``topic_partitions`` null asks for every partition.
"""

from kcoord.protocol.schema import F, S, Api

ELECT_LEADERS = Api(
    key=43,
    name="ElectLeaders",
    versions="0-2",
    flexible="2+",
    request=S(
        F("election_type", "int8", v="1+", default=0),
        F("topic_partitions", [S(
            F("topic", "string"),
            F("partitions", ["int32"]),
        )], nullable="0+"),
        F("timeout_ms", "int32", default=60000),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", v="1+", default=0),
        F("replica_election_results", [S(
            F("topic", "string"),
            F("partition_result", [S(
                F("partition_id", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            )]),
        )]),
    ),
)
