"""The pipeline's data source: how fast it decodes a ``__consumer_offsets`` log.

A 1M-record ``__consumer_offsets`` partition (100k in quick mode) is read

* by plain Python: the same decoders (``pipeline.segments`` and
  ``protocol.group_records``) turning every record into a tuple of its fields,
  on one core: the ceiling;
* by the ``kcoord-offsets`` Spark data source on ``local[2]`` (after one warm-up
  read of the same log: steady state, as in a long job), counted and two
  columns aggregated (a Python data source has no column pruning: every row
  is decoded and reaches the JVM whole).

Per core means per CPU second: the plain loop's process time, and the CPU
time of the Spark JVM and its Python workers (children of this process, read
from /proc), so that the figure holds on a busy machine; the wall-clock rate
and where the CPU went (the Python workers decoding and building Arrow
batches, the JVM turning them into rows) are printed beside it.

Goal (issue #11): the data source at least 80% of the ceiling per core.
"""

from __future__ import annotations

import os
import tempfile
import time

from benchmarks.bench_groups import offsets_log

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
RECORDS = 100_000 if QUICK else 1_000_000
SLOTS = 2
SPLIT_BYTES = 8 << 20


def plain_python(data_dir: str) -> tuple[float, int]:
    """CPU seconds to decode every record into a tuple of its fields, and the count."""
    from pipeline import segments
    from protocol import group_records as G

    began = time.process_time()
    out = []
    for split in segments.plan_splits([data_dir], {segments.OFFSETS_TOPIC}, SPLIT_BYTES):
        for entry in segments.read_split(split):
            for r in entry.decode().records:
                kind, key = G.decode_key(r.key)
                v = G.decode_value(kind, r.value)
                out.append((r.offset, r.timestamp, kind, key.group, key.topic, key.partition,
                            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                            v.expire_timestamp))
    return time.process_time() - began, len(out)


def data_source(spark, data_dir: str) -> tuple[float, int]:
    from pyspark.sql import functions as F

    from pipeline import source

    df = source.load(spark, "offsets", [data_dir], split_bytes=SPLIT_BYTES)
    began = time.perf_counter()
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum("committed_offset"),
                 F.max("commit_timestamp")).first()
    return time.perf_counter() - began, row["n"]


def _cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far by this process's Spark JVM and its Python workers
    (Linux /proc; only descendants of this process count)."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read(4096)
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        procs[int(pid)] = (int(fields[1]), cmd, (int(fields[11]) + int(fields[12])) / tick)
    mine, changed = {os.getpid()}, True
    while changed:
        grown = {pid for pid, (parent, _c, _t) in procs.items() if parent in mine} | mine
        changed, mine = grown != mine, grown
    out = {"jvm": 0.0, "python workers": 0.0}
    for pid in mine - {os.getpid()}:
        _parent, cmd, cpu = procs[pid]
        kind = ("jvm" if b"org.apache.spark" in cmd
                else "python workers" if b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd
                else None)
        if kind:
            out[kind] += cpu
    return out


def run() -> None:
    from pipeline import jobs

    with tempfile.TemporaryDirectory(prefix="kcoord-pipeline-bench-") as data_dir:
        offsets_log(data_dir, RECORDS)
        size = sum(e.stat().st_size for e in os.scandir(os.path.join(data_dir, "__consumer_offsets-0")))
        spark = jobs.session(f"local[{SLOTS}]", "kcoord bench", progress=False)
        try:
            data_source(spark, data_dir)  # warm: Python workers started, the JVM's code compiled
            plain_s, plain_n = plain_python(data_dir)
            before = _cpu_seconds()
            spark_s, spark_n = data_source(spark, data_dir)
            after = _cpu_seconds()
        finally:
            spark.stop()
    assert plain_n == spark_n == RECORDS, (plain_n, spark_n)
    ceiling = plain_n / plain_s
    spark_cpu = sum(after[k] - before[k] for k in after)
    per_core = spark_n / spark_cpu
    print(f"pipeline: decoding a {RECORDS:,}-record __consumer_offsets log ({size / 1e6:.0f} MB), "
          "per core = records per CPU second")
    print(f"  plain Python, 1 core:                {ceiling:10,.0f} records/s")
    print(f"  kcoord-offsets data source, local[{SLOTS}]: {per_core:10,.0f} records/s per core "
          f"({spark_n / spark_s:,.0f} records/s on the clock)")
    cpu = {k: (after[k] - before[k]) * 1e6 / spark_n for k in after}
    print(f"  CPU per record: plain Python {plain_s * 1e6 / plain_n:.1f} us; data source: "
          + ", ".join(f"{k} {v:.1f} us" for k, v in cpu.items()))
    print(f"  goal: per core at least 80% of plain Python: {per_core / ceiling:.2f}x\n")
