"""Metadata (key 3): versions 0-13, flexible from 9.

Version notes:
- v0: ``topics`` is a plain array and an empty one asks for every topic.
  From v1 the array is nullable: null asks for every topic, empty for none.
- v1 adds the rack, the controller id and the internal flag; v2 the cluster
  id; v3 the throttle time; v5 offline replicas; v7 leader epochs.
- v4 adds ``allow_auto_topic_creation``; it defaults to true so that older
  versions keep auto-creating topics.
- v8-10 carry the cluster authorized operations (moved to DescribeCluster
  after v10); v8+ the topic authorized operations.
- v10 adds topic ids; from v12 a topic may be asked for by id alone, and a
  topic unknown by id comes back with a null name.
- v13 adds a top-level ``error_code`` (KIP-1102).
"""

from kcoord.protocol.schema import F, S, Api

METADATA = Api(
    key=3,
    name="Metadata",
    versions="0-13",
    flexible="9+",
    request=S(
        F("topics", [S(
            F("topic_id", "uuid", v="10+"),
            F("name", "string", nullable="10+"),
        )], nullable="1+"),
        F("allow_auto_topic_creation", "bool", v="4+", default=True),
        F("include_cluster_authorized_operations", "bool", v="8-10"),
        F("include_topic_authorized_operations", "bool", v="8+"),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="3+"),
        F("brokers", [S(
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", v="1+", nullable="1+", default=None),
        )]),
        F("cluster_id", "string", v="2+", nullable="2+", default=None),
        F("controller_id", "int32", v="1+", default=-1),
        F("topics", [S(
            F("error_code", "int16"),
            F("name", "string", nullable="12+"),
            F("topic_id", "uuid", v="10+"),
            F("is_internal", "bool", v="1+", default=False),
            F("partitions", [S(
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", v="7+", default=-1),
                F("replica_nodes", ["int32"]),
                F("isr_nodes", ["int32"]),
                F("offline_replicas", ["int32"], v="5+"),
            )]),
            F("topic_authorized_operations", "int32", v="8+", default=-2147483648),
        )]),
        F("cluster_authorized_operations", "int32", v="8-10", default=-2147483648),
        F("error_code", "int16", v="13+", default=0),
    ),
    # Asked by every client at start and on every refresh, listing every
    # partition: generated (protocol.generated), byte-identical to construct's.
    generated=True,
)
