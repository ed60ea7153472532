"""AlterPartitionReassignments (key 45): versions 0-1, and
ListPartitionReassignments (key 46): version 0; both flexible.

AlterPartitionReassignments v1 adds ``allow_replication_factor_change``.  A
partition's ``replicas`` null cancels its reassignment; ListPartitionReassignments
with ``topics`` null lists every ongoing one.
"""

from kcoord.protocol.schema import F, S, Api

ALTER_PARTITION_REASSIGNMENTS = Api(
    key=45,
    name="AlterPartitionReassignments",
    versions="0-1",
    flexible="0+",
    request=S(
        F("timeout_ms", "int32", default=60000),
        F("allow_replication_factor_change", "bool", v="1+", default=True),
        F("topics", [S(
            F("name", "string"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("replicas", ["int32"], nullable="0+", default=None),
            )]),
        )]),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("allow_replication_factor_change", "bool", v="1+", default=True),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("responses", [S(
            F("name", "string"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            )]),
        )]),
    ),
)

LIST_PARTITION_REASSIGNMENTS = Api(
    key=46,
    name="ListPartitionReassignments",
    versions="0",
    flexible="0+",
    request=S(
        F("timeout_ms", "int32", default=60000),
        F("topics", [S(
            F("name", "string"),
            F("partition_indexes", ["int32"]),
        )], nullable="0+", default=None),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("topics", [S(
            F("name", "string"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("replicas", ["int32"]),
                F("adding_replicas", ["int32"]),
                F("removing_replicas", ["int32"]),
            )]),
        )]),
    ),
)
