"""The TCP listener: one ``asyncio.Protocol`` per connection.

Frames are ``int32 size`` + ``size`` bytes, read with ``asyncio.BufferedProtocol``
(the socket is read into memory the connection provides, without a ``bytes``
object per read): a frame of ``LARGE_FRAME`` bytes or more is received straight
into a ``bytearray`` of its own, so a megabyte of produced records is copied
once, by the kernel, and then travels as views of that frame to the log file;
smaller frames are read into a receive buffer shared by the connections of the
thread and copied out as ``bytes``.  Like Kafka, a connection is served
one request at a time and answered strictly in request order (Kafka mutes a
channel until its response is sent); pipelined frames wait in a queue.  Requests
whose handler completes synchronously are answered in the same pass, and the
answers of one pass go out in a single ``transport.write``; an ``async``
handler is run at once until it first waits, so one that never waits (a
produce appended at once) is answered in the pass too, and one that waits is
driven on by a task.

A pass over a connection's queue stops after ``PASS_BUDGET_S`` of work and
continues in a later turn of the event loop, after every other connection's
ready events: a client that pipelines a burst of expensive requests never
stalls the others (Kafka's network threads interleave connections the same
way).

Bad input never takes the broker down: an oversize or negative frame size, an
unknown API key, an unsupported version (other than ApiVersions) or an
undecodable request is logged once and that connection alone is closed.
"""

from __future__ import annotations

import asyncio
import collections
import collections.abc
import contextlib
import gc
import inspect
import logging
import socket
import struct
import threading
import time
import types
from typing import TYPE_CHECKING

import structlog

from kcoord.broker import logs
from kcoord.broker.apis import NO_RESPONSE, REGISTRY, CloseConnection, Later
from kcoord.broker.security.quotas import REQUEST as REQUEST_QUOTA
from kcoord.broker.security.sasl import AuthenticationFailure, ProtocolViolation, SaslAuthenticator
from kcoord.broker.security.tls import ANONYMOUS, TlsConfigError, certificate_principal
from kcoord.protocol.headers import decode_request, frame_response
from kcoord.protocol.messages.api_versions import API_VERSIONS
from kcoord.protocol.wire import MAX_STRING_BYTES, StringTooLongError

if TYPE_CHECKING:
    from kcoord.broker.app import Broker

log = structlog.get_logger("kcoord.server")

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hhi")
_MAX_QUEUED_FRAMES = 256
# Reading stops too once this many bytes of frames wait (a few large produce
# requests): the client's further requests wait in the socket's buffers, as
# with Kafka, which reads nothing more from a connection until its request is
# answered, instead of in ever new broker memory.
_MAX_QUEUED_BYTES = 4 << 20
PASS_BUDGET_S = 0.002
OFFLOAD_BYTES = 256 * 1024  # requests this large are decoded in a worker thread
LARGE_FRAME = 16 * 1024  # frames this large are received into a buffer of their own
# ...up to this size: the buffer is allocated when the frame's size is read, so a
# client announcing a frame it never sends must not make the broker set aside
# more than this; larger frames grow a buffer as their bytes arrive.
PREALLOCATE_MAX = 8 << 20
_RECEIVE_BUFFER = 256 * 1024
_receive = threading.local()  # one receive buffer per event loop thread


def _receive_buffer() -> memoryview:
    view = getattr(_receive, "view", None)
    if view is None:
        view = _receive.view = memoryview(bytearray(_RECEIVE_BUFFER))
    return view


def _client_id_of(frame: bytes) -> str | None:
    """The client id of a request header (v1+, after the correlation id), read
    without knowing the API: for a log line about a request kcoord cannot
    serve; None if it cannot be read."""
    if len(frame) < 10:
        return None
    (length,) = struct.unpack_from(">h", frame, 8)
    if length < 0 or 10 + length > len(frame):
        return None
    return frame[10:10 + length].decode("utf-8", "replace")


