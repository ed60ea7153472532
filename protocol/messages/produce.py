"""Produce (key 0): versions 0-13, flexible from 9.

Version notes:
- v0-2 carry legacy message sets (magic 0/1); v3 and later one record batch
  (magic 2) per partition, and ``transactional_id``.
- v2 answers ``log_append_time_ms``; v5 ``log_start_offset``; v8 per-batch
  record errors and an error message.
- v10 answers, in tags, the current leader of a partition that moved and the
  endpoints of the new leaders; v11 and v12 change nothing on the wire.
- v13 names topics by ``topic_id`` instead of ``name``, asked and answered.
- ``records`` is passed through as raw bytes; null only when empty.

The generated codec serves it (``protocol.generated``): it reads ``records`` as
a view of the frame, so a batch is not copied between the socket and the log.
"""

from kcoord.protocol.schema import F, S, Api

PRODUCE = Api(
    key=0,
    name="Produce",
    versions="0-13",
    flexible="9+",
    request=S(
        F("transactional_id", "string", v="3+", nullable="3+", default=None),
        F("acks", "int16"),
        F("timeout_ms", "int32"),
        F("topic_data", [S(
            F("name", "string", v="0-12", default=""),
            F("topic_id", "uuid", v="13+"),
            F("partition_data", [S(
                F("index", "int32"),
                F("records", "records", nullable="0+"),
            )]),
        )]),
    ),
    response=S(
        F("responses", [S(
            F("name", "string", v="0-12", default=""),
            F("topic_id", "uuid", v="13+"),
            F("partition_responses", [S(
                F("index", "int32"),
                F("error_code", "int16"),
                F("base_offset", "int64"),
                F("log_append_time_ms", "int64", v="2+", default=-1),
                F("log_start_offset", "int64", v="5+", default=-1),
                F("record_errors", [S(
                    F("batch_index", "int32", v="8+"),
                    F("batch_index_error_message", "string", v="8+", nullable="8+", default=None),
                )], v="8+"),
                F("error_message", "string", v="8+", nullable="8+", default=None),
                F("current_leader", S(
                    F("leader_id", "int32", v="10+", default=-1),
                    F("leader_epoch", "int32", v="10+", default=-1),
                ), v="10+", tag=0),
            )]),
        )]),
        F("throttle_time_ms", "int32", v="1+", default=0),
        F("node_endpoints", [S(
            F("node_id", "int32", v="10+"),
            F("host", "string", v="10+"),
            F("port", "int32", v="10+"),
            F("rack", "string", v="10+", nullable="10+", default=None),
        )], v="10+", tag=0),
    ),
    generated=True,
)
