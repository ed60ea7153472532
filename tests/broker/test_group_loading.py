"""``__consumer_offsets`` is replayed in the background after the broker starts
listening (as Kafka's CoordinatorLoader does): meanwhile the groups of a partition
still loading get COORDINATOR_LOAD_IN_PROGRESS (Heartbeat: NONE), other
groups are served, and once loaded every group and offset is back."""

from __future__ import annotations

import threading

import pytest

from kcoord.broker.groups import service
from kcoord.broker.groups.placement import coordinator_partition
from kcoord.protocol.client import WireClient

SUB = b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"


def _join(client, group, member=""):
    return client.call(11, 9, {
        "group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000,
        "member_id": member, "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUB}], "reason": None})


def _commit(client, group, offset):
    return client.call(8, 9, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": "loaded", "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": "kept"}]}]})


def _fetch(client, group):
    return client.call(9, 8, {"require_stable": False, "groups": [
        {"group_id": group, "topics": None}]})["groups"][0]


def test_groups_of_a_loading_partition_wait_and_the_rest_are_served(make_broker, tmp_path,
                                                                     monkeypatch):
    data = tmp_path / "data"
    first = make_broker(data)
    with WireClient.to(first.bootstrap) as client:
        client.call(19, 4, {"topics": [{"name": "loaded", "num_partitions": 1,
                                        "replication_factor": 1, "assignments": [],
                                        "configs": []}],
                            "timeout_ms": 5000, "validate_only": False})
        assert _commit(client, "waiting", 42)["topics"][0]["partitions"][0]["error_code"] == 0
    first.stop()
    loading = coordinator_partition("waiting", 50)
    other = next(g for g in (f"free-{i}" for i in range(100))
                 if coordinator_partition(g, 50) != loading)

    gate = threading.Event()
    real = service.load_partition

    def slow(plog):
        if plog.name.endswith(f"-{loading}"):
            assert gate.wait(30)
        return real(plog)

    monkeypatch.setattr(service, "load_partition", slow)
    node = make_broker(data)  # started: listening while the partition loads
    try:
        with WireClient.to(node.bootstrap) as client:
            assert _join(client, "waiting")["error_code"] == 14
            assert _fetch(client, "waiting")["error_code"] == 14
            assert _commit(client, "waiting", 1)["topics"][0]["partitions"][0]["error_code"] == 14
            assert client.call(12, 4, {"group_id": "waiting", "generation_id": 1,
                                       "member_id": "m", "group_instance_id": None}
                               )["error_code"] == 0  # answered blindly, as Kafka
            assert client.call(16, 4, {"states_filter": []})["error_code"] == 14
            assert client.call(15, 5, {"groups": ["waiting"],
                                       "include_authorized_operations": False}
                               )["groups"][0]["error_code"] == 14
            assert _join(client, other)["error_code"] == 79  # MEMBER_ID_REQUIRED: served
            gate.set()
            assert node.call(lambda: node.broker.groups.loaded.wait())
            fetched = _fetch(client, "waiting")
            assert fetched["error_code"] == 0
            [partition] = fetched["topics"][0]["partitions"]
            assert (partition["committed_offset"], partition["metadata"]) == (42, "kept")
            listed = client.call(16, 4, {"states_filter": []})
            assert listed["error_code"] == 0
            assert "waiting" in {g["group_id"] for g in listed["groups"]}
    finally:
        gate.set()


def _batch(pairs):
    """``pairs`` as the replay reads them from the log: one encoded batch."""
    from kcoord.broker.groups.loader import PlainBatch
    from kcoord.protocol.records import batch_header, batch_payload, build_keyed_batch
    data = build_keyed_batch(pairs, base_offset=0, timestamp=1)
    header = batch_header(data)
    return PlainBatch(batch_payload(data, header=header), header.records_count)


@pytest.mark.parametrize("garbage", [b"\x00\x01\xff", b"\x00\x02", b"", b"\x00", b"\x07"])
@pytest.mark.parametrize("transactional", [False, True, "batch"])
def test_an_unreadable_record_costs_itself_not_its_partition(garbage, transactional):
    from kcoord.protocol import group_records as G
    from kcoord.broker.groups.loader import TxnMarker, TxnRecords, replay
    good = (G.offset_commit_key("g", "t", 0), G.offset_commit_value(7, "", 1))
    bad = (garbage, b"\x00\x03junk")
    if transactional == "batch":
        records = [_batch([bad, bad, good])]
    else:
        records = [TxnRecords(5, [bad]), TxnMarker(5, commit=True)] if transactional else [bad]
    loaded = replay(records * 2 + [good])
    assert loaded.unreadable == 1  # once per key, as the last record of a key counts
    assert loaded.offsets["g"][("t", 0)].offset == 7


def _summary(loaded):
    return (loaded.offsets, loaded.written_at, loaded.pending_txn, loaded.records,
            loaded.skipped, loaded.unreadable,
            [(g, group.generation, group.protocol_name) for g, group in loaded.groups.items()],
            list(loaded.consumer_groups))  # in the order of their last record


def _record_strategy():
    from hypothesis import strategies as st
    from kcoord.protocol import group_records as G
    groups, topics = ["a", "b"], ["t"]
    offset_key = st.builds(G.offset_commit_key, st.sampled_from(groups), st.sampled_from(topics),
                           st.integers(0, 2))
    old_key = offset_key.map(lambda k: b"\x00\x00" + k[2:])  # key v0, the same as v1
    meta_key = st.sampled_from(groups).map(G.group_metadata_key)
    meta_value = st.builds(lambda gen: G.group_metadata_value({
        "protocol_type": "consumer", "generation": gen, "protocol": "range", "leader": "m",
        "current_state_timestamp": 1, "members": []}), st.integers(0, 5))
    commit = st.builds(G.offset_commit_value, st.integers(0, 100), st.just(""),
                       st.integers(1, 10))
    # a consumer group record (key version 3): its key moves to the end when
    # written again, so a group deleted and made again comes back last
    cg_key = st.sampled_from(groups).map(
        lambda g: G.consumer_group_key(G.CONSUMER_GROUP_METADATA, g))
    cg_value = st.integers(1, 5).map(
        lambda epoch: G.consumer_group_value(G.CONSUMER_GROUP_METADATA, {"epoch": epoch}))
    return st.one_of(
        st.tuples(st.one_of(offset_key, old_key), st.one_of(commit, st.none(), st.just(b""))),
        st.tuples(meta_key, st.one_of(meta_value, st.none())),
        st.tuples(cg_key, st.one_of(cg_value, st.none())),
        st.tuples(st.sampled_from([None, b"", b"\x00", b"\x07", b"\x00\x09xx"]),
                  st.one_of(st.none(), st.just(b"\x00\x03junk"))))


def _log_strategy():
    from hypothesis import strategies as st
    from kcoord.broker.groups.loader import TxnMarker, TxnRecords
    records = _record_strategy()
    plain = st.lists(records, min_size=1, max_size=6).map(lambda pairs: ("plain", pairs))
    txn = st.builds(lambda pid, pairs: ("txn", TxnRecords(pid, pairs)), st.integers(1, 2),
                    st.lists(records, min_size=1, max_size=3))
    marker = st.builds(lambda pid, commit: ("marker", TxnMarker(pid, commit)),
                       st.integers(1, 2), st.booleans())
    return st.lists(st.one_of(plain, txn, marker), max_size=12)


def _replay_both(items):
    from kcoord.broker.groups.loader import replay
    one_by_one, batched = [], []
    for kind, item in items:
        if kind == "plain":
            one_by_one.extend(item)
            batched.append(_batch(item))
        else:
            one_by_one.append(item)
            batched.append(item)
    return replay(one_by_one), replay(batched)


def test_a_batch_is_replayed_as_its_records_one_by_one():
    """The replay folds a batch outside transactions while walking its bytes;
    what it builds is what the records given one by one build: offsets (keys v0
    and v1 as one), tombstones, group metadata, unreadable keys, the order
    transactions compare against, transactional offsets a tombstone drops."""
    from hypothesis import given, settings

    @settings(max_examples=300, deadline=None)
    @given(_log_strategy())
    def check(items):
        expected, got = _replay_both(items)
        assert _summary(got) == _summary(expected)

    check()


def test_a_batch_past_one_byte_varints_is_replayed_as_its_records_one_by_one():
    # Offset deltas of 64 and more and records of 64 bytes and more (two-byte
    # varints), values of 8 KiB and more (three), in one batch.
    from kcoord.protocol import group_records as G
    pairs = [(G.offset_commit_key(f"g{i % 5}", "t", i % 7),
              G.offset_commit_value(i, "m" * (i * 61 % 9000), i)) for i in range(300)]
    items = [("plain", pairs)]
    expected, got = _replay_both(items)
    assert _summary(got) == _summary(expected)
    assert got.offsets["g4"][("t", 3)].offset == 269 and got.records == 300


def _shorter_first(payload: bytes) -> bytes:
    """The first record's length one byte short and the second's one byte long:
    the batch's total is right, the first record's fields run past its end."""
    first = payload[0] >> 1
    second_at = 1 + first
    second = payload[second_at] >> 1
    return (bytes([(first - 1) << 1]) + payload[1:second_at]
            + bytes([(second + 1) << 1]) + payload[second_at + 1:])


def test_a_damaged_batch_fails_the_load_instead_of_replaying_part_of_it():
    from kcoord.broker.groups.loader import PlainBatch, replay
    from kcoord.protocol import group_records as G
    from kcoord.protocol.records import CorruptRecordError
    whole = _batch([(G.offset_commit_key("g", "t", 0), G.offset_commit_value(7, "", 1))] * 2)
    for damaged in (PlainBatch(whole.payload[:-1], 2), PlainBatch(whole.payload + b"\x00", 2),
                    PlainBatch(whole.payload, 3), PlainBatch(b"\x7f" + whole.payload[1:], 2),
                    PlainBatch(_shorter_first(whole.payload), 2)):
        with pytest.raises(CorruptRecordError):
            replay([damaged])
    assert replay([whole]).offsets["g"][("t", 0)].offset == 7


def test_a_transaction_committed_after_a_newer_plain_commit_keeps_the_newer_offset():
    # Kafka's replay of an end marker keeps an offset committed outside the
    # transaction after the transaction's own commit of it (its record is newer).
    from kcoord.protocol import group_records as G
    from kcoord.broker.groups.loader import TxnMarker, TxnRecords, replay
    key = G.offset_commit_key("g", "t", 0)
    loaded = replay([TxnRecords(7, [(key, G.offset_commit_value(3, "", 1))]),
                     (key, G.offset_commit_value(5, "", 2)),
                     TxnMarker(7, commit=True)])
    assert loaded.offsets["g"][("t", 0)].offset == 5
    assert loaded.written_at["g"][("t", 0)] == -1  # the plain commit: the last record


def test_a_deleted_offset_leaves_no_pending_transactional_offset_behind():
    # A tombstone drops the offset from the open transactions too (Kafka's
    # OffsetMetadataManager.replay): the transaction, still open when the log
    # ends, holds only the other partition.
    from kcoord.protocol import group_records as G
    from kcoord.broker.groups.loader import TxnRecords, replay
    gone, kept = G.offset_commit_key("g", "t", 0), G.offset_commit_key("g", "t", 1)
    loaded = replay([TxnRecords(7, [(gone, G.offset_commit_value(3, "", 1)),
                                    (kept, G.offset_commit_value(4, "", 1))]),
                     (gone, None)])
    assert set(loaded.pending_txn[7]["g"]) == {("t", 1)}
    assert "g" not in loaded.offsets


def test_compaction_keeps_the_offsets_store_small_and_replays_the_same(tmp_path):
    """A commit storm on few keys: compacting ``__consumer_offsets`` keeps one record
    per key (tombstones too, for ``delete.retention.ms``), and replaying the
    compacted log gives the same groups and offsets as the whole log."""
    from kcoord.broker.groups.loader import load_partition, offsets_records
    from kcoord.protocol import group_records as G
    from kcoord.protocol.records import Record, build_batch
    from kcoord.storage.config import LogConfig
    from kcoord.storage.log import PartitionLog
    from kcoord.storage.validator import AppendOrigin

    log = PartitionLog(str(tmp_path / "__consumer_offsets-0"),
                       LogConfig(segment_bytes=16_384, cleanup_policy="compact"))
    member = {"member_id": "m", "group_instance_id": None, "client_id": "c",
              "client_host": "/127.0.0.1", "rebalance_timeout": 1000, "session_timeout": 6000,
              "subscription": b"s", "assignment": b"a"}
    for n in range(2_000):
        records = [(G.offset_commit_key("g", "t", n % 5), G.offset_commit_value(n, "", n))]
        if n % 100 == 0:
            records.append((G.group_metadata_key("g"), G.group_metadata_value({
                "protocol_type": "consumer", "generation": n // 100, "protocol": "range",
                "leader": "m", "current_state_timestamp": n, "members": [member]})))
        if n == 10:
            records.append((G.offset_commit_key("g", "t", 9), G.offset_commit_value(1, "", n)))
        if n == 1_500:
            records.append((G.offset_commit_key("g", "t", 9), None))  # deleted offset
        log.append(build_batch([Record(i, n, k, v) for i, (k, v) in enumerate(records)]),
                   origin=AppendOrigin.COORDINATOR)
    log.roll()
    before = load_partition(log)
    size = log.size_bytes
    assert log.compact(force=True) is not None
    assert log.size_bytes < size / 20
    after = load_partition(log)
    assert after.offsets == before.offsets
    assert after.offsets["g"][("t", 3)].offset == 1_998 and ("t", 9) not in after.offsets["g"]
    assert after.groups["g"].generation == before.groups["g"].generation == 19
    assert len(list(offsets_records(log))) <= 7  # one record per key, the tombstone too
    log.close()


def test_deleting_a_topic_drops_its_committed_offsets_in_every_group(make_broker, tmp_path):
    data = tmp_path / "data"
    node = make_broker(data)
    with WireClient.to(node.bootstrap) as client:
        for name in ("gone", "kept"):
            client.call(19, 4, {"topics": [{"name": name, "num_partitions": 1,
                                            "replication_factor": 1, "assignments": [],
                                            "configs": []}],
                                "timeout_ms": 5000, "validate_only": False})
        for group in ("g1", "g2"):
            answer = client.call(8, 9, {
                "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "topics": [
                    {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                "committed_leader_epoch": -1,
                                                "committed_metadata": ""}]}
                    for t in ("gone", "kept")]})
            assert [p["error_code"] for t in answer["topics"] for p in t["partitions"]] == [0, 0]
        assert client.call(20, 4, {"topic_names": ["gone"], "timeout_ms": 5000}
                           )["responses"][0]["error_code"] == 0

        def topics_of(group):
            return [t["name"] for t in _fetch(client, group)["topics"]]

        assert topics_of("g1") == topics_of("g2") == ["kept"]
    node.stop()
    again = make_broker(data)  # the tombstones were written: the offsets stay gone
    assert again.call(lambda: again.broker.groups.loaded.wait())
    with WireClient.to(again.bootstrap) as client:
        assert [t["name"] for t in _fetch(client, "g1")["topics"]] == ["kept"]


