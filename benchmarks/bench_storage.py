"""Storage benchmark: append, read, recovery and compaction next to raw file I/O.

``run()`` prints each figure beside the raw throughput of plain file writes and
reads measured in the same run on the same disk.  ``KCOORD_BENCH_QUICK=1``
shrinks the sizes (the recovery log goes from 1 GiB to 64 MiB).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time

import structlog

from kcoord.protocol import compression
from kcoord.protocol.records import Record, build_batch
from kcoord.storage import LogConfig, PartitionLog

MIB = 1024 * 1024


def _quick() -> bool:
    return os.environ.get("KCOORD_BENCH_QUICK", "") not in ("", "0")


def _raw_io(path: str, total: int, chunk: int = MIB) -> tuple[float, float]:
    block = os.urandom(chunk)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(total // chunk):
        os.write(fd, block)
    write_s = time.perf_counter() - start
    os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    start = time.perf_counter()
    pos = 0
    while True:
        data = os.pread(fd, chunk, pos)
        if not data:
            break
        pos += len(data)
    read_s = time.perf_counter() - start
    os.close(fd)
    os.unlink(path)
    return total / MIB / write_s, total / MIB / read_s


def _batch(records: int, value_size: int, codec: int = compression.NONE, keys: int = 0) -> bytes:
    recs = [
        Record(None, 1_700_000_000_000 + i, (b"key-%d" % (i % keys)) if keys else None,
               os.urandom(value_size // 2).hex().encode())
        for i in range(records)
    ]
    return build_batch(recs, compression_type=codec)


def _append(path: str, batch: bytes, records_per_batch: int, total: int) -> tuple[float, float]:
    plog = PartitionLog(path, LogConfig(segment_bytes=256 * MIB))
    n = max(total // len(batch), 1)
    append = plog.append
    start = time.perf_counter()
    for _ in range(n):
        append(batch)
    elapsed = time.perf_counter() - start
    plog.close()
    return n * len(batch) / MIB / elapsed, n * records_per_batch / elapsed


def _read(path: str) -> float:
    plog = PartitionLog(path, LogConfig(segment_bytes=256 * MIB), clean_shutdown=True)
    offset, total = plog.log_start_offset, 0
    start = time.perf_counter()
    end = plog.log_end_offset
    from kcoord.protocol.records import batch_header, iter_entries

    while offset < end:
        data = plog.read(offset, MIB)
        total += len(data)
        last_pos = 0
        for pos, _size, _m in iter_entries(data):
            last_pos = pos
        offset = batch_header(data, last_pos).next_offset
    elapsed = time.perf_counter() - start
    plog.close()
    return total / MIB / elapsed


def _recovery(path: str, size: int) -> tuple[float, float]:
    batch = _batch(100, 160)  # about 18 KiB per batch
    plog = PartitionLog(path, LogConfig(segment_bytes=256 * MIB))
    for _ in range(size // len(batch)):
        plog.append(batch)
    plog.flush()
    for seg in plog.segments:
        seg.close()  # no clean shutdown: the next open recovers every segment
    start = time.perf_counter()
    reopened = PartitionLog(path, LogConfig(segment_bytes=256 * MIB))
    elapsed = time.perf_counter() - start
    recovered = reopened.size_bytes
    reopened.close()
    return elapsed, recovered / MIB / elapsed


def _compaction(path: str, size: int) -> tuple[float, float]:
    cfg = LogConfig(segment_bytes=8 * MIB, cleanup_policy="compact")
    plog = PartitionLog(path, cfg)
    batches = [_batch(100, 100, codec=compression.LZ4, keys=5_000) for _ in range(8)]
    i = 0
    while plog.size_bytes < size:
        plog.append(batches[i % len(batches)])
        i += 1
    plog.roll()
    start = time.perf_counter()
    stats = plog.compact(force=True)
    elapsed = time.perf_counter() - start
    plog.close()
    return stats.bytes_before / MIB / elapsed, stats.records_read / elapsed


def run() -> dict:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    quick = _quick()
    append_total = (32 if quick else 256) * MIB
    recovery_size = (64 if quick else 1024) * MIB
    compaction_size = (8 if quick else 64) * MIB
    root = tempfile.mkdtemp(prefix="kcoord-bench-")
    results = {}
    try:
        raw_w, raw_r = _raw_io(os.path.join(root, "raw"), append_total)
        results["raw_write_mb_s"], results["raw_read_mb_s"] = raw_w, raw_r
        print(f"storage: raw file write {raw_w:9.1f} MB/s   raw file read {raw_r:9.1f} MB/s")
        for n in (1, 100):
            batch = _batch(n, 100)
            total = append_total if n == 100 else append_total // 8
            mb_s, rec_s = _append(os.path.join(root, f"append{n}-0"), batch, n, total)
            results[f"append_{n}_mb_s"], results[f"append_{n}_records_s"] = mb_s, rec_s
            print(
                f"storage: append, {n:3d} record(s)/batch {mb_s:9.1f} MB/s {rec_s:12,.0f} records/s"
                f"   (raw write {raw_w:.1f} MB/s, {mb_s / raw_w:5.1%})"
            )
        read_mb_s = _read(os.path.join(root, "append100-0"))
        results["read_mb_s"] = read_mb_s
        print(
            f"storage: read 1 MiB fetches  {read_mb_s:9.1f} MB/s"
            f"   (raw read {raw_r:.1f} MB/s, {read_mb_s / raw_r:5.1%})"
        )
        shutil.rmtree(os.path.join(root, "append1-0"), ignore_errors=True)
        shutil.rmtree(os.path.join(root, "append100-0"), ignore_errors=True)
        seconds, rec_mb_s = _recovery(os.path.join(root, "recover-0"), recovery_size)
        results["recovery_s"], results["recovery_mb_s"] = seconds, rec_mb_s
        print(
            f"storage: recovery of {recovery_size // MIB} MiB   {seconds:7.2f} s = {rec_mb_s:9.1f} MB/s"
            f"   (raw read {raw_r:.1f} MB/s, {rec_mb_s / raw_r:5.1%})"
        )
        shutil.rmtree(os.path.join(root, "recover-0"), ignore_errors=True)
        comp_mb_s, comp_rec_s = _compaction(os.path.join(root, "compact-0"), compaction_size)
        results["compaction_mb_s"], results["compaction_records_s"] = comp_mb_s, comp_rec_s
        print(
            f"storage: compaction (lz4)    {comp_mb_s:9.1f} MB/s {comp_rec_s:12,.0f} records/s"
            f"   (raw read {raw_r:.1f} MB/s, {comp_mb_s / raw_r:5.1%})"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


if __name__ == "__main__":
    run()
