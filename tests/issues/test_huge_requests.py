"""Metadata v1 naming 1,000,000 empty names (a 2 MB frame) cost 211 MiB and a
5.6 s stall of every client.  Requests of 256 KiB and more are now decoded in a
worker thread (without cyclic garbage collection meanwhile), and the Metadata
handler collapses repeated names with item access; ``make bench`` reports the
other clients' worst wait.  These tests check the answers stay right on that
path."""

from __future__ import annotations

import struct

from kcoord.broker import server
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import frame_request
from kcoord.protocol.messages.metadata import METADATA
from kcoord.protocol.client import WireClient
from tests.support import RawClient


def test_a_huge_metadata_request_is_answered_once_per_name(broker):
    client = WireClient("127.0.0.1", broker.port)
    try:
        names = [{"name": ""}] * 300_000 + [{"name": "huge-unknown"}] * 1000
        answer = client.call(3, 1, {"topics": names})
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [
            ("", ErrorCode.INVALID_TOPIC_EXCEPTION),
            # auto-created (implicitly allowed at v1), answered as Kafka answers the
            # request that creates a topic
            ("huge-unknown", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        assert "huge-unknown" in broker.broker.topics.topics
        assert client.call(18, 0, {})["error_code"] == ErrorCode.NONE
    finally:
        client.close()


def test_a_huge_undecodable_request_closes_only_its_connection(broker):
    frame = frame_request(METADATA, 1, 1, "huge", {"topics": [{"name": "x"}] * 100_000})
    assert len(frame) > server.OFFLOAD_BYTES
    broken = frame[:-2] + b"\xff\xff"  # the last name's length is now past the end
    with RawClient(broker.port) as client:
        client.send_raw(struct.pack(">i", len(broken) - 4) + broken[4:])
        assert client.is_closed_by_peer()
    fresh = WireClient("127.0.0.1", broker.port)
    assert fresh.call(18, 0, {})["error_code"] == ErrorCode.NONE
    fresh.close()


def test_large_requests_are_decoded_one_at_a_time(make_broker, monkeypatch):
    """Each large request takes about a hundred times its size in memory while it
    is decoded: concurrent ones wait their turn instead of adding up."""
    import threading

    node = make_broker()
    active, peak = [0], [0]
    lock = threading.Lock()
    real = server._decode_large

    def counting(*args):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            return real(*args)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(server, "_decode_large", counting)
    frame_body = {"topics": [{"name": "same"}] * 60_000, "allow_auto_topic_creation": False}
    clients = [WireClient("127.0.0.1", node.port) for _ in range(4)]
    try:
        results = []
        threads = [threading.Thread(target=lambda c=c: results.append(c.call(3, 4, frame_body)))
                   for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 4
        assert all(len(r["topics"]) == 1 for r in results)
        assert peak[0] == 1
    finally:
        for c in clients:
            c.close()
