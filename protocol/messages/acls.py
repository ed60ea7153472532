"""DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31): versions
1-3 (Kafka 4.x dropped v0, which had no pattern type), flexible from 2.

Codes: resource type 2 TOPIC, 3 GROUP, 4 CLUSTER, 5 TRANSACTIONAL_ID, 6
DELEGATION_TOKEN, 7 USER (1 ANY in filters); pattern type 3 LITERAL, 4
PREFIXED (1 ANY, 2 MATCH in filters); operation 2 ALL, 3 READ, 4 WRITE, 5
CREATE, 6 DELETE, 7 ALTER, 8 DESCRIBE, 9 CLUSTER_ACTION, 10 DESCRIBE_CONFIGS,
11 ALTER_CONFIGS, 12 IDEMPOTENT_WRITE, 13 CREATE_TOKENS, 14 DESCRIBE_TOKENS,
15 TWO_PHASE_COMMIT (1 ANY in filters); permission 2 DENY, 3 ALLOW (1 ANY)."""

from kcoord.protocol.schema import F, S, Api

# An ACL filter: DescribeAcls' request, each of DeleteAcls' filters.
_FILTER = (
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "string", nullable="0+", default=None),
    F("pattern_type_filter", "int8", default=3),
    F("principal_filter", "string", nullable="0+", default=None),
    F("host_filter", "string", nullable="0+", default=None),
    F("operation", "int8"),
    F("permission_type", "int8"),
)

DESCRIBE_ACLS = Api(
    key=29,
    name="DescribeAcls",
    versions="1-3",
    flexible="2+",
    request=S(*_FILTER),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("resources", [S(
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", default=3),
            F("acls", [S(
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            )]),
        )]),
    ),
)

CREATE_ACLS = Api(
    key=30,
    name="CreateAcls",
    versions="1-3",
    flexible="2+",
    request=S(
        F("creations", [S(
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("resource_pattern_type", "int8", default=3),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        )]),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("results", [S(
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
        )]),
    ),
)

DELETE_ACLS = Api(
    key=31,
    name="DeleteAcls",
    versions="1-3",
    flexible="2+",
    request=S(
        F("filters", [S(*_FILTER)]),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("filter_results", [S(
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("matching_acls", [S(
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F("pattern_type", "int8", default=3),
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            )]),
        )]),
    ),
)
