"""DescribeTopicPartitions (key 75): version 0, flexible.

Version notes:
- v0 (KIP-966) asks for named topics, or every topic when ``topics`` is empty,
  and pages through their partitions: ``response_partition_limit`` caps the
  partitions of one answer, ``cursor`` (nullable) says where to start, and the
  answer's ``next_cursor`` (null when nothing is left) where the next page
  starts.
- Each partition carries its eligible leader replicas and last known ELR, both
  nullable arrays.
"""

from kcoord.protocol.schema import F, S, Api


def _cursor() -> S:
    return S(
        F("topic_name", "string"),
        F("partition_index", "int32"),
    )


DESCRIBE_TOPIC_PARTITIONS = Api(
    key=75,
    name="DescribeTopicPartitions",
    versions="0",
    flexible="0+",
    request=S(
        F("topics", [S(
            F("name", "string"),
        )]),
        F("response_partition_limit", "int32", default=2000),
        F("cursor", _cursor(), nullable="0+", default=None),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("topics", [S(
            F("error_code", "int16"),
            F("name", "string", nullable="0+", default=None),
            F("topic_id", "uuid"),
            F("is_internal", "bool", default=False),
            F("partitions", [S(
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", default=-1),
                F("replica_nodes", ["int32"]),
                F("isr_nodes", ["int32"]),
                F("eligible_leader_replicas", ["int32"], nullable="0+", default=None),
                F("last_known_elr", ["int32"], nullable="0+", default=None),
                F("offline_replicas", ["int32"]),
            )]),
            F("topic_authorized_operations", "int32", default=-2147483648),
        )]),
        F("next_cursor", _cursor(), nullable="0+", default=None),
    ),
)
