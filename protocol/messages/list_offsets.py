"""ListOffsets (key 2): versions 0-11, flexible from 6.

Version notes:
- v0 answers a list of offsets (``old_style_offsets``, at most
  ``max_num_offsets``); from v1 one ``timestamp``/``offset`` pair.
- v2 adds ``isolation_level`` and the throttle time; v4 leader epochs.
- v7 allows timestamp -3 (max timestamp), v8 -4 and v9 -5 (tiered storage);
  v10 adds ``timeout_ms`` (for reads from remote storage); v11 allows -6
  (earliest pending upload).
"""

from kcoord.protocol.schema import F, S, Api

LIST_OFFSETS = Api(
    key=2,
    name="ListOffsets",
    versions="0-11",
    flexible="6+",
    request=S(
        F("replica_id", "int32"),
        F("isolation_level", "int8", v="2+"),
        F("topics", [S(
            F("name", "string"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("current_leader_epoch", "int32", v="4+", default=-1),
                F("timestamp", "int64"),
                F("max_num_offsets", "int32", v="0", default=1),
            )]),
        )]),
        F("timeout_ms", "int32", v="10+", default=0),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="2+"),
        F("topics", [S(
            F("name", "string"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("old_style_offsets", ["int64"], v="0"),
                F("timestamp", "int64", v="1+", default=-1),
                F("offset", "int64", v="1+", default=-1),
                F("leader_epoch", "int32", v="4+", default=-1),
            )]),
        )]),
    ),
)
