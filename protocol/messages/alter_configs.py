"""AlterConfigs (key 33): versions 0-2, flexible from 2; IncrementalAlterConfigs
(key 44): versions 0-1, flexible from 1.

AlterConfigs replaces a resource's whole set of dynamic configs with the
ones listed; IncrementalAlterConfigs changes the named ones only, each by
its operation: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT (list configs only).
"""

from kcoord.protocol.schema import F, S, Api

_RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("responses", [S(
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("resource_type", "int8"),
        F("resource_name", "string"),
    )]),
)

ALTER_CONFIGS = Api(
    key=33,
    name="AlterConfigs",
    versions="0-2",
    flexible="2+",
    request=S(
        F("resources", [S(
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", [S(
                F("name", "string"),
                F("value", "string", nullable="0+"),
            )]),
        )]),
        F("validate_only", "bool"),
    ),
    response=_RESPONSE,
)

INCREMENTAL_ALTER_CONFIGS = Api(
    key=44,
    name="IncrementalAlterConfigs",
    versions="0-1",
    flexible="1+",
    request=S(
        F("resources", [S(
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", [S(
                F("name", "string"),
                F("config_operation", "int8"),
                F("value", "string", nullable="0+"),
            )]),
        )]),
        F("validate_only", "bool"),
    ),
    response=_RESPONSE,
)
