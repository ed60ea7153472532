"""A transactional id's state (Kafka's ``TransactionMetadata`` and
``TransactionState``), as the transaction coordinator keeps it and as its
``__transaction_state`` record says it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcoord.protocol.txn_records import TransactionState

NO_PRODUCER_ID = -1
NO_EPOCH = -1
# An epoch this high is the last one a producer id may have: the next bump
# takes a new producer id (TransactionMetadata.isEpochExhausted).
EXHAUSTED_EPOCH = 32767 - 1


# TransactionState ids, as written in TransactionLogValue.transaction_status.
TxnState = TransactionState


COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1  # when the ongoing transaction began
    last_update_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_EPOCH
    client_transaction_version: int = 0
    # A write of this id's record is in flight: other requests wait for it
    # (CONCURRENT_TRANSACTIONS), as Kafka's pendingState makes them.
    pending: bool = False

    def record_fields(self) -> dict:
        """The TransactionLogValue of this state."""
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            topics.setdefault(topic, []).append(partition)
        return {
            "producer_id": self.producer_id,
            "previous_producer_id": self.previous_producer_id,
            "next_producer_id": self.next_producer_id,
            "producer_epoch": self.producer_epoch,
            "transaction_timeout_ms": self.timeout_ms,
            "transaction_status": int(self.state),
            "transaction_partitions": [{"topic": t, "partition_ids": ps}
                                       for t, ps in topics.items()],
            "transaction_last_update_timestamp_ms": self.last_update_ms,
            "transaction_start_timestamp_ms": self.start_ms,
            "client_transaction_version": self.client_transaction_version,
        }

    @classmethod
    def from_record(cls, transactional_id: str, value: dict) -> "TxnMetadata":
        partitions = {(t["topic"], p) for t in value.get("transaction_partitions") or ()
                      for p in t["partition_ids"]}
        return cls(
            transactional_id=transactional_id,
            producer_id=value["producer_id"],
            producer_epoch=value["producer_epoch"],
            timeout_ms=value["transaction_timeout_ms"],
            state=TxnState(value["transaction_status"]),
            partitions=partitions,
            start_ms=value.get("transaction_start_timestamp_ms", -1),
            last_update_ms=value.get("transaction_last_update_timestamp_ms", -1),
            previous_producer_id=value.get("previous_producer_id", NO_PRODUCER_ID),
            next_producer_id=value.get("next_producer_id", NO_PRODUCER_ID),
            client_transaction_version=value.get("client_transaction_version", 0),
        )