def test_a_shard_that_fails_to_take_over_its_replay_fails_its_partition_alone(
        make_broker, tmp_path, monkeypatch):
    from kcoord.broker.groups.coordinator import GroupCoordinator
    data = tmp_path / "data"
    first = make_broker(data)
    failing = "failing"
    other = next(g for g in (f"kept-{i}" for i in range(100))
                 if coordinator_partition(g, 50) != coordinator_partition(failing, 50))
    with WireClient.to(first.bootstrap) as client:
        client.call(19, 4, {"topics": [{"name": "loaded", "num_partitions": 1,
                                        "replication_factor": 1, "assignments": [],
                                        "configs": []}],
                            "timeout_ms": 5000, "validate_only": False})
        for group in (failing, other):
            assert _commit(client, group, 42)["topics"][0]["partitions"][0]["error_code"] == 0
    first.stop()
    real = GroupCoordinator.install

    def install(self, loaded, now):
        if self.partition == coordinator_partition(failing, 50):
            raise RuntimeError("cannot take over")
        return real(self, loaded, now)

    monkeypatch.setattr(GroupCoordinator, "install", install)
    node = make_broker(data)
    assert node.call(lambda: node.broker.groups.loaded.wait()) is True
    with WireClient.to(node.bootstrap) as client:
        assert _fetch(client, failing)["error_code"] == 16  # NOT_COORDINATOR
        fetched = _fetch(client, other)
        assert fetched["error_code"] == 0
        assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 42
    assert node.call(lambda: node.broker.groups.runtime.failed) == [
        coordinator_partition(failing, 50)]
