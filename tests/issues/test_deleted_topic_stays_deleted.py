"""A topic deleted just before a crash came back: the topic file was saved first
and the partition folders removed afterwards, and on restart every
``<topic>-<n>`` folder was opened whether a topic owned it or not.  A topic
recreated with the same name then had the old records and the old
``partition.metadata`` topic id.  Now the deletion is committed to the topic
journal first, folders are renamed to ``-delete`` before they are removed, and
at start a folder that no topic owns, or whose ``partition.metadata`` names
another topic id, is set aside as ``-stray`` and never opened (Kafka's KRaft
stray detection)."""

from __future__ import annotations

import asyncio
import os

import pytest

from kcoord.broker.config import BrokerConfig
from kcoord.broker.topics.manager import TopicManager, topic_id_to_str
from kcoord.storage.manager import LogManager, read_partition_metadata
from tests.storage.helpers import all_records, batch


def _open(data_dir):
    config = BrokerConfig.build({"log.dirs": str(data_dir)})
    topics = TopicManager(config, data_dir)
    topics.load()
    topics.attach(LogManager(str(data_dir), config_for=lambda name: (
        topics.log_config(topics.get(name)) if topics.get(name) else None)))
    return topics


def _crash(topics):
    """What SIGKILL leaves: nothing closed, nothing flushed beyond the OS."""
    for plog in topics.logs.logs.values():
        plog.close_files()
    topics.close()


@pytest.mark.parametrize("crash_point", ["before_rename", "before_removal"])
def test_a_topic_deleted_before_a_crash_never_comes_back(tmp_path, monkeypatch, crash_point):
    topics = _open(tmp_path)
    old = asyncio.run(topics.create("orders", 2, {}))
    topics.logs.get("orders", 0).append(batch([b"old-1", b"old-2"]))

    import shutil
    if crash_point == "before_rename":
        monkeypatch.setattr(LogManager, "remove_partitions", lambda self, logs, extra=None: None)
    else:
        monkeypatch.setattr(shutil, "rmtree", lambda *a, **k: None)
    asyncio.run(topics.delete(old))
    monkeypatch.undo()
    _crash(topics)

    again = _open(tmp_path)
    assert again.get("orders") is None
    assert again.logs.get("orders", 0) is None
    new = asyncio.run(again.create("orders", 2, {}))
    plog = again.logs.get("orders", 0)
    assert plog.log_end_offset == 0 and all_records(plog) == []
    assert read_partition_metadata(plog.directory) == topic_id_to_str(new.topic_id)
    assert new.topic_id != old.topic_id
    leftovers = sorted(n for n in os.listdir(tmp_path) if n.startswith("orders-"))
    if crash_point == "before_rename":
        # the old data is set aside, never served and never lost silently
        assert len([n for n in leftovers if n.endswith("-stray")]) == 2
    assert sorted(n for n in leftovers if not n.endswith("-stray")) == ["orders-0", "orders-1"]
    _crash(again)


def test_a_folder_of_another_topic_id_is_set_aside(tmp_path):
    topics = _open(tmp_path)
    created = asyncio.run(topics.create("pay", 1, {}))
    topics.logs.get("pay", 0).append(batch([b"x"]))
    _crash(topics)
    # The folder now claims another topic id (a copy from elsewhere, an old topic).
    with open(tmp_path / "pay-0" / "partition.metadata", "w") as f:
        f.write("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    again = _open(tmp_path)
    assert again.get("pay").topic_id == created.topic_id
    plog = again.logs.get("pay", 0)
    assert plog.log_end_offset == 0
    assert read_partition_metadata(plog.directory) == topic_id_to_str(created.topic_id)
    strays = [n for n in os.listdir(tmp_path) if n.startswith("pay-0.") and n.endswith("-stray")]
    assert len(strays) == 1
    _crash(again)


def test_a_partition_folder_beyond_the_partition_count_is_set_aside(tmp_path):
    topics = _open(tmp_path)
    asyncio.run(topics.create("few", 1, {}))
    _crash(topics)
    os.makedirs(tmp_path / "few-7")
    os.makedirs(tmp_path / "nobody-0")
    again = _open(tmp_path)
    assert again.logs.get("few", 7) is None and again.logs.get("nobody", 0) is None
    assert not (tmp_path / "few-7").exists() and not (tmp_path / "nobody-0").exists()
    _crash(again)


def test_a_maintenance_pass_skips_a_log_deleted_while_it_runs(tmp_path, monkeypatch):
    from kcoord.storage.config import LogConfig
    from kcoord.storage.log import PartitionLog

    manager = LogManager(str(tmp_path), LogConfig(retention_ms=0, segment_bytes=200,
                                                  cleanup_policy=("compact", "delete")))
    first = manager.get_or_create("a", 0)
    second = manager.get_or_create("b", 0)
    for plog in (first, second):
        for i in range(5):
            plog.append(batch([b"x" * 100], keys=[b"k%d" % i]))
    real = PartitionLog.delete_old_segments

    def deleted_meanwhile(self, now_ms=None):
        if self is first:
            manager.remove_partitions(manager.detach("a", 1))  # DeleteTopics on the loop
        return real(self, now_ms)

    monkeypatch.setattr(PartitionLog, "delete_old_segments", deleted_meanwhile)
    assert manager.run_retention(now_ms=10 ** 13) > 0  # b's segments still went
    assert manager.run_cleaner(now_ms=10 ** 13) == 0
    manager.dir_failed("test")
    assert manager.run_retention(now_ms=10 ** 13) == 0  # offline: nothing is touched
