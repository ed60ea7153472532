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

The state is rebuilt from the batch headers of the log (``replay``); nothing
here touches files.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
INT32_MAX = 2**31 - 1
NO_EPOCH = -1


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


@dataclass(slots=True)
class ProducerEntry:
    epoch: int = NO_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1

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
            return
        current = entry.last_seq
        in_sequence = first_seq == current + 1 or (first_seq == 0 and current == INT32_MAX)
        if entry.batches and not in_sequence:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {header.producer_id} at offset "
                f"{first_offset} in partition {tp}: {first_seq} (incoming seq. number), "
                f"{current} (current end sequence number)")

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

    def replay(self, header) -> None:
        """Rebuild from a batch header read back from the log."""
        self.update(header, header.base_offset, header.last_offset, header.max_timestamp)

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose every batch is below the log start (retention)."""
        gone = [pid for pid, e in self.producers.items() if e.last_offset < log_start_offset]
        for pid in gone:
            del self.producers[pid]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers silent for ``producer.id.expiration.ms``."""
        gone = [pid for pid, e in self.producers.items()
                if e.last_timestamp >= 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)
