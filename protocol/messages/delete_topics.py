"""DeleteTopics (key 20): versions 0-6, flexible from 4.

Version notes:
- v0-5 name the topics in ``topic_names``; v6 replaces it with ``topics``,
  each naming a topic by name or by id (the other one null / zero).
- v1 adds the throttle time; v5 per-topic error messages; v6 topic ids in
  the answer, with a null name for a topic unknown by id.
"""

from kcoord.protocol.schema import F, S, Api

DELETE_TOPICS = Api(
    key=20,
    name="DeleteTopics",
    versions="0-6",
    flexible="4+",
    request=S(
        F("topics", [S(
            F("name", "string", v="6+", nullable="6+", default=None),
            F("topic_id", "uuid", v="6+"),
        )], v="6+"),
        F("topic_names", ["string"], v="0-5"),
        F("timeout_ms", "int32"),
    ),
    response=S(
        F("throttle_time_ms", "int32", v="1+"),
        F("responses", [S(
            F("name", "string", nullable="6+"),
            F("topic_id", "uuid", v="6+"),
            F("error_code", "int16"),
            F("error_message", "string", v="5+", nullable="5+", default=None),
        )]),
    ),
)
