"""The pipeline's jobs as DataFrames: offset history, the compacted offsets, lag.

Every job reads through the data sources of ``pipeline.source`` and runs the
same on ``local[*]`` and on a cluster.  Several data dirs may hold the same
partition (the log dirs of every broker of a Kafka cluster, replicas
included): records at the same (partition, offset) are the same record, so
each job counts them once.
"""

from __future__ import annotations

import os
import sys

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from kcoord.pipeline import rows, segments, source


def is_local(master: str) -> bool:
    """Whether a master URL runs the driver and executors on this machine
    (``local``, ``local[N]``, ``local[*]``, ``local-cluster[...]``)."""
    return master.startswith("local")


def environment(master: str, env=None):
    """Set the environment Spark's launcher reads, keeping any value already set
    (a user's own wins), and return it.

    Python workers run the interpreter running this (it has pyarrow): on a
    cluster that path must hold such a Python on every executor, or
    ``PYSPARK_PYTHON`` must name one.  A local driver binds to the loopback
    address; a driver on a cluster keeps Spark's own choice, an address the
    executors can reach."""
    env = os.environ if env is None else env
    if is_local(master):
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def settings(master: str = "local[*]", app: str = "kcoord pipeline", conf: dict | None = None,
             progress: bool = True) -> dict:
    """The Spark settings of a new session: ``conf`` last, so it wins."""
    log_config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
    # The JVM reads the Arrow batches of the data sources' Python workers: reading
    # them without Arrow's per-access bounds and null-vector checks (the batches
    # come from pyarrow, whole) is the cheaper part of every row's way into Spark.
    java_options = (f"-Dlog4j2.configurationFile={log_config}"
                    " -Darrow.enable_unsafe_memory_access=true"
                    " -Darrow.enable_null_check_for_get=false")
    out = {"spark.master": master, "spark.app.name": app,
           "spark.driver.extraJavaOptions": java_options,
           "spark.executor.extraJavaOptions": java_options,
           "spark.ui.enabled": "false",
           "spark.ui.showConsoleProgress": "true" if progress else "false",
           "spark.sql.session.timeZone": "UTC"}
    if is_local(master):
        # Small shuffles on one machine: a few tasks, not Spark's 200.
        out["spark.sql.shuffle.partitions"] = "8"
    out.update(conf or {})
    return out


def existing_session() -> SparkSession | None:
    """The session already running in this process (a test's, a notebook's), or None."""
    try:
        return SparkSession.active()
    except PySparkException:
        return None


def session(master: str = "local[*]", app: str = "kcoord pipeline", conf: dict | None = None,
            progress: bool = True) -> SparkSession:
    """A Spark session with the kcoord data sources registered.

    A session already running in this process is used as it is: the arguments
    apply to a new one only, and a job run inside a caller's session leaves its
    settings (shuffle partitions, progress bar, log level) alone."""
    spark = existing_session()
    if spark is None:
        environment(master)
        builder = SparkSession.builder
        for key, value in settings(master, app, conf, progress).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    source.register(spark)
    return spark


def _once(df: DataFrame, *key: str) -> DataFrame:
    return df.dropDuplicates(list(key))


def offsets_records(spark, data_dirs) -> DataFrame:
    """The ``__consumer_offsets`` records that count, each once: a record written in a
    transaction counts once the transaction's marker says commit (as Kafka applies
    transactional offset commits), and markers themselves are left out."""
    records = _once(source.load(spark, "offsets", data_dirs), "source_partition", "source_offset")
    in_transactions = records.where(F.col("producer_id").isNotNull())
    next_marker = (Window.partitionBy("source_partition", "producer_id").orderBy("source_offset")
                   .rowsBetween(Window.currentRow, Window.unboundedFollowing))
    committed = (in_transactions
                 .withColumn("_outcome", F.first("marker", ignorenulls=True).over(next_marker))
                 .where((F.col("record_type") != rows.TRANSACTION_MARKER)
                        & (F.col("_outcome") == "commit"))
                 .drop("_outcome"))
    return records.where(F.col("producer_id").isNull()).unionByName(committed)


def history(spark, data_dirs) -> DataFrame:
    """Every offset commit still in the store, oldest first within a partition."""
    commits = offsets_records(spark, data_dirs).where(
        (F.col("record_type") == "offset_commit") & ~F.col("tombstone"))
    return commits.select("group", "topic", "partition", "committed_offset", "leader_epoch",
                          "metadata", "commit_timestamp", "expire_timestamp",
                          "source_partition", "source_offset", "timestamp")


