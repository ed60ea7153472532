"""WriteTxnMarkers (key 27): versions 1-2, flexible from 1.

Sent by the transaction coordinator to partition leaders: write the commit or
abort markers (``transaction_result`` true commits) of producers' transactions.

Version notes:
- v0 is gone since Kafka 4.0 (its schema no longer declares it): v1, the
  first flexible version, is the baseline.
- v2 adds each marker's ``transaction_version`` (0 and 1 the legacy
  protocol, 2 transactions v2; KIP-1228).
"""

from kcoord.protocol.schema import F, S, Api

WRITE_TXN_MARKERS = Api(
    key=27,
    name="WriteTxnMarkers",
    versions="1-2",
    flexible="1+",
    request=S(
        F("markers", [S(
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("transaction_result", "bool"),
            F("topics", [S(
                F("name", "string"),
                F("partition_indexes", ["int32"]),
            )]),
            F("coordinator_epoch", "int32"),
            F("transaction_version", "int8", v="2+", default=0),
        )]),
    ),
    response=S(
        F("markers", [S(
            F("producer_id", "int64"),
            F("topics", [S(
                F("name", "string"),
                F("partitions", [S(
                    F("partition_index", "int32"),
                    F("error_code", "int16"),
                )]),
            )]),
        )]),
    ),
)
