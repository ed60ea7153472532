"""The topic snapshot and journal: every acknowledged change survives a crash,
a torn append is ignored, and compaction keeps the state."""

from __future__ import annotations

import json

from kcoord.broker.topics.store import MIN_COMPACT_ENTRIES, TopicStore


def _topic(name, tid="id-", partitions=1):
    return {"name": name, "topic_id": tid + name, "partitions": partitions, "configs": {}}


def test_changes_are_replayed_after_a_restart(tmp_path):
    store = TopicStore(tmp_path)
    assert store.load() == {}
    store.record(created=[_topic("a"), _topic("b")])
    store.record(deleted=[_topic("a")])
    store.record(created=[_topic("a", tid="new-")])
    loaded = TopicStore(tmp_path).load()
    assert loaded == {"a": _topic("a", tid="new-"), "b": _topic("b")}


def test_a_torn_last_append_is_ignored_and_cut(tmp_path):
    store = TopicStore(tmp_path)
    store.load()
    store.record(created=[_topic("kept")])
    with open(store.journal_path, "ab") as f:
        f.write(b'{"seq": 2, "op": "create", "topic": {"name": "to')
    again = TopicStore(tmp_path)
    assert list(again.load()) == ["kept"]
    again.record(created=[_topic("next")])  # appends after the cut, not after the torn bytes
    assert sorted(TopicStore(tmp_path).load()) == ["kept", "next"]


def test_a_delete_of_an_older_topic_id_does_not_remove_the_new_topic(tmp_path):
    store = TopicStore(tmp_path)
    store.load()
    store.record(created=[_topic("x", tid="new-")])
    store.record(deleted=[_topic("x", tid="old-")])
    assert TopicStore(tmp_path).load() == {"x": _topic("x", tid="new-")}


def test_compaction_keeps_the_state_and_bounds_the_journal(tmp_path):
    store = TopicStore(tmp_path)
    store.load()
    live = {}
    for i in range(3 * MIN_COMPACT_ENTRIES):
        name = f"t{i % 50}"
        if name in live:
            store.record(deleted=[live.pop(name)])
        else:
            live[name] = _topic(name, tid=f"g{i}-")
            store.record(created=[live[name]])
    assert TopicStore(tmp_path).load() == live
    lines = store.journal_path.read_bytes().count(b"\n")
    assert lines <= MIN_COMPACT_ENTRIES
    assert json.loads(store.snapshot_path.read_text())["journal_seq"] > 0


def test_a_crash_between_snapshot_and_journal_truncation_replays_nothing_twice(tmp_path):
    store = TopicStore(tmp_path)
    store.load()
    store.record(created=[_topic("a")])
    store.record(deleted=[_topic("a")])
    journal = store.journal_path.read_bytes()
    store.write_snapshot()
    store.journal_path.write_bytes(journal)  # the truncation never happened
    assert TopicStore(tmp_path).load() == {}


def test_a_snapshot_that_cannot_be_written_leaves_the_change_recorded(tmp_path, monkeypatch):
    # A full disk when the journal is compacted: the change is in the journal
    # (its caller is not told it failed, which would undo a change the next
    # start reads back), and the snapshot is tried again at the next change.
    from kcoord.broker.topics import store as store_module

    store = TopicStore(tmp_path)
    store.load()
    store.record(created=[_topic("kept")])
    while store._journal_entries < MIN_COMPACT_ENTRIES:  # a few topics, many changes
        if "brief" in store.topics:
            store.record(deleted=[_topic("brief")])
        else:
            store.record(created=[_topic("brief")])
    real = store_module.write_atomically

    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_module, "write_atomically", full)
    store.record(created=[_topic("last")])  # compaction due: the snapshot fails
    assert "last" in store.topics and store._journal_entries > MIN_COMPACT_ENTRIES
    assert "last" in TopicStore(tmp_path).load()
    monkeypatch.setattr(store_module, "write_atomically", real)
    store.record(created=[_topic("after")])  # tried again, and written
    assert store._journal_entries == 0
    assert sorted(TopicStore(tmp_path).load()) == sorted(["after", "kept", "last", *(
        ["brief"] if "brief" in store.topics else [])])