def offsets(spark, data_dirs) -> DataFrame:
    """The latest committed offset per (group, topic, partition), tombstones
    applied: what the broker's OffsetFetch answers after loading the store.

    A key's records all live in one ``__consumer_offsets`` partition, so the
    last one is the one with the highest offset there."""
    commits = offsets_records(spark, data_dirs).where(F.col("record_type") == "offset_commit")
    last = Window.partitionBy("group", "topic", "partition").orderBy(F.col("source_offset").desc())
    latest = commits.withColumn("_n", F.row_number().over(last)).where("_n = 1")
    return latest.where(~F.col("tombstone")).select(
        "group", "topic", "partition", "committed_offset", "leader_epoch", "metadata",
        "commit_timestamp", "expire_timestamp")


def end_offsets(spark, data_dirs) -> DataFrame:
    """Each topic partition's log end offset, from batch headers: one past the
    last batch, or the newest segment's base offset when that is later (a log
    emptied by retention)."""
    batches = source.load(spark, "batches", data_dirs)
    from_batches = batches.groupBy("topic", "partition").agg(
        (F.max("last_offset") + 1).alias("end_offset"))
    bases = {}
    for s in segments.segment_files(list(data_dirs)):
        key = (s.topic, s.partition)
        bases[key] = max(bases.get(key, 0), s.base_offset)
    from_files = spark.createDataFrame([(t, p, b) for (t, p), b in bases.items()],
                                       "topic string, partition int, end_offset bigint")
    return (from_batches.unionByName(from_files).groupBy("topic", "partition")
            .agg(F.max("end_offset").alias("end_offset")))


def lag(spark, data_dirs) -> tuple[DataFrame, DataFrame]:
    """(lag per group and partition now, lag per group now)."""
    committed = offsets(spark, data_dirs)
    per_partition = (committed.join(end_offsets(spark, data_dirs), ["topic", "partition"], "left")
                     .withColumn("lag", F.col("end_offset") - F.col("committed_offset"))
                     .select("group", "topic", "partition", "committed_offset", "end_offset", "lag",
                             "commit_timestamp"))
    per_group = per_partition.groupBy("group").agg(
        F.sum("lag").alias("lag"), F.max("lag").alias("max_partition_lag"),
        F.count(F.lit(1)).alias("partitions"), F.max("commit_timestamp").alias("last_commit"))
    return per_partition, per_group


def lag_history(spark, data_dirs) -> DataFrame:
    """For every commit at time t: the partition's end offset at t (one past the
    last offset of the batches whose max timestamp is at most t) minus the
    committed offset.

    A commit older than every batch of its partition saw an empty log (end
    offset 0) when the partition's oldest segment starts at offset 0: no record
    of it was ever removed.  When retention removed its first records, or the
    store does not hold the partition, the end offset at t is not in the store:
    end offset and lag are null, as they are for ``lag`` now.

    One ordered pass per topic partition over its batches and commits together
    (batches first at equal times), instead of a join of every commit with every
    batch."""
    commits = history(spark, data_dirs).select(
        "group", "topic", "partition", "committed_offset",
        F.col("commit_timestamp").alias("t"), F.lit(1).alias("_kind"),
        F.lit(None).cast("bigint").alias("_end"))
    batches = (_once(source.load(spark, "batches", data_dirs), "topic", "partition", "base_offset")
               .select(F.lit(None).cast("string").alias("group"), "topic", "partition",
                       F.lit(None).cast("bigint").alias("committed_offset"),
                       F.col("max_timestamp").alias("t"), F.lit(0).alias("_kind"),
                       (F.col("last_offset") + 1).alias("_end")))
    upto = (Window.partitionBy("topic", "partition").orderBy("t", "_kind")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    events = commits.unionByName(batches).withColumn("end_offset", F.max("_end").over(upto))
    starts = {}
    for s in segments.segment_files(list(data_dirs)):
        key = (s.topic, s.partition)
        starts[key] = min(starts.get(key, s.base_offset), s.base_offset)
    whole = spark.createDataFrame([(t, p, 0) for (t, p), b in starts.items() if b == 0],
                                  "topic string, partition int, _empty bigint")
    return (events.where(F.col("_kind") == 1)
            .join(F.broadcast(whole), ["topic", "partition"], "left")
            .withColumn("end_offset", F.coalesce("end_offset", "_empty"))
            .withColumn("lag", F.col("end_offset") - F.col("committed_offset"))
            .select("group", "topic", "partition", F.col("t").alias("commit_timestamp"),
                    "committed_offset", "end_offset", "lag"))
