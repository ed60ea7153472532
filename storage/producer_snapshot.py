"""A partition's producer state in a file (Kafka's producer snapshot,
``<offset>.snapshot``, ProducerStateManager.writeSnapshot, version 1), written
at a clean shutdown so that the next start reads it instead of replaying every
batch header of the log.

Layout, big-endian: int16 version (1), uint32 CRC-32C of everything after it,
int32 count, then per producer: int64 producer id, int16 epoch, int32 last
sequence, int64 last offset, int32 offset delta (last offset minus the first
offset of its last batch), int64 timestamp, int32 coordinator epoch, int64 the
first offset of its open transaction (-1 for none).  Where Kafka keeps a producer
with its last batch only, kcoord writes one entry per batch it remembers (up
to five, oldest first, for a retry of any of them to be recognised after a
restart); Kafka's reader keeps the last of a producer's entries, which is
that same last batch.

A snapshot says what the state is at its offset: it is read only when the log
ends exactly there (a clean shutdown, or nothing written after it), together
with the aborted transactions of the segments' ``.txnindex`` files;
otherwise the log is replayed as before.
"""

from __future__ import annotations

import os
import re
import struct

from kcoord.protocol.records import crc32c
from kcoord.storage.files import fsync_dir
from kcoord.storage.producer_state import AbortedTxn, BatchMetadata, ProducerEntry, ProducerState

VERSION = 1
_HEADER = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}.snapshot")


def encode(state: ProducerState) -> bytes:
    entries = bytearray()
    count = 0
    for pid, entry in sorted(state.producers.items()):
        batches = list(entry.batches)
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            entries += _ENTRY.pack(
                pid, entry.epoch, batch.last_seq, batch.last_offset,
                batch.last_offset - batch.first_offset,
                entry.last_timestamp if last else batch.timestamp,
                entry.coordinator_epoch, entry.txn_first_offset)
            count += 1
        if not batches:  # known by an end marker alone
            entries += _ENTRY.pack(pid, entry.epoch, -1, -1, 0, entry.last_timestamp,
                                   entry.coordinator_epoch, entry.txn_first_offset)
            count += 1
    body = _COUNT.pack(count) + bytes(entries)
    return _HEADER.pack(VERSION, crc32c(body)) + body


def decode(data: bytes) -> ProducerState:
    """The state a snapshot holds (its aborted transactions come from elsewhere);
    ValueError for a damaged or unknown file."""
    if len(data) < _HEADER.size + _COUNT.size:
        raise ValueError("a producer snapshot shorter than its header")
    version, crc = _HEADER.unpack_from(data, 0)
    if version != VERSION:
        raise ValueError(f"producer snapshot version {version}")
    body = memoryview(data)[_HEADER.size:]
    if crc32c(body) != crc:
        raise ValueError("producer snapshot CRC mismatch")
    (count,) = _COUNT.unpack_from(body, 0)
    if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
        raise ValueError("producer snapshot of the wrong size")
    state = ProducerState()
    for i in range(count):
        (pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch,
         txn_first) = _ENTRY.unpack_from(body, _COUNT.size + i * _ENTRY.size)
        entry = state.producers.get(pid)
        if entry is None:
            entry = state.producers[pid] = ProducerEntry()
        entry.epoch, entry.last_timestamp = epoch, timestamp
        entry.coordinator_epoch, entry.txn_first_offset = coordinator_epoch, txn_first
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq - delta if last_seq >= 0 else -1,
                                               last_seq, last_offset - delta, last_offset,
                                               timestamp))
        if txn_first >= 0:
            state.ongoing[pid] = txn_first
    return state


def write(directory: str, offset: int, state: ProducerState, *, sync_dir: bool = True) -> None:
    """The snapshot of ``state`` at ``offset`` (written whole or not at all)."""
    path = snapshot_path(directory, offset)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(encode(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync_dir:
        fsync_dir(directory)


def discard(directory: str) -> None:
    """Remove every snapshot (they say the state at one offset only: once the
    log is open, the next clean shutdown writes the next)."""
    for name in os.listdir(directory):
        if SNAPSHOT_FILE.match(name) or name.endswith(".snapshot.tmp"):
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass


def load(directory: str, offset: int, segments, log_start_offset: int) -> ProducerState | None:
    """The state at ``offset`` from its snapshot and the segments' aborted
    transactions; None when there is no usable snapshot at that offset.  Every
    snapshot is removed either way."""
    try:
        with open(snapshot_path(directory, offset), "rb") as f:
            state = decode(f.read())
    except (OSError, ValueError):
        state = None
    finally:
        try:
            discard(directory)
        except OSError:
            pass
    if state is None:
        return None
    for segment in segments:
        for pid, first, last, lso in segment.txn_index.entries:
            state.aborted.append(AbortedTxn(pid, first, last, lso))
            state._aborted_ends.append(last)
    state.truncate_head(log_start_offset)
    return state
