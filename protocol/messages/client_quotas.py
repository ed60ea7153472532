"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49): versions 0-1,
flexible from 1: quotas of users, client ids and their defaults (entity
name null), as ``kafka-configs --entity-type users|clients`` lists and sets
them (producer_byte_rate, consumer_byte_rate, request_percentage ...)."""

from kcoord.protocol.schema import F, S, Api

_ENTITY = [S(
    F("entity_type", "string"),
    F("entity_name", "string", nullable="0+", default=None),
)]

DESCRIBE_CLIENT_QUOTAS = Api(
    key=48,
    name="DescribeClientQuotas",
    versions="0-1",
    flexible="1+",
    request=S(
        F("components", [S(
            F("entity_type", "string"),
            F("match_type", "int8"),
            F("match", "string", nullable="0+", default=None),
        )]),
        F("strict", "bool"),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("entries", [S(
            F("entity", _ENTITY),
            # Kafka's "Values" (``values`` is a method of every message here)
            F("quota_values", [S(
                F("key", "string"),
                F("value", "float64"),
            )]),
        )], nullable="0+", default=None),
    ),
)

ALTER_CLIENT_QUOTAS = Api(
    key=49,
    name="AlterClientQuotas",
    versions="0-1",
    flexible="1+",
    request=S(
        F("entries", [S(
            F("entity", _ENTITY),
            F("ops", [S(
                F("key", "string"),
                F("value", "float64"),
                F("remove", "bool"),
            )]),
        )]),
        F("validate_only", "bool"),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("entries", [S(
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("entity", _ENTITY),
        )]),
    ),
)
