"""DescribeProducers (key 61): version 0, flexible: the producers a partition
remembers (idempotent and transactional), as ``kafka-transactions
describe-producers`` lists them."""

from kcoord.protocol.schema import F, S, Api

DESCRIBE_PRODUCERS = Api(
    key=61,
    name="DescribeProducers",
    versions="0",
    flexible="0+",
    request=S(
        F("topics", [S(
            F("name", "string"),
            F("partition_indexes", ["int32"]),
        )]),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("topics", [S(
            F("name", "string"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
                F("active_producers", [S(
                    F("producer_id", "int64"),
                    F("producer_epoch", "int32"),
                    F("last_sequence", "int32", default=-1),
                    F("last_timestamp", "int64", default=-1),
                    F("coordinator_epoch", "int32"),
                    F("current_txn_start_offset", "int64", default=-1),
                )]),
            )]),
        )]),
    ),
)
