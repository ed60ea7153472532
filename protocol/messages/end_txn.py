"""EndTxn (key 26): versions 0-5, flexible from 3.

Ends a transaction: ``committed`` true commits it, false aborts it.

Version notes:
- v1, v2 and v4 change nothing on the wire (throttling, PRODUCER_FENCED,
  TRANSACTION_ABORTABLE); v3 is the first flexible version.
- v5 (transactions v2, KIP-890) bumps the epoch at every transaction end: the
  answer carries the producer id and epoch to use next (-1/-1 by default).
"""

from kcoord.protocol.schema import F, S, Api

END_TXN = Api(
    key=26,
    name="EndTxn",
    versions="0-5",
    flexible="3+",
    request=S(
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("committed", "bool"),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", v="5+", default=-1),
        F("producer_epoch", "int16", v="5+", default=-1),
    ),
)
