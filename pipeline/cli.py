"""``kcoord pipeline``: offset history, compacted offsets, lag and a report from a store.

    kcoord pipeline history --data-dir ./data --out out/history
    kcoord pipeline offsets --data-dir ./data --out out/offsets
    kcoord pipeline lag     --data-dir ./data --out out/lag
    kcoord pipeline report  --data-dir ./data --out out/report
    kcoord pipeline all     --data-dir ./data --out out   # all four, one Spark session

``--data-dir`` is repeatable (a kcoord data dir, or the log dirs of Kafka
brokers); ``--out`` is a folder (Parquet, and for ``report`` an HTML page);
``--master`` is a Spark master URL (default ``local[*]``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata

COMMANDS = {
    "history": "every offset commit still in the store (Parquet, partitioned by group)",
    "offsets": "the latest committed offset per group, topic and partition (Parquet)",
    "lag": "lag per partition and group now, and at every commit (Parquet)",
    "report": "a static HTML page with the lag table and charts",
    "all": "history, offsets, lag and report in one Spark session, each into its own "
           "folder of --out",
}
MIN_JAVA = 17


def add_parser(sub) -> None:
    import argparse

    examples = __doc__.split("\n\n")[1]
    parser = sub.add_parser(
        "pipeline", help="Spark jobs over a store: history, offsets, lag, report",
        description="Spark jobs over a kcoord store (or Kafka's log dirs): offset\n"
                    "history, compacted offsets, lag and an HTML report.",
        epilog="examples:\n" + examples + "\n\n" + __doc__.split("\n\n")[2].replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    jobs = parser.add_subparsers(dest="job", required=True)
    for name, text in COMMANDS.items():
        job = jobs.add_parser(
            name, help=text, description=f"kcoord pipeline {name}: {text}.",
            epilog=f"example:\n    kcoord pipeline {name} --data-dir ./data --out out"
                   f"{'' if name == 'all' else '/' + name}",
            formatter_class=argparse.RawDescriptionHelpFormatter)
        job.add_argument("--data-dir", action="append", required=True, metavar="DIR",
                         help="a data dir or Kafka log dir, local or a URI (repeatable)")
        job.add_argument("--out", required=True, metavar="DIR", help="output folder")
        job.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
        job.add_argument("--quiet", action="store_true",
                         help="nothing on the terminal but errors")


def _say(args, text: str) -> None:
    if not args.quiet:
        print(f"kcoord pipeline: {text}", file=sys.stderr, flush=True)


def java_problem() -> str | None:
    """Why Spark cannot start here (no Java 17+), or None."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return (f"Java {MIN_JAVA} or newer is needed to run Spark: install a JDK or set JAVA_HOME "
                "(no java found on PATH)" if not home else
                f"Java {MIN_JAVA} or newer is needed to run Spark: JAVA_HOME={home} has no bin/java")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run {java}: {exc}"
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return None
    major = int(m.group(1)) if m.group(1) != "1" else int(m.group(2) or 0)
    if major < MIN_JAVA:
        return f"Java {MIN_JAVA} or newer is needed to run Spark; {java} is Java {major}"
    return None


def install_hint(extra: str) -> str:
    """A pip command that installs an extra's requirements wherever kcoord came
    from (a wheel, a clone, an index) into this interpreter: the requirements
    themselves, read from the installed distribution, not ``kcoord[extra]``,
    which needs kcoord on an index."""
    marker = re.compile(r"""extra\s*==\s*["']""" + re.escape(extra) + r"""["']""")
    wanted = [r.split(";")[0].strip() for r in metadata.requires("kcoord") or []
              if marker.search(r.partition(";")[2])]
    # This interpreter's pip: a bare ``pip`` may belong to another Python (a venv
    # used through its bin/ path without being activated).
    return (f"{shlex.quote(sys.executable)} -m pip install "
            + " ".join(shlex.quote(r.replace(" ", "")) for r in wanted))


def session_args(args) -> dict:
    """What ``jobs.session`` gets when no session runs yet: the master, a name
    per job, and Spark's progress bar only on a terminal and without ``--quiet``
    (in a CI log or a file it is line after line of noise)."""
    return {"master": args.master, "app": f"kcoord pipeline {args.job}",
            "progress": not args.quiet and sys.stderr.isatty()}


