"""OffsetForLeaderEpoch (key 23): versions 0-4, flexible from 4.

Version notes:
- v1 answers the leader epoch found; v2 adds ``current_leader_epoch`` (fencing)
  and the throttle time; v3 the requesting ``replica_id`` (-1 for consumers).
"""

from kcoord.protocol.schema import F, S, Api

OFFSET_FOR_LEADER_EPOCH = Api(
    key=23,
    name="OffsetForLeaderEpoch",
    versions="0-4",
    flexible="4+",
    request=S(
        F("replica_id", "int32", v="3+", default=-2),
        F("topics", [S(
            F("topic", "string"),
            F("partitions", [S(
                F("partition", "int32"),
                F("current_leader_epoch", "int32", v="2+", default=-1),
                F("leader_epoch", "int32"),
            )]),
        )]),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="2+"),
        F("topics", [S(
            F("topic", "string"),
            F("partitions", [S(
                F("error_code", "int16"),
                F("partition", "int32"),
                F("leader_epoch", "int32", v="1+", default=-1),
                F("end_offset", "int64"),
            )]),
        )]),
    ),
)
