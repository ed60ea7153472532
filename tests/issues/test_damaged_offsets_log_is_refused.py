"""A damaged ``__consumer_offsets`` batch was skipped silently, and commits
acknowledged after it were lost.  With bytes flipped mid-segment after a clean
stop, the load stopped at the damage and logged at info; the groups whose
newest commits lay beyond it were served older offsets (consumers re-read);
new commits were acknowledged at offsets past the damage; the next crash's
recovery truncated at the damage and all of them were gone.

Now the coordinator loads a partition only whole (every batch's layout,
CRC-32C and offsets checked, no byte passed over); a partition that cannot be
loaded is not served: its groups get NOT_COORDINATOR (as Kafka 4.x answers on
the same damage), an ERROR names the segment, byte and offset, and nothing is
ever appended after the damage.  Recovery after a crash logs the bytes and
offsets it truncates as a warning, as Kafka does."""

from __future__ import annotations

import os

import pytest
import structlog

from kcoord.broker.groups.placement import coordinator_partition
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.records import Record, build_batch, decode_batch
from kcoord.storage.config import LogConfig
from kcoord.storage.errors import CorruptLogError
from kcoord.storage.log import PartitionLog
from kcoord.protocol.client import WireClient
from tests.support import BrokerProcess

# -- the validating read --------------------------------------------------------------


def _log(path, batches=6, records=3, keys=20, **config) -> PartitionLog:
    plog = PartitionLog(str(path), LogConfig(**config))
    for b in range(batches):
        plog.append(build_batch([Record(None, 1000 + b, b"k%d" % ((b * records + i) % keys),
                                        b"v%d-%d" % (b, i)) for i in range(records)]),
                    now_ms=1000 + b)
    return plog


def _segment_file(plog: PartitionLog, base: int = 0) -> str:
    return os.path.join(plog.directory, f"{base:020d}.log")


def _batch_positions(plog: PartitionLog) -> list[int]:
    positions, pos = [], 0
    for data in plog.batches():
        positions.append(pos)
        pos += len(data)
    return positions