class WarningLimiter:
    """Bad input from one client must not flood the log: each (client host,
    event) pair logs at most once per ``window_s``, or each (client host,
    event, ``distinct``) when the caller tells apart what it logs (an unknown
    API key and version: each one a client sends is named); the next line says
    how many were left out meanwhile (``suppressed``).  At most ``max_keys``
    keys are remembered (the oldest are forgotten)."""

    def __init__(self, window_s: float = 10.0, max_keys: int = 10_000, clock=time.monotonic):
        self.window_s = window_s
        self.max_keys = max_keys
        self.clock = clock
        self._seen: collections.OrderedDict[tuple, list] = collections.OrderedDict()

    def warn(self, event: str, peer: str, *, distinct=None, **fields) -> None:
        key = (peer.rsplit(":", 1)[0], event, distinct)
        now = self.clock()
        entry = self._seen.get(key)
        if entry is not None and now - entry[0] < self.window_s:
            entry[1] += 1
            return
        suppressed = entry[1] if entry is not None else 0
        self._seen[key] = [now, 0]
        self._seen.move_to_end(key)
        while len(self._seen) > self.max_keys:
            self._seen.popitem(last=False)
        if suppressed:
            fields["suppressed"] = suppressed
        log.warning(event, peer=peer, **fields)



