"""ApiVersions (key 18): versions 0-5, flexible from 3.

v5 (KIP-1242) lets a client name the cluster and the node it means to reach.
"""

from kcoord.protocol.schema import F, S, Api

API_VERSIONS = Api(
    key=18,
    name="ApiVersions",
    versions="0-5",
    flexible="3+",
    request=S(
        F("client_software_name", "string", v="3+"),
        F("client_software_version", "string", v="3+"),
        F("cluster_id", "string", v="5+", nullable="5+", default=None),
        F("node_id", "int32", v="5+", default=-1),
    ),
    response=S(
        F("error_code", "int16"),
        F("api_keys", [S(
            F("api_key", "int16"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        )]),
        F("throttle_time_ms", "int32", v="1+"),
        F("supported_features", [S(
            F("name", "string"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        )], v="3+", tag=0),
        F("finalized_features_epoch", "int64", v="3+", tag=1, default=-1),
        F("finalized_features", [S(
            F("name", "string"),
            F("max_version_level", "int16"),
            F("min_version_level", "int16"),
        )], v="3+", tag=2),
        F("zk_migration_ready", "bool", v="3+", tag=3),
    ),
    # Answered on every new connection, with the whole API table: generated
    # (protocol.generated), byte-identical to construct's.
    generated=True,
)
