"""A stopping broker serves no new request, as Kafka's socket server stops
processing requests when a broker shuts down: a client is never served Produce
and Fetch after its group's coordinator resigned (it would process records it
can no longer commit, and get them all again after the restart).  What is in
progress is answered; a long-polling Fetch at once."""

from __future__ import annotations

import socket
import threading
import time

from kcoord.broker.embedded import EmbeddedBroker
from kcoord.protocol.client import WireClient
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.records import Record, build_batch
from tests.broker.wire_ops import create_topic, produce
from tests.support import closed_by_broker

FETCH_WAIT_MS = 30_000  # far beyond the stop's grace (5 s): a stop that waited for it would show


def _fetch_body(topic: str, offset: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": FETCH_WAIT_MS, "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _commit_body(offset: int) -> dict:
    return {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]}


def _produce_body(value: bytes) -> dict:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": "t", "partition_data": [
                {"index": 0, "records": build_batch([Record(None, 0, b"k", value)])}]}]}


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return True
    except (ConnectionRefusedError, ConnectionResetError):  # reset: taken as the listener closed
        return False


def test_a_stop_answers_the_request_in_progress_and_serves_none_after_it(tmp_path):
    broker = EmbeddedBroker(tmp_path).start()
    stopping = threading.Thread(target=broker.stop)
    poller = idle = None
    try:
        poller = WireClient.to(broker.bootstrap, timeout=30)
        idle = WireClient.to(broker.bootstrap, timeout=30)
        create_topic(poller, "t")
        assert produce(poller, "t", build_batch([Record(None, 0, b"k", b"before")]))[
            "error_code"] == E.NONE
        answer = idle.call(8, 8, _commit_body(1))
        assert answer["topics"][0]["partitions"][0]["error_code"] == E.NONE
        # A long-polling Fetch at the log's end, and behind it on the same
        # connection a Produce and a commit, received but not begun.
        fetch_id = poller.send(1, 12, _fetch_body("t", 1))
        poller.send(0, 9, _produce_body(b"behind the fetch"))
        poller.send(8, 8, _commit_body(2))
        deadline = time.monotonic() + 10
        while not any(len(c._queue) == 2 for c in list(broker.broker.connections)):
            assert time.monotonic() < deadline, "the requests never arrived"
            time.sleep(0.01)
        began = time.monotonic()
        stopping.start()
        # Once the broker refuses new connections, the stop has begun: a Produce
        # sent then on a connection already open is not served either.
        while _accepts(broker.port):
            assert time.monotonic() < deadline, "the stop never began"
        idle.send(0, 9, _produce_body(b"after the stop began"))
        fetched = poller.receive(1, 12, fetch_id)
        stopping.join(30)
        stopped_s = time.monotonic() - began
        # The fetch was answered (with nothing: nothing was appended), then the
        # connection closed without serving what followed it; the other one
        # closed without answering its Produce.
        assert fetched["error_code"] == E.NONE
        assert fetched["responses"][0]["partitions"][0]["records"] in (None, b"")
        assert closed_by_broker(poller)
        assert closed_by_broker(idle)
        assert stopped_s < 4  # not held by the fetch's wait (nor to the 5 s grace)
    finally:
        if stopping.ident is None:
            stopping.start()
        stopping.join(30)
        for client in (poller, idle):
            if client is not None:
                client.close()
    # After a restart: the Produces and the commit received during the stop
    # were never served.
    with EmbeddedBroker(tmp_path) as again, WireClient.to(again.bootstrap) as wire:
        assert _log_end(wire) == 1
        committed = wire.call(9, 7, {"group_id": "g", "require_stable": False, "topics": None})
        while committed["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS:
            committed = wire.call(9, 7, {"group_id": "g", "require_stable": False,
                                         "topics": None})
        assert [(t["name"], p["committed_offset"]) for t in committed["topics"]
                for p in t["partitions"]] == [("t", 1)]


def test_a_connection_answered_during_the_stop_reads_nothing_more(tmp_path):
    """A JoinGroup parked in the initial delay (Kafka's defaults: 3 s) is
    answered NOT_COORDINATOR by the stop; a Produce its client sent after the
    stop began, on the same connection, is neither read nor served once that
    answer is out: it is not in the log after a restart."""
    broker = EmbeddedBroker(tmp_path, kafka_defaults=True).start()
    stopping = threading.Thread(target=broker.stop)
    member = None
    try:
        member = WireClient.to(broker.bootstrap, timeout=30)
        create_topic(member, "t")
        join_id = member.send(11, 5, {
            "group_id": "held", "session_timeout_ms": 10000, "rebalance_timeout_ms": 60000,
            "member_id": "", "group_instance_id": "static-1", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]})
        deadline = time.monotonic() + 10
        while all(c.idle for c in list(broker.broker.connections)):
            assert time.monotonic() < deadline, "the join never arrived"
            time.sleep(0.01)
        stopping.start()
        while _accepts(broker.port):
            assert time.monotonic() < deadline, "the stop never began"
        member.send(0, 9, _produce_body(b"after the stop began"))
        try:
            joined = member.receive(11, 5, join_id)
        except ConnectionResetError:
            pass  # closed with the Produce unread: the reset may overtake the answer
        else:
            assert joined["error_code"] == E.NOT_COORDINATOR
            assert closed_by_broker(member)
    finally:
        if stopping.ident is None:
            stopping.start()
        stopping.join(30)
        if member is not None:
            member.close()
    with EmbeddedBroker(tmp_path) as again, WireClient.to(again.bootstrap) as wire:
        assert _log_end(wire) == 0


def _log_end(wire) -> int:
    """The log end offset of topic ``t``'s partition 0 (ListOffsets latest)."""
    offsets = wire.call(2, 1, {"replica_id": -1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": -1}]}]})
    return offsets["topics"][0]["partitions"][0]["offset"]