def _damage(path: str, position: int, value: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(position)
        fh.write(value)


def _reopen(plog: PartitionLog, **config) -> PartitionLog:
    """The same folder opened again after a clean stop (its files trusted)."""
    plog.close()
    return PartitionLog(plog.directory, LogConfig(**config), clean_shutdown=True,
                        recovery_point=plog.log_end_offset)


@pytest.mark.parametrize("chunk", [1 << 20, 64, 130, 150, 199, 200, 201, 333])
def test_an_intact_log_is_read_whole(tmp_path, chunk):
    """Chunks of every alignment to the 100-byte batches: smaller than a batch,
    ending inside a batch's header, on a boundary, across segments."""
    plog = _log(tmp_path / "t-0", batches=40, segment_bytes=700)
    assert len(plog.segments) > 3
    assert list(plog.verified_batches(chunk_bytes=chunk)) == list(plog.batches())
    plog.close()


def test_a_log_start_on_a_batch_boundary_skips_the_batches_before_it(tmp_path):
    plog = _log(tmp_path / "t-0", batches=10, segment_bytes=450)
    plog.advance_log_start_offset(12)  # the first offset of the fifth batch
    read = list(plog.verified_batches())
    assert [decode_batch(b).base_offset for b in read] == [12, 15, 18, 21, 24, 27]
    plog.advance_log_start_offset(13)  # inside it: the batch is read whole
    assert decode_batch(next(plog.verified_batches())).base_offset == 12
    plog.close()


def test_the_read_goes_on_in_the_segments_a_compaction_swaps_in(tmp_path):
    """Between two chunks the cleaner replaces the segments being read: the read
    goes on in their replacement from the offset it reached, each offset once."""
    plog = _log(tmp_path / "t-0", batches=60, keys=7, segment_bytes=700,
                cleanup_policy=("compact",))
    plog.roll()
    reader = plog.verified_batches(chunk_bytes=250)
    first = [next(reader) for _ in range(4)]
    plog.compact(force=True)
    rest = list(reader)
    offsets = [r.offset for b in first + rest for r in decode_batch(b).records]
    assert offsets == sorted(set(offsets))
    assert offsets[:12] == list(range(12))  # read before the swap
    latest = {}
    for b in plog.batches():
        for r in decode_batch(b).records:
            latest[r.key] = r.offset
    seen = {}
    for b in first + rest:
        for r in decode_batch(b).records:
            seen[r.key] = r.offset
    assert seen == latest  # every key's newest record was read
    plog.close()


@pytest.mark.parametrize("where,value,reason", [
    (50, b"\x00", "CRC"),  # the producer id, inside the CRC: it no longer matches
    (8, b"\x7f", "batch length"),  # the batch length
    (16, b"\x05", "magic"),  # the magic byte
    (0, b"\x00" * 8, "offset 0 after offset 5"),  # base offset (outside the CRC) goes back
])
def test_damage_mid_log_stops_the_read_where_it_is(tmp_path, where, value, reason):
    plog = _log(tmp_path / "t-0")
    third = _batch_positions(plog)[2]
    _damage(_segment_file(plog), third + where, value)
    plog = _reopen(plog)
    read = []
    with pytest.raises(CorruptLogError, match=reason) as caught:
        for batch in plog.verified_batches():
            read.append(batch)
    assert len(read) == 2
    assert (caught.value.offset, caught.value.segment, caught.value.position) == (6, 0, third)
    after = plog.active_segment.size - third
    assert caught.value.bytes_after == after
    assert f"at byte {third} of segment 00000000000000000000.log: the log cannot be read " \
           f"from offset 6 on ({after} bytes to the end of that segment)" in str(caught.value)
    plog.close()


def test_a_first_batch_whose_offset_goes_below_the_log_start_is_damage(tmp_path):
    plog = _log(tmp_path / "t-0")
    _damage(_segment_file(plog), 0, b"\xff" * 8)  # base offset -1
    plog = _reopen(plog)
    with pytest.raises(CorruptLogError, match=r"offset -1 after offset -1") as caught:
        list(plog.verified_batches())
    assert (caught.value.offset, caught.value.position) == (0, 0)
    plog.close()


def test_a_segment_file_cut_at_a_batch_boundary_is_damage_not_a_hang(tmp_path):
    """A read of nothing where the segment's size promises bytes is damage too
    (it made the walk spin forever, the partition loading for ever)."""
    import threading

    plog = _log(tmp_path / "t-0")
    third = _batch_positions(plog)[2]
    os.truncate(_segment_file(plog), third)
    outcome = []

    def read():
        try:
            list(plog.verified_batches(chunk_bytes=150))
        except CorruptLogError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    size = plog.active_segment.size
    assert [(e.position, e.offset, e.segment, e.bytes_after) for e in outcome] == \
        [(third, 6, 0, size - third)]
    assert f"a segment file shorter than its size at byte {third} of segment " \
           f"00000000000000000000.log: the log cannot be read from offset 6 on " \
           f"({size - third} bytes to the end of that segment)" in str(outcome[0])
    plog.close()


def test_a_segment_file_shorter_than_its_size_is_damage(tmp_path):
    plog = _log(tmp_path / "t-0")
    last = _batch_positions(plog)[-1]
    os.truncate(_segment_file(plog), plog.active_segment.size - 30)
    with pytest.raises(CorruptLogError, match="a segment file shorter than its size") as caught:
        list(plog.verified_batches(chunk_bytes=250))
    assert caught.value.position == last and caught.value.offset == 15
    plog.close()


def test_stray_bytes_after_the_last_batch_are_damage(tmp_path):
    plog = _log(tmp_path / "t-0")
    size = plog.active_segment.size
    plog.close()
    with open(os.path.join(str(tmp_path / "t-0"), f"{0:020d}.log"), "ab") as fh:
        fh.write(b"\x00" * 30)
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig(), clean_shutdown=True,
                        recovery_point=18)
    assert plog.active_segment.size == size + 30
    with pytest.raises(CorruptLogError, match=f"30 stray bytes at byte {size} ") as caught:
        list(plog.verified_batches())
    assert caught.value.position == size
    plog.close()


