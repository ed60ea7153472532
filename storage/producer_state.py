"""Idempotent producers: what a partition remembers of each producer id.

The state and checks of Kafka's ProducerStateManager, ProducerStateEntry and
ProducerAppendInfo, for batches that carry a producer id (``producer_id >= 0``):

* per producer: its epoch and the metadata of its last five batches
  (first/last sequence, first/last offset, max timestamp);
* a batch equal in epoch and sequence range to one of those five is a
  duplicate: it is not appended, and the producer is answered with the offsets
  the original got (``find_duplicate``);
* an older epoch is refused with INVALID_PRODUCER_EPOCH; a new epoch must start
  at sequence 0 (unless the producer had no epoch yet); within an epoch the
  first sequence must follow the last one (wrapping after 2**31-1), else
  OUT_OF_ORDER_SEQUENCE_NUMBER (``check``);
* a producer the partition knows nothing of may start at any sequence, as
  Kafka accepts (state lost with retention, or a first write).

Transactions (ProducerStateManager's ongoing and aborted transactions): a
producer's first transactional batch opens its transaction at that offset; a
plain batch while it is open is refused (INVALID_TXN_STATE); its end marker
(``end_txn``) closes it, and an abort is remembered as an ``AbortedTxn``
(Kafka's aborted-transaction index entry) for read_committed fetches.  The
last stable offset is the first offset of the earliest open transaction.

The state is rebuilt from the batch headers of the log (``replay``); nothing
here touches files.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from bisect import bisect_left

from kcoord.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
INT32_MAX = 2**31 - 1
NO_EPOCH = -1
ABORT, COMMIT = 0, 1  # ControlRecordType ids of the end markers


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """DefaultRecordBatch.incrementSequence: sequences wrap after Integer.MAX_VALUE."""
    seq = base_sequence + last_offset_delta
    return seq - INT32_MAX - 1 if seq > INT32_MAX else seq


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    """An aborted transaction (Kafka's AbortedTxn, a ``.txnindex`` entry): its
    data lies in [first_offset, last_offset], the marker at last_offset."""
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int = NO_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    txn_first_offset: int = -1  # the open transaction's first offset, -1 if none

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


class ProducerState:
    """The producers of one partition."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> its open transaction's first offset
        self.aborted: list[AbortedTxn] = []  # in marker order
        self._aborted_ends: list[int] = []  # their last offsets, for bisecting

    def __len__(self) -> int:
        return len(self.producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def find_duplicate(self, header) -> BatchMetadata | None:
        """The earlier append of the same batch (same epoch and sequence range), if
        it is among the producer's last five (ProducerStateEntry.findDuplicateBatch)."""
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            return None
        first = header.base_sequence
        last = last_sequence(first, header.last_offset_delta)
        for batch in entry.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        return None

    def check(self, header, first_offset: int, tp: str) -> None:
        """Refuse a client batch whose epoch or sequence does not follow
        (ProducerAppendInfo.checkProducerEpoch and checkSequence)."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return
        epoch, first_seq = header.producer_epoch, header.base_sequence
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {header.producer_id} at offset {first_offset} in {tp} is "
                f"{epoch}, which is smaller than the last seen epoch {entry.epoch}")
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {header.producer_id}at "
                    f"offset {first_offset} in partition {tp}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {entry.epoch} (current producer epoch)")
        else:
            current = entry.last_seq
            in_sequence = first_seq == current + 1 or (first_seq == 0 and current == INT32_MAX)
            if entry.batches and not in_sequence:
                raise OutOfOrderSequenceError(
                    f"Out of order sequence number for producer {header.producer_id} at offset "
                    f"{first_offset} in partition {tp}: {first_seq} (incoming seq. number), "
                    f"{current} (current end sequence number)")
        if entry.txn_first_offset >= 0 and not header.is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {header.producer_id} at offset "
                f"{first_offset} in partition {tp}")

    def update(self, header, first_offset: int, last_offset: int, timestamp: int) -> None:
        """Remember an appended batch (also used when replaying the log)."""
        if header.producer_id < 0 or header.is_control:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry()
        if header.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = header.producer_epoch
        first_seq = header.base_sequence
        entry.batches.append(BatchMetadata(
            first_seq, last_sequence(first_seq, header.last_offset_delta),
            first_offset, last_offset, timestamp))
        entry.last_timestamp = timestamp  # the last batch's, as ProducerStateEntry keeps it
        if header.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = first_offset
            self.ongoing[header.producer_id] = first_offset

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     tp: str) -> None:
        """Refuse an end marker from an older producer epoch or an older
        coordinator (ProducerAppendInfo.appendEndTxnMarker's checks)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {producer_id} is {epoch}, which is smaller than the last "
                f"seen epoch {entry.epoch} in partition {tp}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for producerId {producer_id}: {coordinator_epoch} "
                f"(zombie), {entry.coordinator_epoch} (current) in partition {tp}")

    def end_txn(self, producer_id: int, epoch: int, marker: int, coordinator_epoch: int,
                offset: int, timestamp: int) -> AbortedTxn | None:
        """An end marker at ``offset`` closes the producer's transaction; an abort
        of one that wrote here is remembered (and returned) as an aborted
        transaction (ProducerAppendInfo.appendEndTxnMarker)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry()
        if epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = epoch
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.txn_first_offset
        entry.txn_first_offset = -1
        self.ongoing.pop(producer_id, None)
        if marker != ABORT or first < 0:
            return None  # a commit, or a transaction that wrote nothing here
        unstable = self.first_unstable_offset()
        aborted = AbortedTxn(producer_id, first, offset,
                             offset + 1 if unstable is None else unstable)
        self.aborted.append(aborted)
        self._aborted_ends.append(offset)
        return aborted

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction (None: none open)."""
        return min(self.ongoing.values()) if self.ongoing else None

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions that overlap [start, end)
        (TransactionIndex.collectAbortedTxns)."""
        found = []
        for i in range(bisect_left(self._aborted_ends, start), len(self.aborted)):
            txn = self.aborted[i]
            if txn.first_offset < end:
                found.append(txn)
            if txn.last_stable_offset >= end:
                # Every transaction aborted later began at or after this one's
                # last stable offset, so past the range: the scan stops here, as
                # Kafka's does, however many aborts the log holds after it.
                break
        return found

    def aborted_at(self, producer_id: int, offset: int) -> bool:
        """Whether the producer's batch at ``offset`` belongs to an aborted transaction."""
        for i in range(bisect_left(self._aborted_ends, offset), len(self.aborted)):
            txn = self.aborted[i]
            if txn.producer_id == producer_id and txn.first_offset <= offset:
                return True
        return False

    def replay(self, header, marker: tuple[int, int] | None = None) -> None:
        """Rebuild from a batch header read back from the log; a control batch
        also needs its ``(marker type, coordinator epoch)``."""
        if header.is_control:
            if marker is not None and header.producer_id >= 0:
                self.end_txn(header.producer_id, header.producer_epoch, marker[0], marker[1],
                             header.base_offset, header.max_timestamp)
            return
        self.update(header, header.base_offset, header.last_offset, header.max_timestamp)

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose every batch is below the log start (retention)."""
        gone = [pid for pid, e in self.producers.items()
                if e.last_offset < log_start_offset and e.txn_first_offset < 0]
        for pid in gone:
            del self.producers[pid]
        cut = bisect_left(self._aborted_ends, log_start_offset)
        if cut:
            del self.aborted[:cut]
            del self._aborted_ends[:cut]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers silent for ``producer.id.expiration.ms``."""
        gone = [pid for pid, e in self.producers.items()
                if e.last_timestamp >= 0 and now_ms - e.last_timestamp >= expiration_ms
                and e.txn_first_offset < 0]
        for pid in gone:
            del self.producers[pid]
        return len(gone)
