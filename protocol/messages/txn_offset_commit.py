"""TxnOffsetCommit (key 28): versions 0-6, flexible from 3.

A transactional producer's offset commit, sent to the group coordinator: the
offsets become visible when the transaction commits.

Version notes:
- v1 changes nothing on the wire (throttling); v2 adds
  ``committed_leader_epoch``.
- v3 is the first flexible version and adds the group membership
  (``generation_id_or_member_epoch``, ``member_id``, ``group_instance_id``)
  so that a zombie member's commit is fenced.
- v4 and v5 change nothing on the wire (KIP-890: TRANSACTION_ABORTABLE; v5
  implicitly adds the offsets partition to the transaction).
- v6 names topics by id instead of name (KIP-1319).
"""

from kcoord.protocol.schema import F, S, Api

TXN_OFFSET_COMMIT = Api(
    key=28,
    name="TxnOffsetCommit",
    versions="0-6",
    flexible="3+",
    request=S(
        F("transactional_id", "string"),
        F("group_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("generation_id_or_member_epoch", "int32", v="3+", default=-1),
        F("member_id", "string", v="3+", default=""),
        F("group_instance_id", "string", v="3+", nullable="3+", default=None),
        F("topics", [S(
            F("name", "string", v="0-5"),
            F("topic_id", "uuid", v="6+"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", v="2+", default=-1),
                F("committed_metadata", "string", nullable="0+"),
            )]),
        )]),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("topics", [S(
            F("name", "string", v="0-5"),
            F("topic_id", "uuid", v="6+"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("error_code", "int16"),
            )]),
        )]),
    ),
)
