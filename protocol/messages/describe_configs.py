"""DescribeConfigs (key 32): versions 0-4, flexible from 4.

Version notes:
- ``configuration_keys`` null (or empty) asks for every config of the resource.
- v0 answers ``is_default``; from v1 ``config_source`` replaces it, and
  ``include_synonyms`` asks for the synonym list.
- v3 adds ``include_documentation`` and answers the config type and its
  documentation.
"""

from kcoord.protocol.schema import F, S, Api

DESCRIBE_CONFIGS = Api(
    key=32,
    name="DescribeConfigs",
    versions="0-4",
    flexible="4+",
    request=S(
        F("resources", [S(
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configuration_keys", ["string"], nullable="0+"),
        )]),
        F("include_synonyms", "bool", v="1+", default=False),
        F("include_documentation", "bool", v="3+", default=False),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("results", [S(
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", [S(
                F("name", "string"),
                F("value", "string", nullable="0+"),
                F("read_only", "bool"),
                F("is_default", "bool", v="0"),
                F("config_source", "int8", v="1+", default=-1),
                F("is_sensitive", "bool"),
                F("synonyms", [S(
                    F("name", "string", v="1+"),
                    F("value", "string", v="1+", nullable="0+"),
                    F("source", "int8", v="1+"),
                )], v="1+"),
                F("config_type", "int8", v="3+", default=0),
                F("documentation", "string", v="3+", nullable="0+"),
            )]),
        )]),
    ),
)
