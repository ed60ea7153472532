"""Pipelining stalled everyone: 400 Metadata(all topics) requests in one 8.8 KB
write stalled the broker 2.3 s, because the whole queue was served before
anything was written or any other connection ran.  Now a pass over a
connection's queue stops after a small budget and resumes after the other
connections' ready events, so a second client is answered while the burst is
still being served.  (The wait itself is measured by ``make bench``; this test
checks the order of the answers.)"""

from __future__ import annotations

import socket
import struct

from kcoord.broker import server
from kcoord.protocol.headers import frame_request
from kcoord.protocol.messages.api_versions import API_VERSIONS
from kcoord.protocol.messages.metadata import METADATA
from kcoord.broker.healthcheck import recv_exact

BURST = 1000


def recv_frame(sock) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def test_a_second_client_is_answered_during_anothers_burst(make_broker, monkeypatch):
    node = make_broker()
    node.call(lambda: node.broker.topics.create_many(
        [(f"burst-{i}", 1, {}) for i in range(300)]))
    writes: list[tuple[str, int]] = []
    real_flush = server.KafkaConnection._flush

    def recording_flush(self, out):
        if out:
            writes.append((self.peer, len(out)))
        real_flush(self, out)

    monkeypatch.setattr(server.KafkaConnection, "_flush", recording_flush)
    burst = b"".join(frame_request(METADATA, 1, i, "burst", {"topics": None})
                     for i in range(BURST))
    with socket.create_connection(("127.0.0.1", node.port)) as a, \
            socket.create_connection(("127.0.0.1", node.port)) as b:
        a_peer = "127.0.0.1:%d" % a.getsockname()[1]
        b_peer = "127.0.0.1:%d" % b.getsockname()[1]
        a.sendall(burst)
        b.sendall(frame_request(API_VERSIONS, 0, 7, "other", {}))
        answer = recv_frame(b)
        assert struct.unpack_from(">i", answer)[0] == 7
        for i in range(BURST):  # every burst request is answered, in order
            assert struct.unpack_from(">i", recv_frame(a))[0] == i
    a_writes = [i for i, (peer, _n) in enumerate(writes) if peer == a_peer]
    b_write = next(i for i, (peer, _n) in enumerate(writes) if peer == b_peer)
    assert sum(writes[i][1] for i in a_writes) == BURST
    assert b_write < a_writes[-1], "the other client waited for the whole burst"
