"""The pipeline's data source: how fast it decodes a ``__consumer_offsets`` log.

A 1M-record ``__consumer_offsets`` partition (100k in quick mode) is read

* by plain Python: the same decoders (``pipeline.segments`` and
  ``protocol.group_records``) turning every record into a tuple of its fields,
  on one core, with what the process held before frozen out of garbage
  collection as the data source's workers do (``gc.freeze``): the ceiling;
* by the ``kcoord-offsets`` Spark data source on ``local[2]`` (after warm-up
  reads: Python workers started, the JVM's code compiled, as in a long job),
  counted and two columns aggregated (a Python data source has no column
  pruning: every row is decoded and reaches the JVM whole).

Per core means per CPU second: the plain loop's process time, and the CPU
time of the Spark JVM and its Python workers (children of this process, read
from /proc), so that the figure holds on a busy machine.  Each figure is the
median of a few reads.  A Spark query also costs a fixed amount whatever it
reads (planning, compiling): that cost is measured on a one-batch log and
shown apart, and the rate is given per record (without it) and for the whole
query (with it).  The JVM's JIT compiler threads are counted apart too: they
compile Spark's own code, still for many queries after the first (measured
here: 790 ms of compiler CPU in the first 1M-record read, 130-240 ms after ten,
against 290 ms of the task itself), a cost of the JVM warming up that does not
grow with the records read; the per-record figure leaves it out, the whole
query keeps it.  The wall-clock rate and where the CPU went (the Python workers
decoding and building Arrow batches, the JVM turning them into rows, the JIT)
are printed beside it.

Goal (issue #11): the data source at least 80% of the ceiling per core.
"""

from __future__ import annotations

import gc
import os
import statistics
import tempfile
import time

from benchmarks.bench_groups import offsets_log

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
RECORDS = 100_000 if QUICK else 1_000_000
SLOTS = 2
SMALL = 500  # one batch: what a read costs beyond its records
WARMUP = 3
JIT = "jvm jit compiler"
RUNS = 3


def plain_python(data_dir: str) -> tuple[float, int]:
    """CPU seconds to decode every record into a tuple of its fields, and the count.

    Tuples are kept in lists of ``rows.ROWS_PER_BATCH``, as the data source keeps
    them before each Arrow batch (holding all of them at once would make
    Python's garbage collector walk a million tuples: a slower loop, no ceiling)."""
    from kcoord.pipeline import rows, segments
    from kcoord.protocol import group_records as G

    gc.collect()
    gc.freeze()  # as the data source's workers do: only the loop's own objects are walked
    began = time.process_time()
    count, out = 0, []
    for split in segments.plan_splits([data_dir], {segments.OFFSETS_TOPIC}):
        for entry in segments.read_split(split):
            for r in entry.decode().records:
                kind, key = G.decode_key(r.key)
                v = G.decode_value(kind, r.value)
                out.append((r.offset, r.timestamp, kind, key.group, key.topic, key.partition,
                            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                            v.expire_timestamp))
            if len(out) >= rows.ROWS_PER_BATCH:
                count += len(out)
                out = []
    spent = time.process_time() - began
    gc.unfreeze()
    return spent, count + len(out)


def split_bytes(data_dir: str) -> int:
    """The log read as one split per slot, so that both slots work.  A split
    costs about 20 ms of JVM and 20 ms of Python worker CPU whatever it holds
    (measured: this 56 MB log read in 7 splits of 8 MiB costs 0.2 s more than in
    2): with the default split size (64 MiB) a user pays that once per 64 MiB,
    and smaller splits here would charge it to every record."""
    size = sum(e.stat().st_size for e in os.scandir(os.path.join(data_dir, "__consumer_offsets-0")))
    return size // SLOTS + 1


def data_source(spark, data_dir: str) -> tuple[float, int]:
    from pyspark.sql import functions as F

    from kcoord.pipeline import source

    df = source.load(spark, "offsets", [data_dir], split_bytes=split_bytes(data_dir))
    began = time.perf_counter()
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum("committed_offset"),
                 F.max("commit_timestamp")).first()
    return time.perf_counter() - began, row["n"]


