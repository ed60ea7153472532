"""AddPartitionsToTxn (key 24): versions 0-5, flexible from 3.

Version notes:
- v0-3 add the partitions of one transaction (the ``v3_and_below_*`` fields,
  answered in ``results_by_topic_v3_and_below``): what producers send.
- v1 and v2 change nothing on the wire (throttling, PRODUCER_FENCED).
- v4 batches transactions (``transactions``, answered per transaction in
  ``results_by_transaction`` with a top-level ``error_code``) and adds
  ``verify_only``: the form brokers send to the coordinator (KIP-890).
- v5 changes nothing on the wire (TRANSACTION_ABORTABLE).
"""

from kcoord.protocol.schema import F, S, Api

_TOPIC = S(
    F("name", "string"),
    F("partitions", ["int32"]),
)

_TOPIC_RESULT = S(
    F("name", "string"),
    F("results_by_partition", [S(
        F("partition_index", "int32"),
        F("partition_error_code", "int16"),
    )]),
)

ADD_PARTITIONS_TO_TXN = Api(
    key=24,
    name="AddPartitionsToTxn",
    versions="0-5",
    flexible="3+",
    request=S(
        F("transactions", [S(
            F("transactional_id", "string", v="4+"),
            F("producer_id", "int64", v="4+"),
            F("producer_epoch", "int16", v="4+"),
            F("verify_only", "bool", v="4+", default=False),
            F("topics", [_TOPIC], v="4+"),
        )], v="4+"),
        F("v3_and_below_transactional_id", "string", v="0-3"),
        F("v3_and_below_producer_id", "int64", v="0-3"),
        F("v3_and_below_producer_epoch", "int16", v="0-3"),
        F("v3_and_below_topics", [_TOPIC], v="0-3"),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", v="4+"),
        F("results_by_transaction", [S(
            F("transactional_id", "string", v="4+"),
            F("topic_results", [_TOPIC_RESULT], v="4+"),
        )], v="4+"),
        F("results_by_topic_v3_and_below", [_TOPIC_RESULT], v="0-3"),
    ),
)
