"""ListConfigResources (key 74): versions 0-1, flexible from 0.

Version notes: v0 was ListClientMetricsResources (KIP-714) and lists client
metrics resources only; v1 (KIP-1142) asks for ``resource_types`` (none: every
type the broker lists) and answers each resource's type.
"""

from kcoord.protocol.schema import F, S, Api

LIST_CONFIG_RESOURCES = Api(
    key=74,
    name="ListConfigResources",
    versions="0-1",
    flexible="0+",
    request=S(
        F("resource_types", ["int8"], v="1+"),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("config_resources", [S(
            F("resource_name", "string"),
            F("resource_type", "int8", v="1+", default=16),
        )]),
    ),
)