def _thread_cpu(pid: int, tick: int) -> tuple[float, float]:
    """CPU seconds of a process's JIT compiler threads and of its other threads."""
    jit = other = 0.0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0, 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                name, rest = f.read().split("(", 1)[1].rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        cpu = (int(fields[11]) + int(fields[12])) / tick
        if "CompilerThre" in name:  # HotSpot's "C1/C2 CompilerThread<n>"
            jit += cpu
        else:
            other += cpu
    return jit, other


def _cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far by this process's Spark JVM (its JIT compiler
    threads apart) and its Python workers (Linux /proc; only descendants of this
    process count)."""
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
    out = {"jvm": 0.0, "python workers": 0.0, JIT: 0.0}
    for pid in mine - {os.getpid()}:
        _parent, cmd, cpu = procs[pid]
        if b"org.apache.spark" in cmd:
            jit, other = _thread_cpu(pid, tick)
            out[JIT] += jit
            out["jvm"] += other
        elif b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd:
            out["python workers"] += cpu
    return out


def _measured(spark, data_dir: str) -> tuple[float, dict[str, float], int]:
    """Wall seconds, CPU seconds by kind and rows of one data source read."""
    before = _cpu_seconds()
    seconds, n = data_source(spark, data_dir)
    after = _cpu_seconds()
    return seconds, {k: after[k] - before[k] for k in after}, n


def _median(values):
    return statistics.median(values)


def run() -> None:
    from kcoord.pipeline import jobs

    with tempfile.TemporaryDirectory(prefix="kcoord-pipeline-bench-") as data_dir, \
            tempfile.TemporaryDirectory(prefix="kcoord-pipeline-bench-small-") as small_dir:
        offsets_log(data_dir, RECORDS)
        offsets_log(small_dir, SMALL)
        size = sum(e.stat().st_size for e in os.scandir(os.path.join(data_dir, "__consumer_offsets-0")))
        spark = jobs.session(f"local[{SLOTS}]", "kcoord bench", progress=False)
        try:
            # Warm: Python workers started, the JVM's code compiled.
            for _ in range(WARMUP):
                data_source(spark, data_dir)
                data_source(spark, small_dir)
            plain = [plain_python(data_dir) for _ in range(RUNS)]
            big, small = [], []
            for _ in range(RUNS):
                big.append(_measured(spark, data_dir))
                small.append(_measured(spark, small_dir))
        finally:
            spark.stop()
    assert all(n == RECORDS for _s, n in plain), plain
    assert all(n == RECORDS for _s, _c, n in big) and all(n == SMALL for _s, _c, n in small)
    ceiling = RECORDS / _median(s for s, _n in plain)
    kinds = list(big[0][1])
    query_cpu = {k: _median(c[k] for _s, c, _n in big) for k in kinds}
    fixed_cpu = {k: _median(c[k] for _s, c, _n in small) for k in kinds}
    whole = RECORDS / sum(query_cpu.values())
    decoding = [k for k in kinds if k != JIT]
    per_record = (RECORDS - SMALL) / sum(query_cpu[k] - fixed_cpu[k] for k in decoding)
    wall = RECORDS / _median(s for s, _c, _n in big)
    print(f"pipeline: decoding a {RECORDS:,}-record __consumer_offsets log ({size / 1e6:.0f} MB), "
          f"per core = records per CPU second, median of {RUNS} after {WARMUP} warm-up reads")
    print(f"  plain Python, 1 core:                 {ceiling:10,.0f} records/s")
    print(f"  kcoord-offsets data source, local[{SLOTS}]:")
    print(f"    per record (the query's fixed cost and the JIT taken out): "
          f"{per_record:10,.0f} records/s per core")
    print(f"    whole query:                                   {whole:10,.0f} records/s per core "
          f"({wall:,.0f} records/s on the clock)")
    print(f"  CPU per record: plain Python {1e6 / ceiling:.2f} us; data source: "
          + ", ".join(f"{k} {(query_cpu[k] - fixed_cpu[k]) * 1e6 / (RECORDS - SMALL):.2f} us"
                      for k in kinds)
          + "; the query's fixed cost (a " + f"{SMALL}-record log): "
          + ", ".join(f"{k} {fixed_cpu[k] * 1e3:.0f} ms" for k in kinds))
    print(f"  goal: per core at least 80% of plain Python: {per_record / ceiling:.2f}x per record, "
          f"{whole / ceiling:.2f}x for the whole query\n")
