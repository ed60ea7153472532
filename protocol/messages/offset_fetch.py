"""OffsetFetch (key 9): versions 0-10, flexible from 6.

Version notes:
- v0-7 ask for one group; ``topics`` null (v2+) asks for every committed
  offset of the group. v2 adds a top-level error code, v3 the throttle time,
  v5 ``committed_leader_epoch``, v7 ``require_stable``.
- v8 batches groups: ``groups`` replaces ``group_id``/``topics`` and the
  answer moves into per-group entries with their own error code.
- v9 adds ``member_id`` and ``member_epoch`` for consumer-protocol members.
- v10 names topics by id instead of name (KIP-848).
"""

from kcoord.protocol.schema import F, S, Api

OFFSET_FETCH = Api(
    key=9,
    name="OffsetFetch",
    versions="0-10",
    flexible="6+",
    request=S(
        F("group_id", "string", v="0-7"),
        F("topics", [S(
            F("name", "string", v="0-7"),
            F("partition_indexes", ["int32"], v="0-7"),
        )], v="0-7", nullable="2-7"),
        F("groups", [S(
            F("group_id", "string", v="8+"),
            F("member_id", "string", v="9+", nullable="9+", default=None),
            F("member_epoch", "int32", v="9+", default=-1),
            F("topics", [S(
                F("name", "string", v="8-9", default=""),
                F("topic_id", "uuid", v="10+"),
                F("partition_indexes", ["int32"], v="8+"),
            )], v="8+", nullable="8+"),
        )], v="8+"),
        F("require_stable", "bool", v="7+", default=False),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="3+"),
        F("topics", [S(
            F("name", "string", v="0-7"),
            F("partitions", [S(
                F("partition_index", "int32", v="0-7"),
                F("committed_offset", "int64", v="0-7"),
                F("committed_leader_epoch", "int32", v="5-7", default=-1),
                F("metadata", "string", v="0-7", nullable="0-7"),
                F("error_code", "int16", v="0-7"),
            )], v="0-7"),
        )], v="0-7"),
        F("error_code", "int16", v="2-7", default=0),
        F("groups", [S(
            F("group_id", "string", v="8+"),
            F("topics", [S(
                F("name", "string", v="8-9", default=""),
                F("topic_id", "uuid", v="10+"),
                F("partitions", [S(
                    F("partition_index", "int32", v="8+"),
                    F("committed_offset", "int64", v="8+"),
                    F("committed_leader_epoch", "int32", v="8+", default=-1),
                    F("metadata", "string", v="8+", nullable="8+"),
                    F("error_code", "int16", v="8+"),
                )], v="8+"),
            )], v="8+"),
            F("error_code", "int16", v="8+", default=0),
        )], v="8+"),
    ),
)
