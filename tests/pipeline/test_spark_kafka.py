"""Spark's own Kafka source (``spark-sql-kafka-0-10``, the Java client inside
Spark) pointed at kcoord, as a PySpark user developing a streaming job does."""

from __future__ import annotations

from collections import Counter

from tests.pipeline.conftest import _produce


def _kafka(reader, bootstrap: str, topic: str):
    return (reader.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest"))


def test_a_batch_read_returns_every_record(spark, store):
    df = _kafka(spark.read, store.bootstrap, "orders").option("endingOffsets", "latest").load()
    rows = df.select("topic", "partition", "offset", "key", "value").collect()
    # 300 records, then 60 more, each batch keyed k<i> with value v<i> on partition i % 3.
    expected = Counter((i % 3, b"k%d" % i, b"v%d" % i) for n in (300, 60) for i in range(n))
    assert Counter((r.partition, bytes(r.key), bytes(r.value)) for r in rows) == expected
    for p in range(3):
        offsets = sorted(r.offset for r in rows if r.partition == p)
        assert offsets == list(range(store.end_offsets[("orders", p)]))


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _values(spark, path) -> Counter:
    return Counter(r.v for r in spark.read.parquet(str(path)).collect())


def test_a_streaming_query_with_a_checkpoint_picks_up_new_records_exactly_once(spark, broker, tmp_path):
    # A broker of its own: the shared store keeps only what its fixture wrote.
    _create(broker.bootstrap, "stream-in", 2)
    _produce(broker.bootstrap, "stream-in", 10, 2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start():
        stream = _kafka(spark.readStream, broker.bootstrap, "stream-in").load()
        return (stream.selectExpr("CAST(value AS STRING) AS v").writeStream.format("parquet")
                .option("path", str(out)).option("checkpointLocation", str(checkpoint))
                .trigger(processingTime="100 milliseconds").start())

    query = start()
    try:
        query.processAllAvailable()
        assert _values(spark, out) == Counter(f"v{i}" for i in range(10))
        _produce(broker.bootstrap, "stream-in", 4, 2)  # produced after the query started
        query.processAllAvailable()
        assert _values(spark, out) == Counter([f"v{i}" for i in range(10)] +
                                              [f"v{i}" for i in range(4)])
    finally:
        query.stop()
    assert query.exception() is None

    # Restarted from its checkpoint, the query reads only what came since.
    _produce(broker.bootstrap, "stream-in", 3, 2)
    query = start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert _values(spark, out) == Counter([f"v{i}" for i in range(10)] +
                                          [f"v{i}" for i in range(4)] + [f"v{i}" for i in range(3)])