def test_compaction_gaps_and_a_log_start_mid_segment_are_not_damage(tmp_path):
    plog = _log(tmp_path / "t-0", batches=30, segment_bytes=600, cleanup_policy=("compact",))
    plog.roll()
    plog.compact(force=True)
    offsets = [r.offset for b in plog.verified_batches() for r in _records(b)]
    assert offsets == sorted(offsets) and len(offsets) < 90  # gaps left by the cleaner
    plog.advance_log_start_offset(offsets[len(offsets) // 2])
    after = [r.offset for b in plog.verified_batches() for r in _records(b)]
    assert after[-1] == offsets[-1] and len(after) < len(offsets)
    plog.close()


def _records(batch: bytes):
    return decode_batch(batch).records


# -- the broker -----------------------------------------------------------------------


def _commit(client, group, offset):
    answer = client.call(8, 9, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    return answer["topics"][0]["partitions"][0]["error_code"]


def _fetch(client, group):
    return client.call(9, 8, {"require_stable": False, "groups": [
        {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}]})["groups"][0]


def _create_orders(client) -> None:
    answer = client.call(19, 4, {"topics": [{"name": "orders", "num_partitions": 1,
                                             "replication_factor": 1, "assignments": [],
                                             "configs": []}],
                                 "timeout_ms": 5000, "validate_only": False})
    assert answer["topics"][0]["error_code"] == E.NONE


def _wait_loaded(client, group):
    import time

    deadline = time.monotonic() + 30
    while (answer := _fetch(client, group))["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return answer


def test_a_damaged_offsets_partition_is_refused_and_nothing_is_written_past_it(tmp_path):
    data = tmp_path / "data"
    damaged = "orders-app"
    partition = coordinator_partition(damaged, 50)
    healthy = next(g for g in (f"billing-{i}" for i in range(100))
                   if coordinator_partition(g, 50) != partition)
    broker = BrokerProcess(data).start()
    with WireClient.to(broker.bootstrap) as client:
        _create_orders(client)
        for offset in range(1, 21):
            assert _commit(client, damaged, offset) == E.NONE
        assert _commit(client, healthy, 7) == E.NONE
    assert broker.terminate() == 0

    folder = data / f"__consumer_offsets-{partition}"
    segment = folder / f"{0:020d}.log"
    size = segment.stat().st_size
    _damage(str(segment), size // 2, b"\xff\xff\xff\xff")  # mid-segment, after a clean stop
    damaged_bytes = segment.read_bytes()

    broker = BrokerProcess(data).start()
    try:
        with WireClient.to(broker.bootstrap) as client:
            assert _wait_loaded(client, healthy)["topics"][0]["partitions"][0][
                "committed_offset"] == 7
            assert _fetch(client, damaged)["error_code"] == E.NOT_COORDINATOR
            assert _commit(client, damaged, 99) == E.NOT_COORDINATOR
            joined = client.call(11, 9, {
                "group_id": damaged, "session_timeout_ms": 10_000,
                "rebalance_timeout_ms": 10_000, "member_id": "", "group_instance_id": None,
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
                "reason": None})
            assert joined["error_code"] == E.NOT_COORDINATOR
            described = client.call(15, 5, {"groups": [damaged],
                                            "include_authorized_operations": False})
            assert described["groups"][0]["error_code"] == E.NOT_COORDINATOR
            # The coordinator is still this broker (its partition's leader), as in Kafka.
            assert client.call(10, 3, {"key": damaged, "key_type": 0})["error_code"] == E.NONE
            assert _commit(client, healthy, 8) == E.NONE
        failed = [e for e in broker.events if e.get("event") == "groups.load_failed"]
        assert len(failed) == 1
        assert failed[0]["level"] == "error"
        assert failed[0]["partition"] == partition
        assert failed[0]["segment"] == f"{0:020d}" and failed[0]["position"] <= size // 2
        assert "NOT_COORDINATOR" in failed[0]["reason"]
    finally:
        broker.kill()  # a crash: the next start recovers the active segments
    assert segment.read_bytes() == damaged_bytes  # nothing appended after the damage

    broker = BrokerProcess(data).start()
    try:
        truncated = [e for e in broker.events if e.get("event") == "segment_truncated"]
        assert truncated and truncated[0]["level"] == "warning"
        assert truncated[0]["log"] == f"__consumer_offsets-{partition}"
        assert truncated[0]["bytes_truncated"] > 0
        assert truncated[0]["bytes_before"] == \
            truncated[0]["bytes_valid"] + truncated[0]["bytes_truncated"]
        assert 0 < truncated[0]["truncated_to_offset"] < 21
        with WireClient.to(broker.bootstrap) as client:
            # What recovery kept is served; the healthy group lost nothing.
            kept = _wait_loaded(client, damaged)["topics"][0]["partitions"][0]
            assert kept["committed_offset"] == truncated[0]["truncated_to_offset"]
            assert _wait_loaded(client, healthy)["topics"][0]["partitions"][0][
                "committed_offset"] == 8
    finally:
        assert broker.terminate() == 0


def test_a_partition_that_fails_to_load_is_refused_in_process(make_broker, tmp_path):
    """The same refusal for a broker embedded in a test suite."""
    data = tmp_path / "embedded"
    damaged = "orders-app"
    partition = coordinator_partition(damaged, 50)
    first = make_broker(data)
    with WireClient.to(first.bootstrap) as client:
        _create_orders(client)
        for offset in range(1, 6):
            assert _commit(client, damaged, offset) == E.NONE
    first.stop()
    segment = data / f"__consumer_offsets-{partition}" / f"{0:020d}.log"
    _damage(str(segment), segment.stat().st_size // 2, b"\xff\xff\xff\xff")
    damaged_bytes = segment.read_bytes()
    with structlog.testing.capture_logs() as logs:
        second = make_broker(data)
        with WireClient.to(second.bootstrap) as client:
            assert _wait_loaded(client, damaged)["error_code"] == E.NOT_COORDINATOR
            assert _commit(client, damaged, 9) == E.NOT_COORDINATOR
        second.stop()
    failed = [e for e in logs if e["event"] == "groups.load_failed"]
    assert [(e["log_level"], e["partition"], e["segment"]) for e in failed] == \
        [("error", partition, f"{0:020d}")]
    assert failed[0]["offset"] < 5 and failed[0]["bytes_after"] > 0
    assert any(e["event"] == "groups.partitions_not_served" and e["partitions"] == [partition]
               for e in logs)
    assert segment.read_bytes() == damaged_bytes


def test_any_load_failure_refuses_the_partition(make_broker, tmp_path, monkeypatch):
    """A load that fails with any error, not only damage the read finds."""
    from kcoord.broker.groups import service

    data = tmp_path / "broken-load"
    first = make_broker(data)
    with WireClient.to(first.bootstrap) as client:
        _create_orders(client)
        assert _commit(client, "orders-app", 3) == E.NONE
    first.stop()

    def failing(plog):
        raise RuntimeError("replay failed")

    monkeypatch.setattr(service, "load_partition", failing)
    with structlog.testing.capture_logs() as logs:
        second = make_broker(data)
        with WireClient.to(second.bootstrap) as client:
            assert _wait_loaded(client, "orders-app")["error_code"] == E.NOT_COORDINATOR
        second.stop()
    failed = [e for e in logs if e["event"] == "groups.load_failed"]
    assert len(failed) == 1 and failed[0]["log_level"] == "error"
    assert "NOT_COORDINATOR" in failed[0]["reason"]
