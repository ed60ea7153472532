"""OffsetCommit (key 8): versions 0-10, flexible from 8.

Version notes:
- v0 carries neither generation nor member id (ZooKeeper-era offsets).
- v1 adds ``generation_id_or_member_epoch`` and ``member_id``, and a
  per-partition ``commit_timestamp`` (v1 only).
- v2-4 carry ``retention_time_ms`` (-1: the broker default); v5 drops it.
- v3 adds the throttle time; v6 ``committed_leader_epoch``; v7 static
  membership (``group_instance_id``).
- v9 lets a consumer-protocol member commit with its member epoch.
- v10 names topics by id instead of name (KIP-848).
"""

from kcoord.protocol.schema import F, S, Api

OFFSET_COMMIT = Api(
    key=8,
    name="OffsetCommit",
    versions="0-10",
    flexible="8+",
    request=S(
        F("group_id", "string"),
        F("generation_id_or_member_epoch", "int32", v="1+", default=-1),
        F("member_id", "string", v="1+"),
        F("group_instance_id", "string", v="7+", nullable="7+", default=None),
        F("retention_time_ms", "int64", v="2-4", default=-1),
        F("topics", [S(
            F("name", "string", v="0-9", default=""),
            F("topic_id", "uuid", v="10+"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", v="6+", default=-1),
                F("commit_timestamp", "int64", v="1", default=-1),
                F("committed_metadata", "string", nullable="0+"),
            )]),
        )]),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="3+"),
        F("topics", [S(
            F("name", "string", v="0-9", default=""),
            F("topic_id", "uuid", v="10+"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("error_code", "int16"),
            )]),
        )]),
    ),
    # Synchronous commits are the hot path of consumer groups: the codec is
    # generated from this table (protocol.generated), byte-identical to construct's.
    generated=True,
)
