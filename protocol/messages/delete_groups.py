"""DeleteGroups (key 42): versions 0-3, flexible from 2.

Version notes:
- v1 only changes behaviour (throttling after the response).
- v3 adds a message per group (null where Kafka 4.4's coordinator gives none).
"""

from kcoord.protocol.schema import F, S, Api

DELETE_GROUPS = Api(
    key=42,
    name="DeleteGroups",
    versions="0-3",
    flexible="2+",
    request=S(
        F("groups_names", ["string"]),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("results", [S(
            F("group_id", "string"),
            F("error_code", "int16"),
            F("error_message", "string", v="3+", nullable="3+", default=None),
        )]),
    ),
)
