"""Topics and their partition folders in the data dir (Kafka's on-disk layout)."""

from __future__ import annotations

from kafka.admin import KafkaAdminClient
from kafka.record import MemoryRecords, MemoryRecordsBuilder

from broker.topics.manager import topic_id_to_str


def _batch(values):
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def test_create_and_delete_topic_manage_partition_folders(make_broker, tmp_path):
    node = make_broker(data_dir=tmp_path)
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics({"folders": {"num_partitions": 2, "replication_factor": 1}})
        topic = node.broker.topics.get("folders")
        for p in (0, 1):
            folder = tmp_path / f"folders-{p}"
            assert (folder / "00000000000000000000.log").exists()
            assert (folder / "partition.metadata").read_text() == (
                f"version: 0\ntopic_id: {topic_id_to_str(topic.topic_id)}\n")
        # __consumer_offsets folders appear on first write, not at start
        assert not (tmp_path / "__consumer_offsets-0").exists()
        admin.delete_topics(["folders"])
        assert not any(p.name.startswith("folders-") for p in tmp_path.iterdir())
    finally:
        admin.close()


def test_partition_data_survives_a_clean_restart(make_broker, tmp_path):
    node = make_broker(data_dir=tmp_path)
    node.call(lambda: node.broker.topics.create("durable", 1, {}))
    info = node.call(lambda: node.broker.logs.get("durable", 0).append(_batch([b"a", b"b", b"c"])))
    assert (info.first_offset, info.last_offset) == (0, 2)
    node.stop()
    assert (tmp_path / ".kafka_cleanshutdown").exists()

    again = make_broker(data_dir=tmp_path)
    plog = again.broker.logs.get("durable", 0)
    assert plog.log_end_offset == 3
    records = MemoryRecords(plog.read(0, 1 << 20))
    batch = records.next_batch()
    assert [r.value for r in batch] == [b"a", b"b", b"c"]
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # only vouches for the last stop


def test_topic_config_reaches_the_partition_log(make_broker, tmp_path):
    node = make_broker(data_dir=tmp_path, overrides={"kcoord.fsync.policy": "batch"})
    node.call(lambda: node.broker.topics.create(
        "tuned", 1, {"cleanup.policy": "compact", "segment.bytes": "1048576"}))
    config = node.broker.logs.get("tuned", 0).config
    assert config.compact and config.segment_bytes == 1048576
    assert config.flush_policy == "batch"
    # broker defaults reach topics without overrides (development default segment size)
    node.call(lambda: node.broker.topics.create("plain", 1, {}))
    assert node.broker.logs.get("plain", 0).config.segment_bytes == 67108864
