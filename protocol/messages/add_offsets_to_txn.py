"""AddOffsetsToTxn (key 25): versions 0-4, flexible from 3.

Adds a group's offsets topic partition to a transaction, before the producer
sends TxnOffsetCommit to that group's coordinator.

Version notes:
- v1, v2 and v4 change nothing on the wire (throttling, PRODUCER_FENCED,
  TRANSACTION_ABORTABLE); v3 is the first flexible version.
"""

from kcoord.protocol.schema import F, S, Api

ADD_OFFSETS_TO_TXN = Api(
    key=25,
    name="AddOffsetsToTxn",
    versions="0-4",
    flexible="3+",
    request=S(
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("group_id", "string"),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ),
)
