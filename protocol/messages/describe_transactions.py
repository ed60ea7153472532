"""DescribeTransactions (key 65): version 0, flexible: the state of
transactional ids as their coordinator knows it (``kafka-transactions
describe``). ``transaction_state`` is the state's name (``Ongoing``,
``CompleteCommit``, ...); ``topics`` lists the partitions in the transaction."""

from kcoord.protocol.schema import F, S, Api

DESCRIBE_TRANSACTIONS = Api(
    key=65,
    name="DescribeTransactions",
    versions="0",
    flexible="0+",
    request=S(
        F("transactional_ids", ["string"]),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("transaction_states", [S(
            F("error_code", "int16"),
            F("transactional_id", "string"),
            F("transaction_state", "string"),
            F("transaction_timeout_ms", "int32"),
            F("transaction_start_time_ms", "int64"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("topics", [S(
                F("topic", "string"),
                F("partitions", ["int32"]),
            )]),
        )]),
    ),
)