class RequestContext:
    """What a handler knows about the request besides its body."""

    __slots__ = ("broker", "api_key", "api_version", "correlation_id", "client_id", "peer",
                 "connection")

    def __init__(self, broker, api_key, api_version, correlation_id, client_id, peer, connection):
        self.broker = broker
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.peer = peer
        self.connection = connection

    def throttle(self, kind: str, amount: float) -> int:
        """Record ``amount`` against the client's quota of ``kind`` (bytes of a
        produce or a fetch); the throttle time, the connection muted that long."""
        quotas = self.broker.quotas
        if kind not in quotas.enforcing:
            return 0
        ms = quotas.record(self.principal.partition(":")[2], self.client_id, kind, amount,
                           time.monotonic() * 1000)
        if ms:
            self.connection.mute(ms)
        return ms

    @property
    def host(self) -> str:
        """The client's address, as ACL hosts name it."""
        return self.peer.rsplit(":", 1)[0]

    @property
    def principal(self) -> str:
        """The client's principal, ``User:<name>`` (``User:ANONYMOUS`` unauthenticated)."""
        return self.connection.principal

    @property
    def advertised(self) -> tuple[str, int]:
        """The broker's address for the client: what the listener the request came
        in on advertises."""
        return self.broker.advertised_for(self.connection.listener)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: "Broker", listener: str = "PLAINTEXT", security=None):
        self.broker = broker
        self.listener = listener  # the name of the listener it was accepted on
        self.security = security  # its ListenerSecurity (None: PLAINTEXT)
        # Who the client is (Kafka's KafkaPrincipal): from its SASL login or its
        # TLS certificate; ANONYMOUS otherwise.
        self.principal = ANONYMOUS
        self.auth: SaslAuthenticator | None = None
        if security is not None and security.sasl is not None:
            self.auth = SaslAuthenticator(security.sasl, "?")
            self._handle = self._handle_secured
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        # The start of a frame not received whole (at most a small frame).
        self._buffer = bytearray()
        # A large frame being received: the frame, a view of it, bytes in so far.
        self._frame: bytearray | None = None
        self._frame_view: memoryview | None = None
        self._filled = 0
        self._queue: collections.deque[bytes | bytearray] = collections.deque()
        self._queued_bytes = 0
        self._busy = False  # a request is being awaited
        self._write_paused = False
        self._read_paused = False
        self._closed = False
        self._eof = False
        self._stopping = False  # the broker is stopping: no new request is served
        self._last_active = time.monotonic()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task | None = None
        self._pass_scheduled = False
        self._gone: asyncio.Future | None = None  # see ``gone``
        self.max_frame = broker.config["socket.request.max.bytes"]
        if self.auth is not None:
            # Before a client has logged in, its frames are held to
            # sasl.server.max.receive.size (Kafka: "invalid receive size").
            self.max_frame = min(self.max_frame, broker.config["sasl.server.max.receive.size"])
        # Each request is traced at debug level: whether that level is on is asked
        # again only when a logger's level has changed, not once per request.
        self._trace_seen = -1
        self._trace = False
        self._requests = 0
        self._muted_until = 0.0  # a quota's throttle: reading resumes then

    def _tracing(self) -> bool:
        if self._trace_seen != logs.generation:
            self._trace_seen = logs.generation
            self._trace = logs.enabled("kcoord.server", logging.DEBUG)
        return self._trace

    # -- transport callbacks ----------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.broker.connections.add(self)
        self._arm_idle_timer()
        if self.auth is not None:
            self.auth.peer = self.peer
        elif self.security is not None and self.security.mapper is not None:
            try:
                self.principal = certificate_principal(transport.get_extra_info("ssl_object"),
                                                       self.security.mapper)
            except TlsConfigError as exc:
                log.info("connection.authentication_failed", peer=self.peer,
                         listener=self.listener, reason=str(exc))
                self.close()
                return
        if self._tracing():
            log.debug("connection.opened", peer=self.peer,
                      connections=len(self.broker.connections))

    def connection_lost(self, exc):
        self._closed = True
        self.broker.connections.discard(self)
        if self._tracing():
            log.debug("connection.closed", peer=self.peer, requests=self._requests,
                      reason=str(exc) if exc is not None else "closed")
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._queue.clear()
        self._queued_bytes = 0
        self._frame = self._frame_view = None
        self._went_away()

    def pause_writing(self):
        self._write_paused = True

    def resume_writing(self):
        self._write_paused = False
        self._pump()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame_view is not None:
            return self._frame_view[self._filled:]
        return _receive_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._last_active = self.broker.last_activity = time.monotonic()
        if self._frame_view is not None:
            self._filled += nbytes
            if self._filled < len(self._frame):
                return
            self._queue.append(self._frame)
            self._queued_bytes += len(self._frame)
            self._frame_view.release()
            self._frame = self._frame_view = None
        else:
            received = _receive_buffer()[:nbytes]
            buf = self._buffer
            if buf:  # the start of a frame is waiting
                buf += received
                with memoryview(buf) as view:
                    pos = self._split_frames(view)
                if pos < 0:
                    return
                del buf[:pos]
            else:  # the usual case: the bytes received start with a frame
                pos = self._split_frames(received)
                if pos < 0:
                    return
                if pos < nbytes:
                    buf += received[pos:]
        if (len(self._queue) > _MAX_QUEUED_FRAMES or self._queued_bytes > _MAX_QUEUED_BYTES) \
                and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        if not self._pass_scheduled:
            self._pump()

    def data_received(self, data) -> None:
        """Bytes received (what a transport without buffer support, or a test,
        gives): the same path as ``buffer_updated``."""
        data = memoryview(data)
        pos = 0
        while pos < len(data) and not self._closed:
            into = self.get_buffer(len(data) - pos)
            n = min(len(into), len(data) - pos)
            into[:n] = data[pos:pos + n]
            self.buffer_updated(n)
            pos += n

    def _split_frames(self, view: memoryview) -> int:
        """Queue the whole small frames at the start of ``view``, and start
        receiving a large one; the position after what was taken, or -1 if a
        frame size closed the connection."""
        queue = self._queue
        pos = 0
        end = len(view)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(view, pos)
            if size < 0 or size > self.max_frame:
                self.broker.bad_input.warn("connection.frame_size_rejected", self.peer,
                                           size=size, max=self.max_frame)
                self.close()
                return -1
            if LARGE_FRAME <= size <= PREALLOCATE_MAX:
                # Its own buffer, which the rest of it is received into.
                have = min(end - pos - 4, size)
                frame = bytearray(size)
                memoryview(frame)[:have] = view[pos + 4:pos + 4 + have]
                pos += 4 + have
                if have == size:
                    queue.append(frame)
                    self._queued_bytes += size
                    continue
                self._frame, self._frame_view, self._filled = frame, memoryview(frame), have
                return pos
            if end - pos - 4 < size:
                break
            queue.append(bytes(view[pos + 4:pos + 4 + size]))
            self._queued_bytes += size
            pos += 4 + size
        return pos

    def eof_received(self):
        # The client half-closed: answer what is queued, then close.
        self._eof = True
        self._went_away()
        if self.idle:
            self.close()
        # Over TLS the transport closes itself (asyncio warns about True there).
        return self.security is None or self.security.ssl_context is None

    # -- request processing -----------------------------------------------------

    def _scheduled_pump(self) -> None:
        self._pass_scheduled = False
        self._pump()

    def _pump(self) -> None:
        if self._busy or self._closed:
            return
        out: list[bytes] = []
        queue = self._queue
        deadline = time.monotonic() + PASS_BUDGET_S
        served = 0
        while queue and not self._write_paused:
            if served and time.monotonic() > deadline:
                # Enough for this turn: answer what is done, let the other
                # connections run, and come back for the rest.
                self._flush(out)
                self._pass_scheduled = True
                asyncio.get_running_loop().call_soon(self._scheduled_pump)
                return
            frame = queue.popleft()
            self._queued_bytes -= len(frame)
            if self._read_paused:
                self._maybe_resume_reading()
            served += 1
            try:
                result = self._handle(frame)
            except CloseConnection:
                self._flush(out)
                self.close()
                return
            if result is None:
                continue
            if isinstance(result, (bytes, bytearray)):
                out.append(result)
                continue
            # An answer to come: sent before anything queued behind it.
            self._flush(out)
            self._busy = True
            if type(result) is _Encoding:
                # Looked at once more after what this turn scheduled (a batch's
                # flush under the adaptive linger): often done by then, and
                # answered in that turn rather than in the next one.
                asyncio.get_running_loop().call_soon(result.answer_or_wait)
            else:
                self._task = asyncio.get_running_loop().create_task(self._finish(result))
            return
        self._flush(out)
        if self._eof and not queue:
            self.close()
            return
        if self._read_paused:
            self._maybe_resume_reading()

    def _maybe_resume_reading(self) -> None:
        if self._muted_until and time.monotonic() < self._muted_until:
            return  # throttled by a quota
        if len(self._queue) < _MAX_QUEUED_FRAMES // 2 \
                and self._queued_bytes <= _MAX_QUEUED_BYTES // 2 and not self._closed \
                and not self._stopping:
            self._read_paused = False
            self.transport.resume_reading()

    async def _finish(self, pending) -> None:
        try:
            response = await pending
        except CloseConnection:
            self.close()
            return
        except Exception:
            log.exception("request.failed", peer=self.peer)
            self.close()
            return
        finally:
            self._busy = False
        if response is not None and not self._closed:
            self.transport.write(response)
        self._last_active = time.monotonic()
        self._pump()

    def _answer_later(self, encoding: "_Encoding") -> None:
        """A ``Later``'s ticket is done: its answer is shaped, encoded and sent, and
        the requests queued behind it are served (``_finish`` without a task)."""
        self._busy = False
        later = encoding.later
        if self._closed:
            if not later.ticket.cancelled():
                later.ticket.exception()  # retrieved: the client has gone
            return
        try:
            response = self._encode(encoding.schema, encoding.api_version,
                                    encoding.correlation_id, encoding.flexible,
                                    later.shape(later.ticket.result()))
        except CloseConnection:
            self.close()
            return
        except (Exception, asyncio.CancelledError):
            log.exception("request.handler_failed", peer=self.peer, api=encoding.schema.name,
                          api_version=encoding.api_version)
            self.close()
            return
        if response is not None:
            self.transport.write(response)
        self._last_active = time.monotonic()
        self._pump()

    def _flush(self, out: list[bytes]) -> None:
        if out and not self._closed:
            self.transport.write(b"".join(out) if len(out) > 1 else out[0])
            self._last_active = time.monotonic()
        out.clear()

    def _handle_secured(self, frame: bytes):
        """``_handle`` on a SASL listener: the authentication exchange first, and
        re-authentication or the end of the session later."""
        auth = self.auth
        if not auth.pending:
            if auth.expires_at is None:
                return KafkaConnection._handle(self, frame)
            if auth.expired():
                log.info("connection.session_expired", peer=self.peer, principal=self.principal,
                         reason="connections.max.reauth.ms passed without re-authentication")
                raise CloseConnection
            if frame[:2] != b"\x00\x11" or not auth.begin_reauthentication():
                return KafkaConnection._handle(self, frame)
        try:
            answer = auth.handle(frame, lambda f: KafkaConnection._handle(self, f))
        except AuthenticationFailure as exc:
            log.info("connection.authentication_failed", peer=self.peer, listener=self.listener,
                     mechanism=auth.mechanism, reason=str(exc))
            return self._fail_later(exc.response, auth.settings.failed_delay_ms / 1000)
        except ProtocolViolation as exc:
            self.broker.bad_input.warn("connection.sasl_protocol_violation", self.peer,
                                       reason=str(exc))
            raise CloseConnection from None
        except CloseConnection:
            raise
        except Exception:  # a bug: logged, and this connection alone closed
            log.exception("connection.sasl_failed", peer=self.peer, listener=self.listener)
            raise CloseConnection from None
        if not auth.pending:
            self.max_frame = self.broker.config["socket.request.max.bytes"]
            renewed = self.principal == auth.principal
            self.principal = auth.principal
            if self._tracing():
                log.debug("connection.reauthenticated" if renewed else "connection.authenticated",
                          peer=self.peer, principal=self.principal, mechanism=auth.mechanism,
                          session_ms=auth.session_ms)
        return answer

    async def _fail_later(self, response: bytes | None, delay: float):
        """Kafka's connection.failed.authentication.delay.ms: the answer to a failed
        authentication, and the close, come that much later (a client retrying a
        wrong password cannot spin)."""
        if self.transport is not None and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        if delay > 0:
            await asyncio.sleep(delay)
        if response and not self._closed:
            self.transport.write(response)
        raise CloseConnection

    def _handle(self, frame: bytes):
        """Decode and serve one request; bytes to send, None, or an awaitable of bytes."""
        if len(frame) < 8:
            self.broker.bad_input.warn("request.truncated_header", self.peer, size=len(frame))
            raise CloseConnection
        api_key, api_version, correlation_id = _KEY_VERSION.unpack_from(frame, 0)
        reg = REGISTRY.get(api_key)
        if reg is None:
            self.broker.bad_input.warn("request.unknown_api_key", self.peer, api_key=api_key,
                                       api_version=api_version,
                                       client_id=_client_id_of(frame),
                                       distinct=(api_key, api_version))
            raise CloseConnection
        if not reg.serves(api_version):
            if api_key == API_VERSIONS.key:
                return self._api_versions_fallback(correlation_id)
            self.broker.bad_input.warn("request.unsupported_version", self.peer,
                                       api=reg.schema.name, api_key=api_key,
                                       api_version=api_version,
                                       supported=f"{reg.min_version}-{reg.max_version}",
                                       client_id=_client_id_of(frame),
                                       distinct=(api_key, api_version))
            raise CloseConnection
        if len(frame) >= OFFLOAD_BYTES and len(frame) > reg.decode_on_loop:
            return self._handle_large(frame, reg, api_version, correlation_id)
        try:
            header, request = decode_request(reg.schema, api_version, frame)
        except Exception as exc:  # any malformed body: log and drop the connection
            self._undecodable(reg.schema, api_version, exc)
        return self._serve(reg, api_version, correlation_id, header, request)

    async def _handle_large(self, frame: bytes, reg, api_version: int, correlation_id: int):
        # Decoding a large request (a Metadata request naming a million topics
        # is 2 MB) takes seconds: a worker thread does it while the event loop
        # keeps serving every other connection.
        loop = asyncio.get_running_loop()
        # One large request is decoded at a time: its objects take about a
        # hundred times its size in memory, and clients sending many at once
        # must not multiply that (Kafka bounds queued request bytes likewise).
        async with self.broker.large_requests:
            try:
                header, request = await loop.run_in_executor(None, _decode_large, reg,
                                                             api_version, frame)
            except Exception as exc:
                self._undecodable(reg.schema, api_version, exc)
        result = self._serve(reg, api_version, correlation_id, header, request)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _undecodable(self, schema, api_version: int, exc: Exception):
        self.broker.bad_input.warn("request.undecodable", self.peer, api=schema.name,
                                   api_version=api_version, error=str(exc) or type(exc).__name__)
        raise CloseConnection from None

    def _serve(self, reg, api_version: int, correlation_id: int, header, request):
        schema = reg.schema
        self._requests += 1
        if self.broker.deferred:  # what follows answers already sent comes first
            self.broker.run_deferred()
        if self._tracing():
            log.debug("request", peer=self.peer, api=schema.name, version=api_version,
                      correlation_id=correlation_id, client_id=header.client_id or "")
        flexible = schema.is_flexible(api_version)
        ctx = RequestContext(self.broker, reg.key, api_version, correlation_id,
                             header.client_id or "", self.peer, self)
        if REQUEST_QUOTA in self.broker.quotas.enforcing:
            return self._serve_timed(ctx, reg, schema, api_version, correlation_id, flexible,
                                     request)
        # What _handler_errors does, written out: this runs for every request.
        try:
            result = reg.handler(ctx, request)
            if type(result) is Later:  # a coordinator's answer to come (a commit, a join)
                return _Encoding(self, result, schema, api_version, correlation_id, flexible)
            if type(result) is types.CoroutineType:
                # An async handler runs now, until it first waits: most never do
                # (a produce appended at once, a fetch with data), and their
                # answers then go out with the others of this pass, in one write,
                # instead of a task and a turn of the loop each.
                try:
                    awaited = result.send(None)
                except StopIteration as done:
                    return self._encode(schema, api_version, correlation_id, flexible,
                                        done.value)
                result = _resumed(result, awaited)
            elif type(result) is dict or not inspect.isawaitable(result):
                return self._encode(schema, api_version, correlation_id, flexible, result)
        except CloseConnection:
            raise
        except (Exception, asyncio.CancelledError):  # (what it awaited first was cancelled)
            self._handler_failed(schema, api_version)
        return self._encode_later(result, schema, api_version, correlation_id, flexible)

    def _serve_timed(self, ctx, reg, schema, api_version, correlation_id, flexible, request):
        """``_serve`` under a request_percentage quota: the time the handler takes on
        the event loop is recorded against the client's quota (Kafka's request
        handler thread time) and a throttle answered in ``throttle_time_ms``."""
        started = time.perf_counter()
        with self._handler_errors(schema, api_version):
            result = reg.handler(ctx, request)
        if type(result) is not dict and inspect.isawaitable(result):
            return self._encode_later(result, schema, api_version, correlation_id, flexible)
        throttle = ctx.throttle(REQUEST_QUOTA, (time.perf_counter() - started) * 100)
        if throttle and isinstance(result, dict) and "throttle_time_ms" in result:
            result["throttle_time_ms"] = max(result["throttle_time_ms"], throttle)
        return self._encode(schema, api_version, correlation_id, flexible, result)

    async def _encode_later(self, pending, schema, api_version, correlation_id, flexible):
        with self._handler_errors(schema, api_version):
            result = await pending
            return self._encode(schema, api_version, correlation_id, flexible, result)

    def _encode(self, schema, api_version, correlation_id, flexible, result):
        if result is NO_RESPONSE:
            return None
        try:
            return frame_response(schema, api_version, correlation_id, result)
        except StringTooLongError:
            # An error message that quotes a long request string (a topic name of
            # 32,000 bytes) must not make the whole answer unencodable.
            if not _fit_messages(result):
                raise
            self.broker.bad_input.warn("response.message_truncated", self.peer,
                                       api=schema.name, api_version=api_version,
                                       max_bytes=MAX_STRING_BYTES)
            return frame_response(schema, api_version, correlation_id, result)

    @contextlib.contextmanager
    def _handler_errors(self, schema, api_version):
        """An unexpected exception in a handler, or in encoding its answer, is logged
        and closes this connection only."""
        try:
            yield
        except CloseConnection:
            raise
        except Exception:
            self._handler_failed(schema, api_version)

    def _handler_failed(self, schema, api_version):
        """Called while handling the exception: log it, close this connection only."""
        log.exception("request.handler_failed", peer=self.peer, api=schema.name,
                      api_version=api_version)
        raise CloseConnection from None

    def _api_versions_fallback(self, correlation_id: int) -> bytes:
        # Kafka answers an ApiVersions version it does not know without parsing the
        # body, in the v0 format, with UNSUPPORTED_VERSION and its own range for
        # ApiVersions so the client can retry with a version both sides speak.
        reg = REGISTRY[API_VERSIONS.key]
        body = API_VERSIONS.codec(0, "response").encode({
            "error_code": 35,
            "api_keys": [{"api_key": reg.key, "min_version": reg.min_version,
                          "max_version": reg.max_version}],
        })
        return _SIZE.pack(4 + len(body)) + struct.pack(">i", correlation_id) + body

    # -- lifecycle -----------------------------------------------------------------

    def _arm_idle_timer(self) -> None:
        idle_ms = self.broker.config["connections.max.idle.ms"]
        if idle_ms is None or idle_ms < 0:
            return
        loop = asyncio.get_running_loop()
        self._idle_timer = loop.call_later(idle_ms / 1000, self._check_idle)

    def _check_idle(self) -> None:
        if self._closed:
            return
        idle_ms = self.broker.config["connections.max.idle.ms"]
        idle_for = time.monotonic() - self._last_active
        if not self._busy and not self._queue and idle_for * 1000 >= idle_ms:
            log.info("connection.idle_closed", peer=self.peer, idle_ms=int(idle_for * 1000))
            self.close()
            return
        remaining = max(idle_ms / 1000 - idle_for, 0.05)
        self._idle_timer = asyncio.get_running_loop().call_later(remaining, self._check_idle)

    def mute(self, ms: int) -> None:
        """Read nothing more from the client for ``ms`` (Kafka mutes a throttled
        channel, KIP-219): its next requests wait in the socket meanwhile."""
        if self._closed or self.transport is None:
            return
        until = time.monotonic() + ms / 1000
        if until <= self._muted_until:
            return
        self._muted_until = until
        if not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        asyncio.get_running_loop().call_later(ms / 1000, self._unmute)

    def _unmute(self) -> None:
        if time.monotonic() + 0.001 < self._muted_until:
            return  # muted again since, for longer
        self._muted_until = 0.0
        self._maybe_resume_reading()

    def gone(self) -> asyncio.Future:
        """Done once the client closed or half-closed the connection: a parked
        request (a long-polling Fetch) answers then instead of waiting on."""
        if self._gone is None:
            self._gone = asyncio.get_running_loop().create_future()
            if self._closed or self._eof:
                self._gone.set_result(None)
        return self._gone

    def _went_away(self) -> None:
        if self._gone is not None and not self._gone.done():
            self._gone.set_result(None)

    @property
    def idle(self) -> bool:
        return not self._busy and not self._queue

    def stop_taking_requests(self) -> None:
        """The broker is stopping, as Kafka's socket server stops processing
        requests: nothing more is read, what was received and not begun is
        dropped unanswered (its client sends it again once it reconnects), a
        long-polling Fetch answers at once, and the broker closes the
        connection once the request in progress is answered.  A client is
        never answered a Produce or a Fetch after the coordinators resigned."""
        if self._closed or self._stopping:
            return
        self._stopping = True
        self._queue.clear()
        self._queued_bytes = 0
        if self.transport is not None and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        self._went_away()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.clear()
            self._queued_bytes = 0
            if self.transport is not None:
                self.transport.close()


