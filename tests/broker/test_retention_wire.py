"""Retention run by the broker itself, seen from the wire.

A topic created with ``retention.ms`` or ``retention.bytes`` keeps its records
only as long as those say: the broker's periodic retention pass (every
``log.retention.check.interval.ms``) deletes the expired segments on its own,
and every client then sees the new log start offset: ListOffsets earliest
answers it, a Fetch below it gets OFFSET_OUT_OF_RANGE, Fetch and Produce
answers carry it, and a consumer with ``auto.offset.reset=earliest`` (no
committed offset, or one that retention passed) starts there.

Nothing here calls the storage engine: records are produced, and deletions
observed, over the wire only.  Each wait is bounded by a deadline.

Apache Kafka 3.9 gives the same answers to the same requests in every scenario
here (checked with ``tests.reference.kafka.KafkaBroker`` and a small
``log.retention.check.interval.ms``; not part of the suite, because Kafka's
first retention pass waits 30 s after its start).  kcoord serves no
AlterConfigs or IncrementalAlterConfigs (docs/deviations.md), so a topic's
retention is set when it is created.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import Record, build_batch, decode_record_set
from tests.broker.wire_ops import create_topic, produce

E = ErrorCode
CHECK_INTERVAL_MS = 50
DEADLINE_S = 15
HOUR_MS = 3_600_000


@pytest.fixture
def node(make_broker):
    return make_broker(overrides={"log.retention.check.interval.ms": CHECK_INTERVAL_MS})


@pytest.fixture
def wire(node):
    with WireClient.to(node.bootstrap, client_id="retention-tests") as client:
        yield client


def _now_ms() -> int:
    return int(time.time() * 1000)


def _batch(timestamp: int, *values: bytes) -> bytes:
    return build_batch([Record(None, timestamp, b"key", v) for v in values])


def _create(wire, name: str, **configs) -> None:
    create_topic(wire, name, configs=[(k.replace("_", "."), str(v)) for k, v in configs.items()])


def _produce(wire, topic: str, records: bytes) -> dict:
    part = produce(wire, topic, records)
    assert part["error_code"] == 0, part
    return part


def _list_offset(wire, topic: str, timestamp: int) -> int:
    answer = wire.call(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
    part = answer["topics"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    return part["offset"]


def _fetch(wire, topic: str, offset: int) -> dict:
    answer = wire.call(1, 12, {
        "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
             "current_leader_epoch": -1}]}]})
    (part,) = answer["responses"][0]["partitions"]
    return part


def _offsets(records: bytes) -> list[int]:
    return [r.offset for b in decode_record_set(records) for r in b.records]


def _read_all(wire, topic: str, offset: int) -> list[int]:
    """Offsets from ``offset`` to the high watermark, one Fetch per segment (a
    Fetch reads from one segment at a time, as Kafka's)."""
    offsets: list[int] = []
    for _ in range(100):
        part = _fetch(wire, topic, offset)
        assert part["error_code"] == 0, part
        if offset >= part["high_watermark"]:
            return offsets
        got = _offsets(part["records"])
        assert got, part
        offsets += [o for o in got if o >= offset]
        offset = got[-1] + 1
    raise AssertionError("more than 100 fetches")


def _wait_for_log_start(wire, topic: str, expected: int) -> None:
    """Poll ListOffsets earliest until the broker's retention moved it to ``expected``."""
    deadline = time.monotonic() + DEADLINE_S
    seen = []
    while time.monotonic() < deadline:
        earliest = _list_offset(wire, topic, -2)
        seen.append(earliest)
        if earliest == expected:
            return
        if earliest > expected:
            break
        time.sleep(CHECK_INTERVAL_MS / 1000)
    raise AssertionError(f"log start of {topic} never became {expected}: saw {sorted(set(seen))}")


def _retention_passes(node) -> list[int]:
    """Count the broker's retention passes from now on (observed, not driven)."""
    logs = node.broker.logs
    count = [0]
    run = logs.run_retention

    def counted(*args, **kwargs):
        deleted = run(*args, **kwargs)
        count[0] += 1
        return deleted

    logs.run_retention = counted
    return count


def _wait_passes(count: list[int], passes: int) -> None:
    start = count[0]
    deadline = time.monotonic() + DEADLINE_S
    while count[0] < start + passes:
        assert time.monotonic() < deadline, "the broker ran no retention pass"
        time.sleep(CHECK_INTERVAL_MS / 1000)


def _consume_first(bootstrap: str, topic: str, group: str, committed: int | None = None):
    """The offset of the first record a fresh consumer with auto.offset.reset=earliest reads."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        if committed is not None:
            consumer.commit(offsets=[TopicPartition(topic, 0, committed)], asynchronous=False)
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            return message.offset(), message.value()
        raise AssertionError(f"the consumer read nothing from {topic}")
    finally:
        consumer.close()


def test_retention_ms_deletes_expired_segments_and_clients_start_at_the_new_log_start(node, wire):
    topic = "ret-ms"
    old = _now_ms() - 2 * HOUR_MS
    batches = [_batch(old + i, b"old%d-a" % i, b"old%d-b" % i) for i in range(3)]
    batches.append(_batch(_now_ms(), b"new0-a", b"new0-b"))
    # segments of one batch each (internal.segment.bytes: below segment.bytes's floor)
    _create(wire, topic, retention_ms=HOUR_MS, internal_segment_bytes=len(batches[0]))
    assert {len(b) for b in batches} == {len(batches[0])}
    *_, fresh = [_produce(wire, topic, b) for b in batches]
    new_start = fresh["base_offset"]
    assert new_start == 6

    _wait_for_log_start(wire, topic, new_start)
    assert _list_offset(wire, topic, -1) == new_start + 2  # the log end stays

    # Below the log start: out of range, as Kafka answers (no high watermark, no data).
    for offset in (0, 3, new_start - 1):
        part = _fetch(wire, topic, offset)
        assert (part["error_code"], part["high_watermark"], part["records"]) == \
            (E.OFFSET_OUT_OF_RANGE, -1, b""), offset
    # From the log start: the fresh records, with the new log start in the answer.
    part = _fetch(wire, topic, new_start)
    assert (part["error_code"], part["high_watermark"], part["log_start_offset"]) == \
        (0, new_start + 2, new_start)
    assert _offsets(part["records"]) == [new_start, new_start + 1]
    # A Produce answer carries it too.
    later = _produce(wire, topic, _batch(_now_ms(), b"later"))
    assert (later["base_offset"], later["log_start_offset"]) == (new_start + 2, new_start)

    # A consumer without a committed offset, and one whose committed offset
    # retention passed (OFFSET_OUT_OF_RANGE, then reset), start at the log start.
    assert _consume_first(node.bootstrap, topic, "ret-ms-new") == (new_start, b"new0-a")
    assert _consume_first(node.bootstrap, topic, "ret-ms-behind", committed=1) == \
        (new_start, b"new0-a")

    # Later passes leave the unexpired records alone.
    passes = _retention_passes(node)
    _wait_passes(passes, 3)
    assert _list_offset(wire, topic, -2) == new_start


def test_retention_ms_expiring_everything_empties_the_log_at_its_end(node, wire):
    topic = "ret-ms-all"
    _create(wire, topic, retention_ms=HOUR_MS)
    old = _now_ms() - 2 * HOUR_MS
    for i in range(2):
        _produce(wire, topic, _batch(old, b"a%d" % i, b"b%d" % i))
    # The only segment, the active one, expired too: the log keeps its end offset
    # and starts there (Kafka rolls, then deletes every old segment).
    _wait_for_log_start(wire, topic, 4)
    assert _list_offset(wire, topic, -1) == 4
    part = _fetch(wire, topic, 0)
    assert part["error_code"] == E.OFFSET_OUT_OF_RANGE
    part = _fetch(wire, topic, 4)
    assert (part["error_code"], part["high_watermark"], part["log_start_offset"],
            part["records"]) == (0, 4, 4, b"")
    after = _produce(wire, topic, _batch(_now_ms(), b"next"))
    assert (after["base_offset"], after["log_start_offset"]) == (4, 4)
    assert _consume_first(node.bootstrap, topic, "ret-ms-all") == (4, b"next")


def test_unexpired_records_are_kept(node, wire):
    """The same pass on a topic under its limits deletes nothing."""
    topic = "ret-ms-young"
    passes = _retention_passes(node)
    batches = [_batch(_now_ms() - HOUR_MS // 2, b"young%d" % i) for i in range(3)]
    _create(wire, topic, retention_ms=HOUR_MS, internal_segment_bytes=len(batches[0]))
    for batch in batches:
        _produce(wire, topic, batch)
    _wait_passes(passes, 3)
    assert _list_offset(wire, topic, -2) == 0
    assert _read_all(wire, topic, 0) == [0, 1, 2]


@pytest.mark.parametrize("extra, kept", [(0, 3), (1, 4)])
def test_retention_bytes_keeps_the_log_at_least_that_large(node, wire, extra, kept):
    """``retention.bytes`` deletes the oldest segments while what is left stays at
    least that large (UnifiedLog.deleteRetentionSizeBreachedSegments)."""
    topic = f"ret-bytes-{extra}"
    now = _now_ms()
    one = _batch(now, b"value-0")
    size = len(one)  # every batch below has this size: one per segment
    produced = 7
    _create(wire, topic, retention_bytes=3 * size + extra, internal_segment_bytes=size)
    for i in range(produced):
        batch = _batch(now, b"value-%d" % i)
        assert len(batch) == size
        assert _produce(wire, topic, batch)["base_offset"] == i
    new_start = produced - kept
    _wait_for_log_start(wire, topic, new_start)
    passes = _retention_passes(node)
    _wait_passes(passes, 3)
    assert _list_offset(wire, topic, -2) == new_start  # no more than that went
    assert _list_offset(wire, topic, -1) == produced
    assert _fetch(wire, topic, new_start - 1)["error_code"] == E.OFFSET_OUT_OF_RANGE
    part = _fetch(wire, topic, new_start)
    assert (part["error_code"], part["log_start_offset"]) == (0, new_start)
    assert _read_all(wire, topic, new_start) == list(range(new_start, produced))
    assert _consume_first(node.bootstrap, topic, f"ret-bytes-{extra}") == \
        (new_start, b"value-%d" % new_start)


def test_broker_wide_retention_reaches_topics_without_their_own(make_broker):
    """``log.retention.ms`` of the broker is the retention of a topic that sets none."""
    node = make_broker(overrides={"log.retention.check.interval.ms": CHECK_INTERVAL_MS,
                                  "log.retention.ms": HOUR_MS})
    with WireClient.to(node.bootstrap) as wire:
        _create(wire, "ret-broker-wide")
        _produce(wire, "ret-broker-wide", _batch(_now_ms() - 2 * HOUR_MS, b"a", b"b", b"c"))
        _wait_for_log_start(wire, "ret-broker-wide", 3)


def test_topic_retention_applies_to_logs_opened_at_the_next_start(make_broker, tmp_path):
    """The topic's ``retention.ms``, kept in the data dir, is applied by a restarted
    broker to the logs it opens (not only to logs created while it runs)."""
    data = tmp_path / "restarted"
    first = make_broker(data, overrides={"log.retention.check.interval.ms": 3_600_000})
    with WireClient.to(first.bootstrap) as wire:
        _create(wire, "ret-restart", retention_ms=HOUR_MS)
        _produce(wire, "ret-restart", _batch(_now_ms() - 2 * HOUR_MS, b"a", b"b"))
        assert _list_offset(wire, "ret-restart", -2) == 0  # no pass ran yet
    first.stop()
    second = make_broker(data, overrides={"log.retention.check.interval.ms": CHECK_INTERVAL_MS})
    with WireClient.to(second.bootstrap) as wire:
        _wait_for_log_start(wire, "ret-restart", 2)
        assert _list_offset(wire, "ret-restart", -1) == 2


def test_a_compacted_and_deleted_topic_expires_at_the_cleaner_s_pace(make_broker):
    """``cleanup.policy=compact,delete``: Kafka's log cleaner applies retention
    to such a topic after each of its passes (every ``log.cleaner.backoff.ms``),
    so its expired records go long before the retention check's next pass;
    a delete-only topic waits for that pass (here an hour away)."""
    node = make_broker(overrides={"log.retention.check.interval.ms": HOUR_MS,
                                  "log.cleaner.backoff.ms": CHECK_INTERVAL_MS})
    with WireClient.to(node.bootstrap, client_id="retention-tests") as wire:
        old = _now_ms() - 60_000
        for name, policy in (("cd", "compact,delete"), ("d", "delete")):
            _create(wire, name, cleanup_policy=policy, retention_ms=5_000)
            _produce(wire, name, build_batch([Record(None, old, b"k%d" % i, b"v")
                                              for i in range(5)]))
        _wait_for_log_start(wire, "cd", 5)
        assert _list_offset(wire, "d", -2) == 0
        assert _list_offset(wire, "cd", -1) == 5
