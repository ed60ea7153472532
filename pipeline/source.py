"""Spark data sources over segment folders (``pyspark.sql.datasource``, Spark 4).

Three formats, one per row shape of ``pipeline.rows``::

    spark.dataSource.register(KcoordOffsets)
    spark.read.format("kcoord-offsets").option("paths", json.dumps([data_dir])).load()

``kcoord-records`` (topic records), ``kcoord-offsets`` (decoded
``__consumer_offsets`` records) and ``kcoord-batches`` (one row per batch
header).  Options: ``paths``, a JSON list of data dirs (local folders or URIs
pyarrow reads); ``topics``, a comma-separated list to keep (``kcoord-offsets``
always reads ``__consumer_offsets``; ``kcoord-records`` reads every topic but
``__consumer_offsets`` unless it is named); ``split_bytes``, the size above
which a segment is read as several input partitions.  One input partition per
split; each yields Arrow record batches.
"""

from __future__ import annotations

import gc
import json

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kcoord.pipeline import rows, segments


class SplitPartition(InputPartition):
    def __init__(self, split: segments.Split):
        super().__init__(split)
        self.split = split


class _Reader(DataSourceReader):
    def __init__(self, shape: str, options: dict):
        self.shape = shape
        self.paths = json.loads(options["paths"]) if "paths" in options else []
        if not self.paths:
            raise ValueError("option 'paths' (a JSON list of data dirs) is required")
        topics = options.get("topics")
        if shape == "offsets":
            self.topics = {segments.OFFSETS_TOPIC}
        elif topics:
            self.topics = {t.strip() for t in topics.split(",") if t.strip()}
        elif shape == "records":
            self.topics = _AllBut(segments.OFFSETS_TOPIC)
        else:
            self.topics = None
        self.split_bytes = int(options.get("split_bytes", segments.SPLIT_BYTES))

    def partitions(self):
        return [SplitPartition(s) for s in
                segments.plan_splits(self.paths, self.topics, self.split_bytes)]

    def read(self, partition: SplitPartition):
        # With no split at all (an empty store) Spark still reads once, with a bare
        # InputPartition: no rows.
        if isinstance(partition, SplitPartition):
            _settle_worker()
            yield from rows.read(self.shape, partition.split)


_settled = False


def _settle_worker() -> None:
    """Once per Python worker: what it holds already (pyspark's and pyarrow's
    objects, for the worker's whole life) is left out of its garbage collections
    from now on (``gc.freeze``).  A read keeps tens of thousands of decoded rows
    alive until each Arrow batch; every full collection that triggers would
    otherwise walk all of those objects too (measured in Spark's workers: 4.2 us
    of Python per decoded ``__consumer_offsets`` record before, 3.9 us after)."""
    global _settled
    if not _settled:
        gc.collect()
        gc.freeze()
        _settled = True


class _AllBut:
    """Every topic but one (a ``topics`` filter)."""

    def __init__(self, excluded: str):
        self.excluded = excluded

    def __contains__(self, topic: str) -> bool:
        return topic != self.excluded


class _Source(DataSource):
    shape = ""

    @classmethod
    def name(cls) -> str:
        return f"kcoord-{cls.shape}"

    def schema(self) -> str:
        return rows.spark_ddl(rows.SHAPES[self.shape])

    def reader(self, schema) -> DataSourceReader:
        return _Reader(self.shape, self.options)


class KcoordRecords(_Source):
    shape = "records"


class KcoordOffsets(_Source):
    shape = "offsets"


class KcoordBatches(_Source):
    shape = "batches"


SOURCES = (KcoordRecords, KcoordOffsets, KcoordBatches)


def register(spark) -> None:
    for source in SOURCES:
        spark.dataSource.register(source)


def load(spark, shape: str, data_dirs: list[str], topics=None, split_bytes: int | None = None):
    """A DataFrame of ``shape`` rows read from ``data_dirs``."""
    reader = spark.read.format(f"kcoord-{shape}").option("paths", json.dumps(list(data_dirs)))
    if topics:
        reader = reader.option("topics", ",".join(topics))
    if split_bytes:
        reader = reader.option("split_bytes", str(split_bytes))
    return reader.load()
