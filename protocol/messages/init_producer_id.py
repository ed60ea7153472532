"""InitProducerId (key 22): versions 0-6, flexible from 2.

Version notes:
- ``transactional_id`` null asks for an idempotent producer id.
- v3 adds ``producer_id`` and ``producer_epoch`` so that a producer can bump
  its epoch after an error (-1/-1 for a new producer).
- v4 and v5 change nothing on the wire (new error codes).
- v6 (two-phase commit, KIP-939; still marked unstable in Kafka 4.4) adds
  ``enable2_pc`` and ``keep_prepared_txn`` to the request and, in the answer,
  the ongoing transaction's ``ongoing_txn_producer_id`` and
  ``ongoing_txn_producer_epoch`` (-1/-1 when there is none).
"""

from kcoord.protocol.schema import F, S, Api

INIT_PRODUCER_ID = Api(
    key=22,
    name="InitProducerId",
    versions="0-6",
    flexible="2+",
    request=S(
        F("transactional_id", "string", nullable="0+"),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", v="3+", default=-1),
        F("producer_epoch", "int16", v="3+", default=-1),
        F("enable2_pc", "bool", v="6+", default=False),
        F("keep_prepared_txn", "bool", v="6+", default=False),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", default=-1),
        F("producer_epoch", "int16"),
        F("ongoing_txn_producer_id", "int64", v="6+", default=-1),
        F("ongoing_txn_producer_epoch", "int16", v="6+", default=-1),
    ),
)