class _Encoding:
    """A handler's ``Later`` with what its encoding needs: the ticket's done-callback
    (``KafkaConnection._answer_later``), or awaited (a large request's path)."""

    __slots__ = ("connection", "later", "schema", "api_version", "correlation_id", "flexible")

    def __init__(self, connection, later, schema, api_version, correlation_id, flexible):
        self.connection = connection
        self.later = later
        self.schema = schema
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.flexible = flexible

    def __call__(self, _ticket) -> None:
        self.connection._answer_later(self)

    def answer_or_wait(self) -> None:
        ticket = self.later.ticket
        if ticket.done():
            self.connection._answer_later(self)
        else:
            ticket.add_done_callback(self)

    def __await__(self):
        return self.connection._encode_later(self.later, self.schema, self.api_version,
                                             self.correlation_id, self.flexible).__await__()


def _resumed(coro, awaited):
    """The rest of ``coro``, which was run until it yielded ``awaited`` (what a
    task's first step would have done), to be awaited in a task: it hands that
    to the task and then drives ``coro`` on, passing in what the task sends or
    throws.  Meanwhile ``awaited`` is not marked as being awaited (a task clears
    that mark when it takes a future), so other requests can await it too."""
    blocking = getattr(awaited, "_asyncio_future_blocking", None)
    if blocking:
        awaited._asyncio_future_blocking = False
    return _rest(coro, awaited, blocking)


