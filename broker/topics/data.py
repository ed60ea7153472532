"""The data plane's shared pieces: finding a partition's log, leader epochs,
the fetch purgatory and producer ids.

* One node leads every partition with leader epoch 0 (what a fresh Kafka
  topic has); it is stamped into every appended batch and reported by
  Metadata, Fetch, ListOffsets and OffsetForLeaderEpoch alike.
* ``FetchWaiters`` is the fetch purgatory: a parked Fetch waits on a future
  that the next append to any of its partitions completes (Kafka's
  DelayedFetch, woken by ``ReplicaManager.appendRecords``), never a polling
  loop.
* ``ProducerIds`` hands out producer ids in blocks of 1,000 and writes the end
  of each block to the data dir before using it, so no id is ever given twice,
  across restarts included (Kafka's ProducerIdsBlock).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from kcoord.storage.layout import OFFSETS_TOPIC
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.files import write_atomically
from kcoord.storage.log import PartitionLog

log = structlog.get_logger("kcoord.data")

LEADER_EPOCH = 0
NO_EPOCH = -1
PRODUCER_ID_BLOCK = 1_000
PRODUCER_IDS_FILE = "kcoord-producer-ids"


def leader_epoch_error(requested: int, *, negative_skips: bool = False) -> ErrorCode:
    """Kafka's fencing rule: -1 skips the check; older is FENCED, newer UNKNOWN.

    Fetch reads any negative epoch as "none given" (FetchRequest.optionalEpoch);
    ListOffsets and OffsetForLeaderEpoch only -1.
    """
    if requested == NO_EPOCH or requested == LEADER_EPOCH or (negative_skips and requested < 0):
        return ErrorCode.NONE
    if requested < LEADER_EPOCH:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


class PartitionView:
    """What a read needs of a partition, including one whose folder does not exist
    yet (``__consumer_offsets`` partitions appear on their first write)."""

    __slots__ = ("log",)

    def __init__(self, plog: PartitionLog | None):
        self.log = plog

    @property
    def log_start_offset(self) -> int:
        return 0 if self.log is None else self.log.log_start_offset

    @property
    def high_watermark(self) -> int:
        return 0 if self.log is None else self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return 0 if self.log is None else self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the high
        watermark (known once the log's producer state is: ``load_producers``)."""
        plog = self.log
        if plog is None:
            return 0
        return plog.last_stable_offset if plog.producers_loaded else plog.high_watermark


async def load_producers(broker, partitions) -> None:
    """Make sure the producer state (open and aborted transactions) of these
    ``(topic, partition)`` logs is loaded: after a restart it is rebuilt once,
    in a worker thread, before the first read that needs it."""
    logs = broker.logs
    for name, partition in partitions:
        plog = logs.get(name, partition) if name is not None else None
        if plog is not None and not plog.producers_loaded:
            try:
                await plog.load_producer_state()
            except Exception:  # the read that follows reports the log's error
                pass


def find_partition(broker, name: str, partition: int) -> PartitionView | None:
    """The partition, or None when the topic or partition does not exist."""
    topic = broker.topics.get(name)
    if topic is None or not 0 <= partition < topic.partitions:
        return None
    plog = broker.logs.get(name, partition)
    if plog is None and name != OFFSETS_TOPIC:
        return None  # being deleted
    return PartitionView(plog)


class FetchWaiters:
    """Parked fetches by partition; an append completes every fetch waiting on it."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, int], set[asyncio.Future]] = {}

    def watch(self, partitions) -> asyncio.Future:
        wake = asyncio.get_running_loop().create_future()
        for tp in partitions:
            self._waiting.setdefault(tp, set()).add(wake)
        return wake

    def unwatch(self, partitions, wake: asyncio.Future) -> None:
        for tp in partitions:
            waiting = self._waiting.get(tp)
            if waiting is not None:
                waiting.discard(wake)
                if not waiting:
                    del self._waiting[tp]

    def notify(self, tp: tuple[str, int]) -> None:
        for wake in self._waiting.pop(tp, ()):
            if not wake.done():
                wake.set_result(None)

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiting.values())

    def parked_on(self, tp: tuple[str, int]) -> int:
        """How many fetches wait on the partition ``tp``."""
        return len(self._waiting.get(tp, ()))


class ProducerIds:
    """Producer ids, never reused: the end of the block in use is on disk first."""

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / PRODUCER_IDS_FILE
        self._next = 0
        self._block_end = 0
        self._lock = asyncio.Lock()

    def load(self) -> None:
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            text = "0"
        try:
            reserved = int(text)
        except ValueError:
            # An unreadable file must not lead to reused ids: start far above
            # anything a block could have reached.
            log.warning("producer_ids.unreadable", path=str(self.path), content=text[:40])
            reserved = 1 << 40
        self._next = self._block_end = max(reserved, 0)

    async def allocate(self) -> int:
        async with self._lock:
            if self._next >= self._block_end:
                end = self._block_end + PRODUCER_ID_BLOCK
                await asyncio.get_running_loop().run_in_executor(
                    None, write_atomically, str(self.path), f"{end}\n")
                self._block_end = end
            pid = self._next
            self._next += 1
            return pid

