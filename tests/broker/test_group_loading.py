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


@pytest.mark.parametrize("garbage", [b"\x00\x01\xff", b"\x00\x02", b"", b"\x00", b"\x07"])
@pytest.mark.parametrize("transactional", [False, True])
def test_an_unreadable_record_costs_itself_not_its_partition(garbage, transactional):
    from kcoord.protocol import group_records as G
    from kcoord.broker.groups.loader import TxnMarker, TxnRecords, replay
    good = (G.offset_commit_key("g", "t", 0), G.offset_commit_value(7, "", 1))
    bad = (garbage, b"\x00\x03junk")
    records = [TxnRecords(5, [bad]), TxnMarker(5, commit=True)] if transactional else [bad]
    loaded = replay(records * 2 + [good])
    assert loaded.unreadable == 1  # once per key, as the last record of a key counts
    assert loaded.offsets["g"][("t", 0)].offset == 7


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
