"""Produce, Fetch, ListOffsets, InitProducerId and OffsetForLeaderEpoch over the
wire: the answers and error codes a client sees, request by request."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest

from kcoord.protocol import compression
from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import frame_request
from kcoord.protocol.messages.produce import PRODUCE
from kcoord.protocol.records import Record, build_batch, build_legacy, decode_record_set
from tests.broker.wire_ops import create_topic as _create
from tests.broker.wire_ops import produce as _produce

E = ErrorCode


def _batch(*values, timestamp=1_700_000_000_000, **kw):
    return build_batch([Record(None, timestamp + i, b"k%d" % i, v) for i, v in enumerate(values)],
                       **kw)


def _fetch(wire, topic, offset, version=12, partition=0, max_wait_ms=0, min_bytes=1,
           partition_max_bytes=1 << 20, **extra):
    body = {"max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 50 << 20,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": offset,
                 "partition_max_bytes": partition_max_bytes,
                 "current_leader_epoch": extra.pop("current_leader_epoch", -1)}]}]}
    body.update(extra)
    return wire.call(1, version, body)


def _values(records: bytes) -> list:
    return [(r.offset, r.value) for b in decode_record_set(records) for r in b.records]


def test_produce_then_fetch_returns_the_batch_as_stored(wire):
    _create(wire, "dp-basic")
    first = _produce(wire, "dp-basic", _batch(b"a", b"b", compression_type=compression.GZIP))
    assert (first["error_code"], first["base_offset"], first["log_start_offset"]) == (0, 0, 0)
    second = _produce(wire, "dp-basic", _batch(b"c"))
    assert second["base_offset"] == 2
    answer = _fetch(wire, "dp-basic", 1)
    (part,) = answer["responses"][0]["partitions"]
    assert (part["error_code"], part["high_watermark"], part["last_stable_offset"],
            part["log_start_offset"]) == (0, 3, 3, 0)
    # From the batch holding offset 1: the whole compressed first batch, then the next.
    assert _values(part["records"]) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert part["aborted_transactions"] is None and part["preferred_read_replica"] == -1
    batches = decode_record_set(part["records"])
    assert batches[0].compression == compression.GZIP
    assert all(b.partition_leader_epoch == 0 for b in batches)


def test_produce_refusals(wire):
    _create(wire, "dp-refuse")
    assert _produce(wire, "dp-nowhere", _batch(b"x"))["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert _produce(wire, "dp-refuse", _batch(b"x"), partition=3)["error_code"] == \
        E.UNKNOWN_TOPIC_OR_PARTITION
    assert _produce(wire, "dp-refuse", _batch(b"x"), acks=2)["error_code"] == E.INVALID_REQUIRED_ACKS
    assert _produce(wire, "__consumer_offsets", _batch(b"x"))["error_code"] == \
        E.INVALID_TOPIC_EXCEPTION
    corrupt = bytearray(_batch(b"x"))
    corrupt[-1] ^= 0xFF
    assert _produce(wire, "dp-refuse", bytes(corrupt))["error_code"] == E.CORRUPT_MESSAGE
    two = _batch(b"x") + _batch(b"y")
    refused = _produce(wire, "dp-refuse", two)
    assert refused["error_code"] == E.INVALID_RECORD
    assert refused["error_message"] is None  # Kafka words only per-record errors
    assert (refused["base_offset"], refused["log_append_time_ms"]) == (-1, -1)
    legacy = build_legacy([Record(None, 5, b"k", b"v")], magic=1)
    assert _produce(wire, "dp-refuse", legacy)["error_code"] == E.INVALID_RECORD
    zstd = _batch(b"z", compression_type=compression.ZSTD)
    assert _produce(wire, "dp-refuse", zstd, version=6)["error_code"] == \
        E.UNSUPPORTED_COMPRESSION_TYPE
    assert _produce(wire, "dp-refuse", b"")["error_code"] == E.INVALID_RECORD
    assert _produce(wire, "dp-refuse", None)["error_code"] == E.INVALID_RECORD
    empty_v2 = _produce(wire, "dp-refuse", b"", version=2)
    assert (empty_v2["error_code"], empty_v2["base_offset"]) == (0, -1)
    txn = _batch(b"t", producer_id=5, producer_epoch=0, base_sequence=0, transactional=True)
    assert _produce(wire, "dp-refuse", txn)["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # Nothing of the above was appended.
    assert _fetch(wire, "dp-refuse", 0)["responses"][0]["partitions"][0]["high_watermark"] == 0


def test_legacy_message_sets_become_one_v2_batch(wire):
    _create(wire, "dp-legacy")
    legacy = build_legacy([Record(None, 1000 + i, b"k", b"m%d" % i) for i in range(3)], magic=1,
                          compression_type=compression.GZIP)
    answer = _produce(wire, "dp-legacy", legacy, version=2)
    assert (answer["error_code"], answer["base_offset"]) == (0, 0)
    (part,) = _fetch(wire, "dp-legacy", 0)["responses"][0]["partitions"]
    (batch,) = decode_record_set(part["records"])
    assert batch.magic == 2 and batch.compression == compression.GZIP
    assert [(r.offset, r.timestamp, r.value) for r in batch.records] == [
        (i, 1000 + i, b"m%d" % i) for i in range(3)]
    # Fetch v2 gets them back as magic 1 messages, v0 as magic 0.
    for version, magic in ((2, 1), (0, 0)):
        old = _fetch(wire, "dp-legacy", 0, version=version)["responses"][0]["partitions"][0]
        # Padded to the v2 size with an entry clients skip as partial, as Kafka does.
        converted = decode_record_set(old["records"], partial_ok=True)
        assert {b.magic for b in converted} == {magic}
        assert [r.value for b in converted for r in b.records] == [b"m0", b"m1", b"m2"]


def test_acks_zero_gets_no_answer_and_a_failure_closes_the_connection(broker, wire):
    _create(wire, "dp-acks0")
    wire.send_raw(frame_request(PRODUCE, 9, 77, "wire-tests", {
        "transactional_id": None, "acks": 0, "timeout_ms": 1000,
        "topic_data": [{"name": "dp-acks0", "partition_data": [
            {"index": 0, "records": _batch(b"q")}]}]}))
    # The next answer on the connection is the Fetch's: the Produce had none.
    (part,) = _fetch(wire, "dp-acks0", 0)["responses"][0]["partitions"]
    assert _values(part["records"]) == [(0, b"q")]
    with WireClient.to(broker.bootstrap) as other:
        other.send_raw(frame_request(PRODUCE, 9, 1, "x", {
            "transactional_id": None, "acks": 0, "timeout_ms": 1000,
            "topic_data": [{"name": "dp-nowhere", "partition_data": [
                {"index": 0, "records": _batch(b"q")}]}]}))
        other.sock.settimeout(5)
        assert other.sock.recv(1) == b""  # closed by the broker


def test_idempotent_retries_are_answered_with_the_first_offsets(wire):
    _create(wire, "dp-idem")
    init = wire.call(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert init["error_code"] == 0 and init["producer_epoch"] == 0
    pid = init["producer_id"]
    other = wire.call(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert other["producer_id"] != pid

    def batch(seq, *values, epoch=0):
        return _batch(*values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)

    assert _produce(wire, "dp-idem", batch(0, b"a", b"b"))["base_offset"] == 0
    assert _produce(wire, "dp-idem", batch(2, b"c"))["base_offset"] == 2
    retry = _produce(wire, "dp-idem", batch(0, b"a", b"b"))
    assert (retry["error_code"], retry["base_offset"]) == (0, 0)
    gap = _produce(wire, "dp-idem", batch(5, b"d"))
    assert gap["error_code"] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _produce(wire, "dp-idem", batch(3, b"d", epoch=1))["error_code"] == \
        E.OUT_OF_ORDER_SEQUENCE_NUMBER  # a new epoch starts at 0
    assert _produce(wire, "dp-idem", batch(0, b"e", epoch=1))["base_offset"] == 3
    assert _produce(wire, "dp-idem", batch(3, b"f", epoch=0))["error_code"] == \
        E.INVALID_PRODUCER_EPOCH
    (part,) = _fetch(wire, "dp-idem", 0)["responses"][0]["partitions"]
    assert [v for _o, v in _values(part["records"])] == [b"a", b"b", b"c", b"e"]


def test_init_producer_id_refusals(wire):
    assert wire.call(22, 4, {"transactional_id": "", "transaction_timeout_ms": 1000})[
        "error_code"] == E.INVALID_REQUEST
    assert wire.call(22, 4, {"transactional_id": None, "transaction_timeout_ms": 1000,
                             "producer_id": 5, "producer_epoch": -1})["error_code"] == \
        E.INVALID_REQUEST


def test_producer_ids_are_never_reused_across_restarts(make_broker, tmp_path):
    seen = []
    for _ in range(2):
        node = make_broker(tmp_path / "pids")
        with WireClient.to(node.bootstrap) as client:
            for _ in range(3):
                seen.append(client.call(22, 4, {"transactional_id": None,
                                               "transaction_timeout_ms": 1000})["producer_id"])
        node.stop()
    assert len(set(seen)) == 6


def test_fetch_errors(wire):
    _create(wire, "dp-fetch-err")
    _produce(wire, "dp-fetch-err", _batch(b"a"))
    for offset in (-1, 2):
        (part,) = _fetch(wire, "dp-fetch-err", offset)["responses"][0]["partitions"]
        assert (part["error_code"], part["high_watermark"], part["records"]) == \
            (E.OFFSET_OUT_OF_RANGE, -1, b"")
    (part,) = _fetch(wire, "dp-nowhere", 0)["responses"][0]["partitions"]
    assert part["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION and part["records"] == b""
    for epoch, code in ((1, E.UNKNOWN_LEADER_EPOCH), (-2, E.NONE), (0, E.NONE)):
        (part,) = _fetch(wire, "dp-fetch-err", 0, current_leader_epoch=epoch)[
            "responses"][0]["partitions"]
        assert part["error_code"] == code
    # At the end: no error, no data.
    (part,) = _fetch(wire, "dp-fetch-err", 1)["responses"][0]["partitions"]
    assert (part["error_code"], part["records"]) == (0, b"")
    incremental = _fetch(wire, "dp-fetch-err", 0, session_id=7, session_epoch=3)
    assert (incremental["error_code"], incremental["responses"]) == \
        (E.FETCH_SESSION_ID_NOT_FOUND, [])


def test_zstd_batches_below_fetch_v10_as_kafka_serves_them(wire):
    """A zstd batch goes to Fetch v4-9 as it is, and refuses only the down-conversion
    of v0-3 when it comes first; a topic whose compression.type is zstd is read
    from v10 on only (asked of Kafka in tests/reference)."""
    _create(wire, "dp-zstd-producer")
    _create(wire, "dp-zstd-topic", configs=[("compression.type", "zstd")])
    for topic in ("dp-zstd-producer", "dp-zstd-topic"):
        _produce(wire, topic, _batch(b"a"))
        _produce(wire, topic, _batch(b"z", compression_type=compression.ZSTD))

    def part(topic, offset, version):
        (answer,) = _fetch(wire, topic, offset, version=version)["responses"][0]["partitions"]
        return answer

    for version in (4, 9, 10):
        assert _values(part("dp-zstd-producer", 1, version)["records"]) == [(1, b"z")]
    converted = part("dp-zstd-producer", 0, 3)  # the first batch converted
    assert converted["error_code"] == E.NONE and b"a" in converted["records"]
    refused = part("dp-zstd-producer", 1, 3)
    assert (refused["error_code"], refused["records"]) == (E.UNSUPPORTED_COMPRESSION_TYPE, None)
    for version, offset in ((3, 0), (9, 0), (9, 1), (9, 99)):
        refused = part("dp-zstd-topic", offset, version)
        assert (refused["error_code"], refused["high_watermark"], refused["records"]) == \
            (E.UNSUPPORTED_COMPRESSION_TYPE, -1, None)
    assert _values(part("dp-zstd-topic", 0, 10)["records"]) == [(0, b"a"), (1, b"z")]


def test_fetch_by_topic_id(wire):
    _create(wire, "dp-ids")
    _produce(wire, "dp-ids", _batch(b"a"))
    meta = wire.call(3, 12, {"topics": [{"name": "dp-ids", "topic_id": None}]})
    topic_id = meta["topics"][0]["topic_id"]
    answer = wire.call(1, 13, {"max_wait_ms": 0, "min_bytes": 1, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": 0, "fetch_offset": 0,
                                               "partition_max_bytes": 1 << 20}]}]})
    assert answer["responses"][0]["topic_id"] == topic_id
    assert _values(answer["responses"][0]["partitions"][0]["records"]) == [(0, b"a")]
    unknown = wire.call(1, 13, {"max_wait_ms": 0, "min_bytes": 1, "topics": [
        {"topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "fetch_offset": 0,
                                                   "partition_max_bytes": 1 << 20}]}]})
    assert unknown["responses"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_ID


def test_fetch_limits_keep_whole_batches(wire):
    _create(wire, "dp-limits", 2)
    for p in (0, 1):
        for i in range(3):
            _produce(wire, "dp-limits", _batch(b"x" * 1000), partition=p)
    size = len(_batch(b"x" * 1000))
    body = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": size + 10, "topics": [
        {"topic": "dp-limits", "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10},
            {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    p0, p1 = wire.call(1, 11, body)["responses"][0]["partitions"]
    # The first batch goes out whole although larger than the partition limit;
    # what is left of max_bytes then holds no whole batch of partition 1.
    assert len(p0["records"]) == size and p1["records"] == b""
    assert p1["high_watermark"] == 3


def test_a_parked_fetch_is_woken_by_an_append(broker, wire):
    _create(wire, "dp-wait")
    results = {}

    wake = _batch(b"wake")

    def waiter():
        with WireClient.to(broker.bootstrap) as client:
            began = time.monotonic()
            # Exactly the size of the batch to come: that batch is enough.
            answer = _fetch(client, "dp-wait", 0, max_wait_ms=20_000, min_bytes=len(wake))
            results["waited"] = time.monotonic() - began
            results["answer"] = answer

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.3)  # the fetch is parked by now (nothing to read)
    assert "answer" not in results
    _produce(wire, "dp-wait", wake)
    thread.join(20)
    (part,) = results["answer"]["responses"][0]["partitions"]
    assert _values(part["records"]) == [(0, b"wake")]
    assert results["waited"] < 15  # woken, not timed out


def test_list_offsets(wire):
    _create(wire, "dp-times")
    for i, ts in enumerate((1000, 3000, 2000)):
        _produce(wire, "dp-times", _batch(b"v%d" % i, timestamp=ts))

    def ask(timestamp, version=7, isolation=0):
        answer = wire.call(2, version, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": "dp-times", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
        part = answer["topics"][0]["partitions"][0]
        return part["error_code"], part["timestamp"], part["offset"], part["leader_epoch"]

    assert ask(-1) == (0, -1, 3, 0)
    assert ask(-1, isolation=1) == (0, -1, 3, 0)
    assert ask(-2) == (0, -1, 0, 0)
    assert ask(-3) == (0, 3000, 1, 0)
    assert ask(1500) == (0, 3000, 1, 0)
    assert ask(2500) == (0, 3000, 1, 0)
    assert ask(3001) == (0, -1, -1, -1)
    assert ask(-3, version=6)[0] == E.UNSUPPORTED_VERSION
    assert ask(-7)[0] == E.UNSUPPORTED_VERSION
    v0 = wire.call(2, 0, {"replica_id": -1, "topics": [{"name": "dp-times", "partitions": [
        {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}]}]})
    assert v0["topics"][0]["partitions"][0]["old_style_offsets"] == [3]
    twice = wire.call(2, 7, {"replica_id": -1, "topics": [{"name": "dp-times", "partitions": [
        {"partition_index": 0, "timestamp": -1}, {"partition_index": 0, "timestamp": -2}]}]})
    assert [p["error_code"] for p in twice["topics"][0]["partitions"]] == [E.INVALID_REQUEST] * 2


def test_offset_for_leader_epoch(wire):
    _create(wire, "dp-epochs")
    _produce(wire, "dp-epochs", _batch(b"a", b"b"))

    def ask(epoch, current=-1, topic="dp-epochs"):
        answer = wire.call(23, 3, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]})
        part = answer["topics"][0]["partitions"][0]
        return part["error_code"], part["leader_epoch"], part["end_offset"]

    assert ask(0) == (0, 0, 2)
    assert ask(3) == (0, -1, -1)
    assert ask(0, current=2) == (E.UNKNOWN_LEADER_EPOCH, -1, -1)
    assert ask(0, topic="dp-nowhere") == (E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)


def test_consumer_offsets_can_be_read_like_any_topic(wire):
    (part,) = _fetch(wire, "__consumer_offsets", 0)["responses"][0]["partitions"]
    assert (part["error_code"], part["high_watermark"], part["records"]) == (0, 0, b"")


def test_a_deleted_topic_wakes_its_parked_fetches(broker, wire):
    _create(wire, "dp-gone")
    results = {}

    def waiter():
        with WireClient.to(broker.bootstrap) as client:
            began = time.monotonic()
            results["answer"] = _fetch(client, "dp-gone", 0, max_wait_ms=20_000)
            results["waited"] = time.monotonic() - began

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.3)
    wire.call(20, 4, {"topic_names": ["dp-gone"], "timeout_ms": 5000})
    thread.join(20)
    (part,) = results["answer"]["responses"][0]["partitions"]
    assert part["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert results["waited"] < 15  # answered at the deletion, not at the end of the wait


def test_a_retry_after_a_restart_is_still_recognised(make_broker, tmp_path):
    """The producer state is rebuilt from the log: the retry of a batch whose
    answer was lost before the restart gets the first offsets, not a copy."""
    data_dir = tmp_path / "idem-restart"
    node = make_broker(data_dir)
    with WireClient.to(node.bootstrap) as client:
        _create(client, "dp-idem-restart")
        pid = client.call(22, 4, {"transactional_id": None,
                                  "transaction_timeout_ms": 1000})["producer_id"]
        for seq in range(0, 6, 2):
            _produce(client, "dp-idem-restart", _batch(b"a", b"b", producer_id=pid,
                                                       producer_epoch=0, base_sequence=seq))
    node.stop()
    node = make_broker(data_dir)
    with WireClient.to(node.bootstrap) as client:
        retry = _produce(client, "dp-idem-restart", _batch(
            b"a", b"b", producer_id=pid, producer_epoch=0, base_sequence=2))
        assert (retry["error_code"], retry["base_offset"]) == (0, 2)
        gap = _produce(client, "dp-idem-restart", _batch(
            b"c", producer_id=pid, producer_epoch=0, base_sequence=9))
        assert gap["error_code"] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = _produce(client, "dp-idem-restart", _batch(
            b"c", producer_id=pid, producer_epoch=0, base_sequence=6))
        assert (nxt["error_code"], nxt["base_offset"]) == (0, 6)
        (part,) = _fetch(client, "dp-idem-restart", 0)["responses"][0]["partitions"]
        assert part["high_watermark"] == 7


def test_a_client_that_half_closes_ends_its_parked_fetch(broker, wire):
    """Kafka drops a connection whose client closed its side; kcoord answers the
    parked Fetch at once and closes, instead of holding it for max_wait_ms."""
    from kcoord.protocol.messages.fetch import FETCH
    _create(wire, "dp-half-closed")
    with WireClient.to(broker.bootstrap) as client:
        client.send_raw(frame_request(FETCH, 11, 1, "x", {
            "max_wait_ms": 600_000, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
                {"topic": "dp-half-closed", "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}))
        time.sleep(0.2)
        client.sock.shutdown(socket.SHUT_WR)
        client.sock.settimeout(20)
        client.correlation_id = 1
        answer = client.decode_response(FETCH, 11, client.recv_frame())
        assert answer["responses"][0]["partitions"][0]["records"] == b""
        assert client.sock.recv(1) == b""  # then closed


# Large batches take other paths: frames of LARGE_FRAME bytes or more are
# received into a buffer of their own and their records validated and written in
# place (a view of the frame); from VALIDATE_IN_THREAD_BYTES they are validated
# in a worker thread, from OFFLOAD_BYTES the whole request is decoded in one.
LARGE_SIZES = [20_000, 100_000, 300_000]


def _large_batch(size, **kw):
    count = 8
    return _batch(*[bytes([65 + i]) * (size // count) for i in range(count)], **kw)


@pytest.mark.parametrize("size", LARGE_SIZES)
def test_large_batches_are_stored_as_sent_and_checked_alike(wire, size):
    from kcoord.broker.server import LARGE_FRAME, OFFLOAD_BYTES
    from kcoord.storage.log import VALIDATE_IN_THREAD_BYTES
    assert LARGE_FRAME <= LARGE_SIZES[0] < VALIDATE_IN_THREAD_BYTES <= LARGE_SIZES[1] \
        < OFFLOAD_BYTES <= LARGE_SIZES[2]
    topic = f"dp-large-{size}"
    _create(wire, topic)
    batch = _large_batch(size)
    assert len(batch) >= size
    answers = [_produce(wire, topic, batch, version=v) for v in (3, 7, 9, 11)]
    assert [(a["error_code"], a["base_offset"]) for a in answers] == [(0, i * 8) for i in range(4)]
    # A damaged copy (its CRC no longer matches) and two batches in one set are refused.
    corrupt = bytearray(batch)
    corrupt[len(corrupt) // 2] ^= 0xFF
    assert _produce(wire, topic, bytes(corrupt))["error_code"] == E.CORRUPT_MESSAGE
    assert _produce(wire, topic, batch + _batch(b"x"))["error_code"] == E.INVALID_RECORD
    # Read back (one batch per fetch): every record as sent, at the offsets given.
    values = []
    while len(values) < 32:
        (part,) = _fetch(wire, topic, len(values), partition_max_bytes=1)["responses"][0][
            "partitions"]
        assert part["high_watermark"] == 32
        (stored,) = decode_record_set(part["records"])  # checks the CRC
        assert stored.base_offset == len(values) and stored.partition_leader_epoch == 0
        values += [r.value for r in stored.records]
    assert values == [bytes([65 + i]) * (size // 8) for i in range(8)] * 4


@pytest.mark.parametrize("size", LARGE_SIZES)
def test_large_batches_get_the_append_time_and_a_new_crc(wire, size):
    topic = f"dp-large-lat-{size}"
    _create(wire, topic, configs=[("message.timestamp.type", "LogAppendTime")])
    before = int(time.time() * 1000)
    answer = _produce(wire, topic, _large_batch(size, timestamp=5))
    assert answer["error_code"] == 0 and answer["log_append_time_ms"] >= before
    (part,) = _fetch(wire, topic, 0)["responses"][0]["partitions"]
    (batch,) = decode_record_set(part["records"])  # checks the CRC
    assert batch.max_timestamp == answer["log_append_time_ms"]


@pytest.mark.parametrize("size", LARGE_SIZES)
def test_large_idempotent_retries_are_answered_with_the_first_offsets(wire, size):
    topic = f"dp-large-idem-{size}"
    _create(wire, topic)
    pid = wire.call(22, 4, {"transactional_id": None,
                            "transaction_timeout_ms": 60000})["producer_id"]
    batch = _large_batch(size, producer_id=pid, producer_epoch=0, base_sequence=0)
    assert _produce(wire, topic, batch)["base_offset"] == 0
    retry = _produce(wire, topic, batch)
    assert (retry["error_code"], retry["base_offset"]) == (0, 0)
    assert _fetch(wire, topic, 0)["responses"][0]["partitions"][0]["high_watermark"] == 8


def test_large_legacy_message_sets_become_one_v2_batch(wire):
    _create(wire, "dp-large-legacy")
    legacy = build_legacy([Record(None, 1000 + i, b"k", bytes([65 + i]) * 40_000)
                           for i in range(3)], magic=1)
    answer = _produce(wire, "dp-large-legacy", legacy, version=2)
    assert (answer["error_code"], answer["base_offset"]) == (0, 0)
    (part,) = _fetch(wire, "dp-large-legacy", 0)["responses"][0]["partitions"]
    (batch,) = decode_record_set(part["records"])
    assert [r.value for r in batch.records] == [bytes([65 + i]) * 40_000 for i in range(3)]


def _raw_partition(client, topic, partition=0) -> tuple[bytes, int]:
    """Every batch of a partition, as Fetch sends its bytes, read up to the high
    watermark (one Fetch reads one segment at most); and that high watermark."""
    raw, offset = b"", 0
    for _ in range(1000):
        (part,) = _fetch(client, topic, offset, partition=partition)["responses"][0]["partitions"]
        assert part["error_code"] == 0, part
        if offset >= part["high_watermark"]:
            return raw, part["high_watermark"]
        batches = decode_record_set(part["records"])  # whole batches, CRCs checked
        assert batches, part
        raw += part["records"]
        offset = batches[-1].next_offset
    raise AssertionError("partition not read to its end within 1000 fetches")


def test_a_restart_serves_the_same_bytes(make_broker, tmp_path):
    """Fetch answers the same record-batch bytes after a clean stop and a start:
    every codec, an idempotent producer, append times written by the broker, and
    small segments so that the read spans several of them."""
    data_dir = tmp_path / "bytes-restart"
    node = make_broker(data_dir)
    topics = {"dp-bytes": [], "dp-bytes-append-time": [("message.timestamp.type",
                                                        "LogAppendTime")],
              "dp-bytes-segments": [("internal.segment.bytes", "600")]}
    with WireClient.to(node.bootstrap) as client:
        pid = client.call(22, 4, {"transactional_id": None,
                                  "transaction_timeout_ms": 1000})["producer_id"]
        for topic, configs in topics.items():
            _create(client, topic, configs=configs)
            sequence = 0
            for i, codec in enumerate((compression.NONE, compression.GZIP, compression.SNAPPY,
                                       compression.LZ4, compression.ZSTD)):
                values = [b"%s-%d-%d" % (codec.to_bytes(1, "big"), i, n) * 8 for n in range(4)]
                assert _produce(client, topic, _batch(*values, compression_type=codec))[
                    "error_code"] == 0
                assert _produce(client, topic, _batch(
                    *values, producer_id=pid, producer_epoch=0, base_sequence=sequence,
                    compression_type=codec))["error_code"] == 0
                sequence += len(values)
        before = {topic: _raw_partition(client, topic) for topic in topics}
    segments = sorted((data_dir / "dp-bytes-segments-0").glob("*.log"))
    assert len(segments) > 2, segments  # the read below spans several segments
    node.stop()
    node = make_broker(data_dir)
    with WireClient.to(node.bootstrap) as client:
        after = {topic: _raw_partition(client, topic) for topic in topics}
    for topic in topics:
        raw, high_watermark = before[topic]
        assert high_watermark == 40 and len(decode_record_set(raw)) == 10
        assert after[topic] == before[topic], topic


def test_offset_commit_and_fetch_v0_are_refused_partition_by_partition(wire):
    """v0 kept offsets in ZooKeeper: a KRaft Kafka 3.9 lists it and answers
    UNSUPPORTED_VERSION for each partition, and the connection goes on (asked of
    Kafka 3.9 in tests/reference); nothing is committed."""
    _create(wire, "dp-zk-offsets", partitions=2)
    group = f"dp-zk-{uuid.uuid4().hex[:6]}"
    committed = wire.call(8, 0, {"group_id": group, "topics": [
        {"name": "dp-zk-offsets", "partitions": [
            {"partition_index": p, "committed_offset": 5, "committed_metadata": "zk"}
            for p in (0, 1)]}]})
    assert [(p["partition_index"], p["error_code"]) for p in
            committed["topics"][0]["partitions"]] == [(0, E.UNSUPPORTED_VERSION),
                                                      (1, E.UNSUPPORTED_VERSION)]
    fetched = wire.call(9, 0, {"group_id": group, "topics": [
        {"name": "dp-zk-offsets", "partition_indexes": [1]}]})
    assert [(p["committed_offset"], p["error_code"]) for p in
            fetched["topics"][0]["partitions"]] == [(-1, E.UNSUPPORTED_VERSION)]
    now = wire.call(9, 1, {"group_id": group, "topics": [
        {"name": "dp-zk-offsets", "partition_indexes": [0, 1]}]})
    assert [p["committed_offset"] for p in now["topics"][0]["partitions"]] == [-1, -1]
    ranges = {k["api_key"]: k["min_version"] for k in wire.call(18, 3, {
        "client_software_name": "t", "client_software_version": "1"})["api_keys"]}
    assert (ranges[8], ranges[9]) == (0, 0)
