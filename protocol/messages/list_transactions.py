"""ListTransactions (key 66): versions 0-2, flexible: the transactional ids a
coordinator holds (``kafka-transactions list``), filtered by state name,
producer id, duration and id pattern; an empty filter matches everything.

Version notes:
- v1 adds ``duration_filter`` (-1: no filter; KIP-994).
- v2 adds ``transactional_id_pattern``, a regular expression (null or empty:
  no filter; KIP-1152).
"""

from kcoord.protocol.schema import F, S, Api

LIST_TRANSACTIONS = Api(
    key=66,
    name="ListTransactions",
    versions="0-2",
    flexible="0+",
    request=S(
        F("state_filters", ["string"]),
        F("producer_id_filters", ["int64"]),
        F("duration_filter", "int64", v="1+", default=-1),
        F("transactional_id_pattern", "string", v="2+", nullable="2+", default=None),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("unknown_state_filters", ["string"]),
        F("transaction_states", [S(
            F("transactional_id", "string"),
            F("producer_id", "int64"),
            F("transaction_state", "string"),
        )]),
    ),
)
