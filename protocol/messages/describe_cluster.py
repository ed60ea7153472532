"""DescribeCluster (key 60): versions 0-2, flexible in all versions.

Version notes:
- v1 adds ``endpoint_type`` (1 brokers, 2 controllers) to the request and
  echoes it in the answer.
- v2 adds ``include_fenced_brokers`` to the request and each broker's
  ``is_fenced`` to the answer (KIP-1073).
"""

from kcoord.protocol.schema import F, S, Api

DESCRIBE_CLUSTER = Api(
    key=60,
    name="DescribeCluster",
    versions="0-2",
    flexible="0+",
    request=S(
        F("include_cluster_authorized_operations", "bool"),
        F("endpoint_type", "int8", v="1+", default=1),
        F("include_fenced_brokers", "bool", v="2+", default=False),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("endpoint_type", "int8", v="1+", default=1),
        F("cluster_id", "string"),
        F("controller_id", "int32", default=-1),
        F("brokers", [S(
            F("broker_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", nullable="0+", default=None),
            F("is_fenced", "bool", v="2+", default=False),
        )]),
        F("cluster_authorized_operations", "int32", default=-2147483648),
    ),
)
