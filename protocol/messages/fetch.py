"""Fetch (key 1): versions 0-18, flexible from 12.

Version notes:
- v3 adds ``max_bytes``; v4 ``isolation_level``, the last stable offset and
  aborted transactions; v5 log start offsets.
- v7 adds fetch sessions (``session_id``/``session_epoch``, forgotten topics).
- v9 adds ``current_leader_epoch``; v11 ``rack_id`` and the preferred read
  replica; v12 ``last_fetched_epoch`` and tagged diverging epoch, current
  leader and snapshot id.
- v13 names topics by ``topic_id`` instead of name; v15 replaces
  ``replica_id`` with the tagged ``replica_state``; v16 answers node
  endpoints; v17 adds the replica directory id; v18 the high watermark a
  follower knows (KIP-1166, tagged; a consumer leaves it at its default).
- ``records`` is passed through as raw bytes.
"""

from kcoord.protocol.schema import F, S, Api

FETCH = Api(
    key=1,
    name="Fetch",
    versions="0-18",
    flexible="12+",
    request=S(
        F("cluster_id", "string", v="12+", nullable="12+", tag=0, default=None),
        F("replica_id", "int32", v="0-14", default=-1),
        F("replica_state", S(
            F("replica_id", "int32", v="15+", default=-1),
            F("replica_epoch", "int64", v="15+", default=-1),
        ), v="15+", tag=1),
        F("max_wait_ms", "int32"),
        F("min_bytes", "int32"),
        F("max_bytes", "int32", v="3+", default=2147483647),
        F("isolation_level", "int8", v="4+", default=0),
        F("session_id", "int32", v="7+", default=0),
        F("session_epoch", "int32", v="7+", default=-1),
        F("topics", [S(
            F("topic", "string", v="0-12"),
            F("topic_id", "uuid", v="13+"),
            F("partitions", [S(
                F("partition", "int32"),
                F("current_leader_epoch", "int32", v="9+", default=-1),
                F("fetch_offset", "int64"),
                F("last_fetched_epoch", "int32", v="12+", default=-1),
                F("log_start_offset", "int64", v="5+", default=-1),
                F("partition_max_bytes", "int32"),
                F("replica_directory_id", "uuid", v="17+", tag=0),
                F("high_watermark", "int64", v="18+", tag=1, default=9223372036854775807),
            )]),
        )]),
        F("forgotten_topics_data", [S(
            F("topic", "string", v="7-12"),
            F("topic_id", "uuid", v="13+"),
            F("partitions", ["int32"], v="7+"),
        )], v="7+"),
        F("rack_id", "string", v="11+", default=''),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="1+"),
        F("error_code", "int16", v="7+"),
        F("session_id", "int32", v="7+", default=0),
        F("responses", [S(
            F("topic", "string", v="0-12"),
            F("topic_id", "uuid", v="13+"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("high_watermark", "int64"),
                F("last_stable_offset", "int64", v="4+", default=-1),
                F("log_start_offset", "int64", v="5+", default=-1),
                F("diverging_epoch", S(
                    F("epoch", "int32", v="12+", default=-1),
                    F("end_offset", "int64", v="12+", default=-1),
                ), v="12+", tag=0),
                F("current_leader", S(
                    F("leader_id", "int32", v="12+", default=-1),
                    F("leader_epoch", "int32", v="12+", default=-1),
                ), v="12+", tag=1),
                F("snapshot_id", S(
                    F("end_offset", "int64", default=-1),
                    F("epoch", "int32", default=-1),
                ), v="12+", tag=2),
                F("aborted_transactions", [S(
                    F("producer_id", "int64", v="4+"),
                    F("first_offset", "int64", v="4+"),
                )], v="4+", nullable="4+"),
                F("preferred_read_replica", "int32", v="11+", default=-1),
                F("records", "records", nullable="0+"),
            )]),
        )]),
        F("node_endpoints", [S(
            F("node_id", "int32", v="16+"),
            F("host", "string", v="16+"),
            F("port", "int32", v="16+"),
            F("rack", "string", v="16+", nullable="16+", default=None),
        )], v="16+", tag=0),
    ),
)
