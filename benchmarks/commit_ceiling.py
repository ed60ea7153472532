"""Servers that answer a client and do nothing else: the client's own ceiling
for a benchmark.

``CommitCeiling`` serves just what confluent-kafka needs to commit explicit
offsets (ApiVersions, Metadata, FindCoordinator, OffsetCommit);
``TransactionCeiling`` what its transactional producer needs (those but
OffsetCommit, and InitProducerId, AddPartitionsToTxn, Produce, EndTxn).  An
answer that does not depend on the request is encoded once per version by the
project's codec and only its correlation id patched in; the two that name what
was asked (AddPartitionsToTxn, Produce) are decoded and answered with no
error, Produce with the partition's next offset.  One thread per connection:
no group or transaction state, no log, no fsync.  What a client reaches
against it is the most any broker could give that client on this machine; the
brokers are measured next to it.

``LoopCommitCeiling`` answers as ``CommitCeiling`` does, but as a broker
serves: one asyncio event loop (uvloop) in a process of its own, frames read
by a protocol and answered from the same canned bytes.  What it costs per
answer (its process's CPU) is the least a Python broker built this way spends
on a request before doing any of the request's work.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import socket
import struct
import threading
import uuid

from kcoord.broker.apis import advertised_versions
from kcoord.protocol.headers import decode_request, frame_response
from kcoord.protocol.messages import ALL_APIS

_HEADER = struct.Struct(">ihhi")
_RECORD_COUNT = struct.Struct(">i")
RECORD_COUNT_AT = 57  # a v2 batch's record count
NODE = 1


class AnsweringServer:
    """Answers ``SERVED`` APIs, canned except those in ``PER_REQUEST``."""

    SERVED: tuple[int, ...] = ()
    PER_REQUEST: frozenset[int] = frozenset()
    # Versions capped where one canned answer could not fit every request (a
    # FindCoordinator from v4 on lists its keys) or where only brokers send the
    # newer ones (AddPartitionsToTxn from v4 on).
    CAPS = {10: 3, 24: 3}

    def __init__(self, topic: str, partitions: int = 1):
        self.topic = topic
        self.partitions = partitions
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.ranges = {k: (lo, min(hi, self.CAPS.get(k, hi)))
                       for k, lo, hi in advertised_versions() if k in self.SERVED}
        self._canned: dict[tuple[int, int], bytes] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._threads: list[threading.Thread] = []

    def _body(self, api_key: int, version: int, request=None) -> dict:
        if api_key == 18:
            return {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(self.ranges.items())]}
        if api_key == 3:
            return {"throttle_time_ms": 0, "cluster_id": "ceiling", "controller_id": NODE,
                    "brokers": [{"node_id": NODE, "host": "127.0.0.1", "port": self.port,
                                 "rack": None}],
                    "topics": [{"error_code": 0, "name": self.topic, "topic_id": uuid.UUID(int=1),
                                "is_internal": False, "topic_authorized_operations": -(1 << 31),
                                "partitions": [{"error_code": 0, "partition_index": p,
                                                "leader_id": NODE, "leader_epoch": 0,
                                                "replica_nodes": [NODE], "isr_nodes": [NODE],
                                                "offline_replicas": []}
                                               for p in range(self.partitions)]}],
                    "cluster_authorized_operations": -(1 << 31)}
        if api_key == 10:
            return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                    "node_id": NODE, "host": "127.0.0.1", "port": self.port,
                    "coordinators": []}
        raise NotImplementedError(api_key)

    def _answer(self, api_key: int, version: int, correlation_id: int, frame: bytes) -> bytes:
        if api_key in self.PER_REQUEST:
            _header, request = decode_request(ALL_APIS[api_key], version, frame)
            return frame_response(ALL_APIS[api_key], version, correlation_id,
                                  self._body(api_key, version, request))
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
                    frame = buf[4:4 + size]
                    buf = buf[4 + size:]
                    if api_key not in self.ranges:
                        return  # not served here: close, as a broker does
                    out.append(self._answer(api_key, version, correlation_id, frame))
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


class CommitCeiling(AnsweringServer):
    SERVED = (18, 3, 10, 8)  # ApiVersions, Metadata, FindCoordinator, OffsetCommit

    def _body(self, api_key: int, version: int, request=None) -> dict:
        if api_key == 8:
            return {"throttle_time_ms": 0, "topics": [
                {"name": self.topic, "partitions": [{"partition_index": 0, "error_code": 0}]}]}
        return super()._body(api_key, version, request)


class TransactionCeiling(AnsweringServer):
    # ApiVersions, Metadata, FindCoordinator, InitProducerId, AddPartitionsToTxn,
    # Produce, EndTxn
    SERVED = (18, 3, 10, 22, 24, 0, 26)
    PER_REQUEST = frozenset({24, 0})

    def __init__(self, topic: str, partitions: int = 1):
        super().__init__(topic, partitions)
        self._next_offset: dict[int, int] = {}
        self._producer_ids = iter(range(1000, 1 << 62))

    def _answer(self, api_key: int, version: int, correlation_id: int, frame: bytes) -> bytes:
        if api_key == 22:  # a producer id of its own for each producer
            with self._lock:
                producer_id = next(self._producer_ids)
            return frame_response(ALL_APIS[22], version, correlation_id, {
                "throttle_time_ms": 0, "error_code": 0, "producer_id": producer_id,
                "producer_epoch": 0})
        return super()._answer(api_key, version, correlation_id, frame)

    def _body(self, api_key: int, version: int, request=None) -> dict:
        if api_key == 24:
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
                {"name": t.name, "results_by_partition": [
                    {"partition_index": p, "partition_error_code": 0} for p in t.partitions]}
                for t in request.v3_and_below_topics]}
        if api_key == 0:
            return {"throttle_time_ms": 0, "responses": [
                {"name": t.name, "topic_id": t.topic_id, "partition_responses": [
                    self._produced(p.index, p.records) for p in t.partition_data]}
                for t in request.topic_data]}
        if api_key == 26:
            return {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1,
                    "producer_epoch": -1}
        return super()._body(api_key, version, request)

    def _produced(self, partition: int, records) -> dict:
        count = 0
        if records is not None and len(records) > RECORD_COUNT_AT + 4:
            (count,) = _RECORD_COUNT.unpack_from(records, RECORD_COUNT_AT)
        with self._lock:
            base = self._next_offset.get(partition, 0)
            self._next_offset[partition] = base + max(count, 0)
        return {"index": partition, "error_code": 0, "base_offset": base,
                "log_append_time_ms": -1, "log_start_offset": 0, "record_errors": [],
                "error_message": None}


class _AnsweringProtocol(asyncio.Protocol):
    """Frames in, canned answers out: a broker's read-and-answer path with no work."""

    def __init__(self, server: AnsweringServer):
        self.server = server
        self.buffer = b""
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buffer + data if self.buffer else data
        out = []
        pos = 0
        while len(buf) - pos >= 4:
            size, api_key, version, correlation_id = _HEADER.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            if api_key not in self.server.ranges:
                self.transport.close()
                return
            out.append(self.server._answer(api_key, version, correlation_id,
                                           buf[pos + 4:pos + 4 + size]))
            pos += 4 + size
        self.buffer = buf[pos:]
        if out:
            self.transport.write(b"".join(out))


def _serve_on_a_loop(topic: str, ports) -> None:
    try:
        import uvloop
        new_loop = uvloop.new_event_loop
    except ImportError:
        new_loop = asyncio.new_event_loop
    server = CommitCeiling(topic)  # its listener is the loop's

    async def main():
        loop = asyncio.get_running_loop()
        await loop.create_server(lambda: _AnsweringProtocol(server), sock=server.listener)
        ports.put(server.port)
        await asyncio.Event().wait()

    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(main())


class LoopCommitCeiling:
    """``CommitCeiling`` served by one event loop in a child process (``pid``)."""

    def __init__(self, topic: str):
        self.topic = topic
        self.bootstrap: str | None = None
        self.pid: int | None = None

    @contextlib.contextmanager
    def running(self):
        context = multiprocessing.get_context("spawn")
        ports = context.Queue()
        process = context.Process(target=_serve_on_a_loop, args=(self.topic, ports),
                                  daemon=True)
        process.start()
        try:
            self.bootstrap = f"127.0.0.1:{ports.get(timeout=60)}"
            self.pid = process.pid
            yield self
        finally:
            process.kill()
            process.join(10)
