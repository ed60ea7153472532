"""Fetch long-poll (the fetch purgatory) over the wire: a Fetch without enough
data waits up to ``max_wait_ms``, is answered as soon as appends bring
``min_bytes``, and a parked read of ``__consumer_offsets`` is woken by an offset
commit.  Parked fetches are observed on the broker, not guessed with sleeps."""

from __future__ import annotations

import threading
import time

from kcoord.broker.groups.placement import coordinator_partition
from kcoord.protocol.client import WireClient
from kcoord.protocol.records import Record, build_batch, decode_record_set
from tests.broker.wire_ops import create_topic as _create
from tests.broker.wire_ops import produce

OFFSETS = "__consumer_offsets"


def _batch(value: bytes):
    return build_batch([Record(None, 1_700_000_000_000, b"k", value)])


def _produce(wire, topic, records):
    part = produce(wire, topic, records)
    assert part["error_code"] == 0, part
    return part["base_offset"]


def _fetch(client, topic, offset, max_wait_ms, min_bytes, partition=0):
    answer = client.call(1, 12, {
        "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 50 << 20,
        "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "fetch_offset": offset,
             "partition_max_bytes": 1 << 20}]}]})
    (part,) = answer["responses"][0]["partitions"]
    assert part["error_code"] == 0, part
    return part


def _values(part) -> list:
    return [(r.offset, r.value) for b in decode_record_set(part["records"]) for r in b.records]


class Parked:
    """A Fetch sent from its own connection and thread; ``answer`` once answered."""

    def __init__(self, node, topic, offset, max_wait_ms, min_bytes, partition=0):
        self.node, self.tp = node, (topic, partition)
        self.answer = None
        self.waited = None
        self._thread = threading.Thread(target=self._run, daemon=True, args=(
            topic, offset, max_wait_ms, min_bytes, partition))
        self._thread.start()

    def _run(self, topic, offset, max_wait_ms, min_bytes, partition):
        with WireClient.to(self.node.bootstrap) as client:
            began = time.monotonic()
            self.answer = _fetch(client, topic, offset, max_wait_ms, min_bytes, partition)
            self.waited = time.monotonic() - began

    def waiting_on_broker(self) -> int:
        waiters = self.node.broker.fetch_waiters
        return self.node.call(lambda: waiters.parked_on(self.tp))

    def wait_until_parked(self, within_s: float = 10.0) -> None:
        """Until the broker holds this Fetch on its partition (bounded)."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if self.waiting_on_broker() == 1:
                return
            assert self.answer is None, f"answered instead of parked: {self.answer}"
            time.sleep(0.01)
        raise AssertionError(f"the Fetch on {self.tp} was not parked within {within_s} s")

    def join(self, within_s: float = 30.0) -> dict:
        self._thread.join(within_s)
        assert self.answer is not None, "no answer"
        return self.answer


def test_nothing_arriving_is_answered_empty_after_the_wait(broker, wire):
    _create(wire, "lp-quiet")
    _produce(wire, "lp-quiet", _batch(b"old"))
    fetch = Parked(broker, "lp-quiet", 1, max_wait_ms=2500, min_bytes=1)
    fetch.wait_until_parked()
    part = fetch.join()
    # Not at once (it waited), and answered (the wait ended): no data, the
    # partition's state as it is.
    assert fetch.waited >= 1.5, fetch.waited
    assert fetch.waited < 10, fetch.waited
    assert (part["records"], part["high_watermark"]) == (b"", 1)
    assert fetch.waiting_on_broker() == 0  # nothing left behind on the partition


def test_a_small_append_below_min_bytes_keeps_the_fetch_parked(broker, wire):
    _create(wire, "lp-min-bytes")
    small = _batch(b"first")
    fetch = Parked(broker, "lp-min-bytes", 0, max_wait_ms=30_000, min_bytes=2 * len(small))
    fetch.wait_until_parked()
    _produce(wire, "lp-min-bytes", small)
    # Woken by the append, the Fetch reads too little and parks again.
    fetch.wait_until_parked()
    assert fetch.answer is None
    _produce(wire, "lp-min-bytes", _batch(b"other"))
    part = fetch.join()
    assert _values(part) == [(0, b"first"), (1, b"other")]
    assert fetch.waited < 20, fetch.waited  # answered on the append, not at max_wait


def test_min_bytes_never_reached_answers_what_came_at_max_wait(broker, wire):
    _create(wire, "lp-partial")
    fetch = Parked(broker, "lp-partial", 0, max_wait_ms=2500, min_bytes=1 << 20)
    fetch.wait_until_parked()
    _produce(wire, "lp-partial", _batch(b"small"))
    fetch.wait_until_parked()
    part = fetch.join()
    assert fetch.waited >= 1.5, fetch.waited
    assert _values(part) == [(0, b"small")]
    assert part["high_watermark"] == 1


def test_an_offset_commit_wakes_a_parked_read_of_its_offsets_partition(broker, wire):
    _create(wire, "lp-committed")
    group = "lp-lag-monitor"
    # The partition of the group, as a lag monitor finds it: Kafka's placement
    # over the partitions Metadata lists.
    meta = wire.call(3, 12, {"topics": [{"name": OFFSETS, "topic_id": None}]})
    partition = coordinator_partition(group, len(meta["topics"][0]["partitions"]))
    end = _fetch(wire, OFFSETS, 0, 0, 1, partition=partition)["high_watermark"]
    fetch = Parked(broker, OFFSETS, end, max_wait_ms=20_000, min_bytes=1, partition=partition)
    fetch.wait_until_parked()
    answer = wire.call(8, 9, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": "lp-committed", "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
             "committed_metadata": None}]}]})
    assert answer["topics"][0]["partitions"][0]["error_code"] == 0
    part = fetch.join()
    assert fetch.waited < 15, fetch.waited  # woken by the commit, not at max_wait
    records = [r for b in decode_record_set(part["records"]) for r in b.records]
    assert records and records[0].offset == end
    # The commit record: its key names the group, topic and partition.
    assert group.encode() in records[0].key and b"lp-committed" in records[0].key


def test_a_read_from_an_older_segment_is_answered_at_once_below_min_bytes(broker, wire):
    """A consumer catching up reads from a segment before the active one: a read
    stops at its segment's end, so Kafka's DelayedFetch answers at once however
    few bytes that was (a wait would wait for nothing); at the active segment
    the same Fetch waits for min_bytes as before."""
    _create(wire, "lp-segments", configs=[("internal.segment.bytes", "200")])
    for i in range(6):
        _produce(wire, "lp-segments", _batch(b"v%d" % i))
    segments = broker.call(lambda: len(broker.broker.logs.get("lp-segments", 0).segments))
    assert segments > 2
    fetch = Parked(broker, "lp-segments", 0, max_wait_ms=20_000, min_bytes=1 << 20)
    part = fetch.join()
    assert _values(part)[0] == (0, b"v0")
    assert fetch.waited < 10, fetch.waited  # not held for max_wait
    # from the active segment: parked until the wait ends or bytes come
    tail = Parked(broker, "lp-segments", 6, max_wait_ms=20_000, min_bytes=1)
    tail.wait_until_parked()
    _produce(wire, "lp-segments", _batch(b"v6"))
    assert _values(tail.join())[0][0] == 6