def run(args) -> int:
    problem = java_problem()
    if problem:
        print(f"kcoord pipeline: {problem}", file=sys.stderr)
        return 2
    try:
        from kcoord.pipeline import jobs
    except ImportError as exc:
        print(f"kcoord pipeline: {exc.name or exc} is missing: install the pipeline extra "
              f"({install_hint('pipeline')})", file=sys.stderr)
        return 2
    for d in args.data_dir:
        if "://" not in d and not os.path.isdir(d):
            print(f"kcoord pipeline: no such data dir: {d}", file=sys.stderr)
            return 2
    began = time.monotonic()
    shared = jobs.existing_session()  # a caller's session (tests, notebooks): used as it is, kept up
    if shared is None:
        _say(args, f"starting Spark ({args.master})")
    with tempfile.TemporaryFile() as jvm_log:
        with _jvm_stderr(jvm_log if args.quiet and shared is None else None):
            spark = jobs.session(**session_args(args))
        try:
            return _JOBS[args.job](spark, args, began)
        except BaseException:
            _show_tail(jvm_log)
            raise
        finally:
            if shared is None:
                spark.stop()


@contextlib.contextmanager
def _jvm_stderr(into):
    """With ``--quiet``: the Spark JVM started meanwhile inherits ``into`` as its
    standard error, so its start-up notices (the JVM's incubator-module warning,
    Spark's log-level hint) and its log stay off the terminal; ``_show_tail``
    shows them if the job fails."""
    if into is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        os.dup2(into.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _show_tail(jvm_log, lines: int = 40) -> None:
    """The last lines the Spark JVM wrote to ``jvm_log``, if any, on stderr."""
    jvm_log.flush()
    jvm_log.seek(0)
    tail = jvm_log.read().decode("utf-8", "replace").splitlines()[-lines:]
    if tail:
        print("kcoord pipeline: Spark said:\n" + "\n".join(tail), file=sys.stderr, flush=True)


def _write(args, df, path: str, partition_by=None) -> int:
    writer = df.write.mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(partition_by)
    writer.parquet(path)
    return df.sparkSession.read.parquet(path).count()


def _history(spark, args, began) -> int:
    from kcoord.pipeline import jobs

    _say(args, f"reading offset commits from {', '.join(args.data_dir)}")
    n = _write(args, jobs.history(spark, args.data_dir), args.out, "group")
    _say(args, f"{n} commits written to {args.out} in {time.monotonic() - began:.1f} s")
    from kcoord.pipeline.segments import compaction_note

    note = compaction_note(args.data_dir)
    if note:
        _say(args, note)
    return 0


def _offsets(spark, args, began) -> int:
    from kcoord.pipeline import jobs

    _say(args, f"compacting offsets from {', '.join(args.data_dir)}")
    df = jobs.offsets(spark, args.data_dir).orderBy("group", "topic", "partition")
    n = _write(args, df, args.out)
    if not args.quiet:
        spark.read.parquet(args.out).orderBy("group", "topic", "partition").select(
            "group", "topic", "partition", "committed_offset", "leader_epoch", "metadata"
        ).show(20, truncate=False)
    _say(args, f"{n} committed offsets written to {args.out} in {time.monotonic() - began:.1f} s")
    return 0


def _lag(spark, args, began) -> int:
    from kcoord.pipeline import jobs

    _say(args, f"computing lag from {', '.join(args.data_dir)}")
    per_partition, per_group = jobs.lag(spark, args.data_dir)
    out = args.out.rstrip("/")
    n = _write(args, per_partition.orderBy("group", "topic", "partition"), f"{out}/partitions")
    _write(args, per_group.orderBy("group"), f"{out}/groups")
    _say(args, "lag at every commit")
    h = _write(args, jobs.lag_history(spark, args.data_dir), f"{out}/history", "group")
    if not args.quiet:
        from pyspark.sql import functions as F

        spark.read.parquet(f"{out}/groups").orderBy("group").withColumn(
            "last_commit", F.timestamp_millis("last_commit")).show(50, truncate=False)
    _say(args, f"lag of {n} partitions and {h} commits written to {out}/partitions, "
               f"{out}/groups and {out}/history in {time.monotonic() - began:.1f} s")
    return 0


def _report(spark, args, began) -> int:
    from kcoord.pipeline import report

    _say(args, f"building the report from {', '.join(args.data_dir)}")
    path = report.write(spark, args.data_dir, args.out)
    _say(args, f"report written to {path} in {time.monotonic() - began:.1f} s")
    if not args.quiet:
        print(path)
    return 0


def _all(spark, args, began) -> int:
    """Every job in this one session, into ``<out>/history``, ``/offsets``, ``/lag``
    and ``/report``."""
    import argparse

    out = args.out.rstrip("/")
    for name in ("history", "offsets", "lag", "report"):
        job = argparse.Namespace(**{**vars(args), "job": name, "out": f"{out}/{name}"})
        code = _JOBS[name](spark, job, began)
        if code:
            return code
    return 0


_JOBS = {"history": _history, "offsets": _offsets, "lag": _lag, "report": _report, "all": _all}
