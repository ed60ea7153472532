"""CreateTopics (key 19): versions 0-7, flexible from 5.

Version notes:
- v1 adds ``validate_only`` and per-topic error messages; v2 the throttle time.
- v4 lets ``num_partitions`` and ``replication_factor`` be -1 (broker
  defaults) when no assignment is given.
- v5 answers with the partition count, replication factor and configs of the
  created topic (configs null when they could not be described), and a
  tagged ``topic_config_error_code``.
- v7 answers with the topic id.
"""

from kcoord.protocol.schema import F, S, Api

CREATE_TOPICS = Api(
    key=19,
    name="CreateTopics",
    versions="0-7",
    flexible="5+",
    request=S(
        F("topics", [S(
            F("name", "string"),
            F("num_partitions", "int32"),
            F("replication_factor", "int16"),
            F("assignments", [S(
                F("partition_index", "int32"),
                F("broker_ids", ["int32"]),
            )]),
            F("configs", [S(
                F("name", "string"),
                F("value", "string", nullable="0+"),
            )]),
        )]),
        F("timeout_ms", "int32", default=60000),
        F("validate_only", "bool", v="1+", default=False),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="2+"),
        F("topics", [S(
            F("name", "string"),
            F("topic_id", "uuid", v="7+"),
            F("error_code", "int16"),
            F("error_message", "string", v="1+", nullable="0+", default=None),
            F("topic_config_error_code", "int16", v="5+", tag=0),
            F("num_partitions", "int32", v="5+", default=-1),
            F("replication_factor", "int16", v="5+", default=-1),
            F("configs", [S(
                F("name", "string", v="5+"),
                F("value", "string", v="5+", nullable="5+"),
                F("read_only", "bool", v="5+"),
                F("config_source", "int8", v="5+", default=-1),
                F("is_sensitive", "bool", v="5+"),
            )], v="5+", nullable="5+"),
        )]),
    ),
)