@types.coroutine
def _rest(coro, awaited, blocking):
    if blocking:
        awaited._asyncio_future_blocking = True  # marked again for the task to take
    while True:
        try:
            value = yield awaited
        except BaseException as exc:  # the task cancelled, or the awaited failed
            try:
                awaited = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                awaited = coro.send(value)
            except StopIteration as done:
                return done.value


def _decode_large(reg, api_version: int, frame: bytes):
    """``decode_request`` and the handler's ``prepare`` (in a worker thread), without cyclic
    garbage collection: the objects of a large request would otherwise trigger
    full collections that hold the interpreter lock for tens of milliseconds at a
    time (the decoded objects hold no cycles)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        header, request = decode_request(reg.schema, api_version, frame)
        if reg.prepare is not None:
            request = reg.prepare(request, api_version)
        return header, request
    finally:
        if was_enabled:
            gc.enable()


def _fit_messages(value) -> bool:
    """Cut every ``*message`` string longer than a Kafka string can be (in place);
    True if anything was cut."""
    cut = False
    if isinstance(value, collections.abc.Mapping):
        for key, item in value.items():
            if isinstance(item, str) and key.endswith("message"):
                raw = item.encode("utf-8")
                if len(raw) > MAX_STRING_BYTES:
                    value[key] = raw[:MAX_STRING_BYTES].decode("utf-8", "ignore")
                    cut = True
            elif isinstance(item, (collections.abc.Mapping, list)):
                cut = _fit_messages(item) or cut
    elif isinstance(value, list):
        for item in value:
            cut = _fit_messages(item) or cut
    return cut
