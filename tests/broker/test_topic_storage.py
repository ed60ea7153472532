"""Topics and their partition folders in the data dir (Kafka's on-disk layout)."""

from __future__ import annotations

from kafka.admin import KafkaAdminClient
from kafka.record import MemoryRecords, MemoryRecordsBuilder

from kcoord.broker.topics.manager import topic_id_to_str


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


def test_topic_whose_partitions_cannot_be_created_is_not_kept(make_broker, tmp_path, monkeypatch):
    node = make_broker(data_dir=tmp_path)
    import kcoord.storage.manager as manager

    real_log = manager.PartitionLog
    calls = {"n": 0}

    def flaky_log(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(24, "Too many open files")
        return real_log(*args, **kwargs)

    monkeypatch.setattr(manager, "PartitionLog", flaky_log)
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10000)
    try:
        result = admin.create_topics({"too-big": {"num_partitions": 5, "replication_factor": 1}},
                                     raise_errors=False)
        assert result["topics"][0]["error_code"] == -1  # UNKNOWN_SERVER_ERROR, connection kept
        assert "too-big" not in admin.list_topics()
    finally:
        admin.close()
    monkeypatch.undo()
    assert not any(p.name.startswith("too-big-") for p in tmp_path.iterdir())
    node.stop()
    again = make_broker(data_dir=tmp_path)  # restarts fine, without the topic
    assert again.broker.topics.get("too-big") is None


def _assert_stop_waits_for(node, entered, release, what: str) -> None:
    """Once ``entered`` is set, ``node.stop()`` must not return until ``release``."""
    import threading

    assert entered.wait(10)
    stopper = threading.Thread(target=node.stop)
    stopper.start()
    stopper.join(0.3)
    assert stopper.is_alive(), f"stop must wait for {what}"
    release.set()
    stopper.join(15)
    assert not stopper.is_alive()


def test_stop_waits_for_a_running_compaction_pass(make_broker, tmp_path):
    import threading
    import kcoord.storage.log as log_module

    node = make_broker(data_dir=tmp_path, overrides={"log.cleaner.backoff.ms": 10})
    node.call(lambda: node.broker.topics.create("compacted", 1, {"cleanup.policy": "compact"}))
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    real_compact = log_module.PartitionLog.compact

    def slow_compact(self, now_ms=None, *, force=False):
        entered.set()
        release.wait(10)
        result = real_compact(self, now_ms, force=force)
        finished.set()
        return result

    log_module.PartitionLog.compact = slow_compact
    try:
        _assert_stop_waits_for(node, entered, release, "the compaction pass")
        assert finished.is_set()
    finally:
        log_module.PartitionLog.compact = real_compact
        release.set()
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_stop_waits_for_a_flush_in_flight(make_broker, tmp_path, monkeypatch):
    """An append waiting for its fsync (``batch`` policy) when the broker stops is
    answered, and its files are closed only after the fsync: no storage error and
    the clean-shutdown marker is written."""
    import asyncio
    import os
    import threading

    node = make_broker(data_dir=tmp_path, overrides={"kcoord.fsync.policy": "batch"})
    node.call(lambda: node.broker.topics.create("flushed", 1, {}))
    plog = node.broker.logs.get("flushed", 0)
    entered, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd):
        entered.set()
        release.wait(10)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    pending = asyncio.run_coroutine_threadsafe(plog.append_async(_batch([b"late"])), node.loop)
    _assert_stop_waits_for(node, entered, release, "the fsync in flight")
    info = pending.result(5)
    assert info.last_offset == 0 and not plog.offline
    monkeypatch.undo()
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_a_segment_size_kept_below_kafka_4_s_floor_still_starts_and_keeps_its_segments(
        make_broker, tmp_path):
    """A data dir from before the 1 MiB floor (a topic with segment.bytes=1024, as
    an older kcoord accepted) and offsets.topic.segment.bytes set below it: the
    broker starts, and those segment sizes are kept as internal.segment.bytes."""
    from kcoord.broker.topics.store import TopicStore
    from kcoord.broker.topics.manager import new_topic_id

    TopicStore(tmp_path).record(created=[{"name": "old-small", "partitions": 1,
                                          "topic_id": topic_id_to_str(new_topic_id()),
                                          "configs": {"segment.bytes": "1024"}}])
    node = make_broker(data_dir=tmp_path,
                       overrides={"offsets.topic.segment.bytes": "65536"})
    assert node.broker.logs.get("old-small", 0).config.segment_bytes == 1024
    assert node.broker.topics.get("old-small").configs == {"internal.segment.bytes": "1024"}
    offsets = node.broker.topics.get("__consumer_offsets")
    assert offsets.configs["internal.segment.bytes"] == "65536"
    assert node.broker.log_config("__consumer_offsets").segment_bytes == 65536


def test_topic_configs_kafka_4_removed_are_dropped_from_an_older_data_dir(make_broker, tmp_path):
    """A data dir holding a topic with configs Kafka 4.0 removed (as an older
    kcoord accepted them): the broker starts without them and the topic's other
    configs stay, and it can be altered (no unknown name left to refuse)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    from kcoord.broker.topics.manager import new_topic_id
    from kcoord.broker.topics.store import TopicStore

    TopicStore(tmp_path).record(created=[{"name": "old-configs", "partitions": 1,
                                          "topic_id": topic_id_to_str(new_topic_id()),
                                          "configs": {"message.format.version": "2.8",
                                                      "message.downconversion.enable": "false",
                                                      "retention.ms": "5000"}}])
    node = make_broker(data_dir=tmp_path)
    assert node.broker.topics.get("old-configs").configs == {"retention.ms": "5000"}
    # stored without them: the next start does not drop (and log) them again
    assert TopicStore(tmp_path).load()["old-configs"]["configs"] == {"retention.ms": "5000"}
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "old-configs",
                                            configs={"retention.ms": "7000"})])
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC,
                                                           "old-configs")])
    finally:
        admin.close()
    own = {name: entry["value"] for name, entry in described["topic"]["old-configs"].items()
           if entry["config_source"] == "DYNAMIC_TOPIC_CONFIG"}
    assert own == {"retention.ms": "7000"}
