"""A server that answers a consumer's synchronous offset commits and does nothing
else: the client's own ceiling for the commit benchmark.

It serves just what confluent-kafka needs to commit explicit offsets
(ApiVersions, Metadata, FindCoordinator, OffsetCommit), with answers encoded
once per version by the project's codec and only their correlation id patched
in, one thread per connection: no group state, no log, no fsync.  What a client
reaches against it is the most any broker could give that client on this
machine; the mock cluster and kcoord are measured next to it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import uuid

from kcoord.broker.apis import advertised_versions
from kcoord.protocol.headers import frame_response
from kcoord.protocol.messages import ALL_APIS

_SERVED = (18, 3, 10, 8)  # ApiVersions, Metadata, FindCoordinator, OffsetCommit
_HEADER = struct.Struct(">ihhi")
NODE = 1


class CommitCeiling:
    def __init__(self, topic: str):
        self.topic = topic
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.ranges = {k: (lo, hi) for k, lo, hi in advertised_versions() if k in _SERVED}
        # FindCoordinator up to v3: one key per request, so one canned answer fits all.
        self.ranges[10] = (self.ranges[10][0], min(self.ranges[10][1], 3))
        self._canned: dict[tuple[int, int], bytes] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._threads: list[threading.Thread] = []

    def _body(self, api_key: int, version: int) -> dict:
        if api_key == 18:
            return {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(self.ranges.items())]}
        if api_key == 3:
            return {"throttle_time_ms": 0, "cluster_id": "commit-ceiling", "controller_id": NODE,
                    "brokers": [{"node_id": NODE, "host": "127.0.0.1", "port": self.port,
                                 "rack": None}],
                    "topics": [{"error_code": 0, "name": self.topic, "topic_id": uuid.UUID(int=1),
                                "is_internal": False, "topic_authorized_operations": -(1 << 31),
                                "partitions": [{"error_code": 0, "partition_index": 0,
                                                "leader_id": NODE, "leader_epoch": 0,
                                                "replica_nodes": [NODE], "isr_nodes": [NODE],
                                                "offline_replicas": []}]}],
                    "cluster_authorized_operations": -(1 << 31)}
        if api_key == 10:
            return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                    "node_id": NODE, "host": "127.0.0.1", "port": self.port,
                    "coordinators": []}
        return {"throttle_time_ms": 0, "topics": [
            {"name": self.topic, "partitions": [{"partition_index": 0, "error_code": 0}]}]}

    def _answer(self, api_key: int, version: int, correlation_id: int) -> bytes:
        canned = self._canned.get((api_key, version))
        if canned is None:
            with self._lock:
                canned = frame_response(ALL_APIS[api_key], version, 0,
                                        self._body(api_key, version))
                self._canned[(api_key, version)] = canned
        return canned[:4] + struct.pack(">i", correlation_id) + canned[8:]

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while not self._closed:
                try:
                    data = conn.recv(1 << 16)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                out = []
                while len(buf) >= 4:
                    size = struct.unpack_from(">i", buf)[0]
                    if len(buf) < 4 + size:
                        break
                    _s, api_key, version, correlation_id = _HEADER.unpack_from(buf)
                    buf = buf[4 + size:]
                    if api_key not in self.ranges:
                        return  # not served here: close, as a broker does
                    out.append(self._answer(api_key, version, correlation_id))
                if out:
                    conn.sendall(b"".join(out))

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _addr = self.listener.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    @contextlib.contextmanager
    def running(self):
        acceptor = threading.Thread(target=self._accept, daemon=True)
        acceptor.start()
        try:
            yield self
        finally:
            self._closed = True
            self.listener.close()
            acceptor.join(5)
