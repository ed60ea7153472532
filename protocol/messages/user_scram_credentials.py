"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51):
version 0, flexible: the SCRAM credentials of users, as ``kafka-configs
--entity-type users`` lists and changes them (mechanism 1 is SCRAM-SHA-256, 2
SCRAM-SHA-512).  The client salts the password; the broker never sees it."""

from kcoord.protocol.schema import F, S, Api

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    key=50,
    name="DescribeUserScramCredentials",
    versions="0",
    flexible="0+",
    request=S(
        F("users", [S(
            F("name", "string"),
        )], nullable="0+", default=None),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("results", [S(
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("credential_infos", [S(
                F("mechanism", "int8"),
                F("iterations", "int32"),
            )]),
        )]),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS = Api(
    key=51,
    name="AlterUserScramCredentials",
    versions="0",
    flexible="0+",
    request=S(
        F("deletions", [S(
            F("name", "string"),
            F("mechanism", "int8"),
        )]),
        F("upsertions", [S(
            F("name", "string"),
            F("mechanism", "int8"),
            F("iterations", "int32"),
            F("salt", "bytes"),
            F("salted_password", "bytes"),
        )]),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("results", [S(
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
        )]),
    ),
)
