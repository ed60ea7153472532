"""The listening sockets and their accept loop.

The event loop's own servers fail silently when the process has no file
descriptor left for a new connection: libuv (uvloop) accepts the waiting
connections and closes them at once, and asyncio reports each failed accept
to the loop's exception handler as an error with a traceback.  Either way an
operator whose clients hang or are reset learns nothing from the broker's log.
So the broker accepts itself: a failed accept is logged as one rate-limited
warning naming the limit (``broker.accept_failed``), accepting pauses for
``ACCEPT_RETRY_S`` (asyncio's own back-off) while the waiting connections stay
in the listen backlog, and the connections already open are served meanwhile.
"""

from __future__ import annotations

import asyncio
import errno
import resource
import socket

import structlog

log = structlog.get_logger("kcoord.server")

ACCEPT_RETRY_S = 1.0
TLS_HANDSHAKE_TIMEOUT_S = 10.0
ACCEPTS_PER_TURN = 32
# What accept(2) answers when the process or the system is out of descriptors
# or buffers: a condition that passes, not a broken listener.
OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class Listener:
    """Listens on ``host:port`` and hands each accepted socket to a transport made
    by ``loop.connect_accepted_socket`` with a protocol from ``protocol_factory``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol_factory, host: str, port: int,
                 *, backlog: int = 1024, warn=None, ssl_context=None):
        self._loop = loop
        self._ssl = ssl_context  # a TLS listener's server context
        self._factory = protocol_factory
        self._host = host
        self._port = port
        self._backlog = backlog
        self._warn = warn or (lambda event, peer, **fields: log.warning(event, **fields))
        self.sockets: list[socket.socket] = []
        self._serving = False
        self._connecting: set[asyncio.Task] = set()
        self._resume: dict[int, asyncio.TimerHandle] = {}
        self.accepted = 0
        self.failed_accepts = 0

    async def bind(self) -> None:
        """Bind and listen on every address of the host (as ``create_server``);
        raises OSError (an address in use) with nothing left open."""
        infos = await self._loop.getaddrinfo(self._host or None, self._port,
                                             type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        try:
            for family, kind, proto, _name, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                self.sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    sock.bind(address)
                except OSError as exc:
                    raise OSError(exc.errno, f"error while attempting to bind on address "
                                             f"{address!r}: {exc.strerror.lower()}") from None
                sock.listen(self._backlog)
                sock.setblocking(False)
        except BaseException:
            self.close()
            raise

    def start_serving(self) -> None:
        self._serving = True
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _accept(self, sock: socket.socket) -> None:
        # A slice per turn of the loop: a thousand clients connecting at once
        # must not hold up the requests of those already connected.
        for _ in range(ACCEPTS_PER_TURN):
            try:
                conn, _address = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue  # the client gave up while waiting in the backlog
            except OSError as exc:
                self._accept_failed(sock, exc)
                return
            conn.setblocking(False)
            self.accepted += 1
            task = self._loop.create_task(self._connect(conn))
            self._connecting.add(task)
            task.add_done_callback(self._connecting.discard)

    def _accept_failed(self, sock: socket.socket, exc: OSError) -> None:
        self.failed_accepts += 1
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        fields = {"error": exc.strerror, "errno": errno.errorcode.get(exc.errno, exc.errno),
                  "retry_in_s": ACCEPT_RETRY_S, "open_files_limit": soft,
                  "failed_accepts": self.failed_accepts}
        if exc.errno in OUT_OF_RESOURCES:
            fields["reason"] = ("no descriptor or buffer is free for a new connection: new "
                                "clients wait in the listen backlog; the connections already "
                                "open are served (raise the limit, e.g. ulimit -n, or close "
                                "idle clients)")
        else:
            fields["reason"] = "accepting a connection failed"
        self._warn("broker.accept_failed", f"{sock.getsockname()[0]}:0", **fields)
        # Pause this socket as asyncio's own servers do: retrying at once would
        # spin on the same error.
        fd = sock.fileno()
        self._loop.remove_reader(fd)
        self._resume[fd] = self._loop.call_later(ACCEPT_RETRY_S, self._resume_accepting, sock)

    def _resume_accepting(self, sock: socket.socket) -> None:
        self._resume.pop(sock.fileno(), None)
        if self._serving:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    async def _connect(self, conn: socket.socket) -> None:
        if self._ssl is not None:
            await self._connect_tls(conn)
            return
        try:
            await self._loop.connect_accepted_socket(self._factory, conn)
        except OSError as exc:
            conn.close()
            self._warn("broker.accept_failed", "?", error=exc.strerror,
                       reason="the accepted connection could not be set up")

    async def _connect_tls(self, conn: socket.socket) -> None:
        """The TLS handshake comes first; a client that fails it (plain Kafka bytes
        on a TLS port, an untrusted or missing certificate) is closed with one
        rate-limited line, as Kafka logs "Failed authentication ... (SSL handshake
        failed)"."""
        try:
            peer = "{}:{}".format(*conn.getpeername()[:2])
        except OSError:
            peer = "?"
        try:
            await self._loop.connect_accepted_socket(
                self._factory, conn, ssl=self._ssl, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError, EOFError) as exc:
            conn.close()
            self._warn("connection.tls_handshake_failed", peer,
                       reason=getattr(exc, "reason", None) or str(exc) or type(exc).__name__)

    def close(self) -> None:
        """Stop accepting and close the listening sockets (open connections stay)."""
        self._serving = False
        for handle in self._resume.values():
            handle.cancel()
        self._resume.clear()
        for sock in self.sockets:
            if sock.fileno() >= 0:
                self._loop.remove_reader(sock.fileno())
                sock.close()

    async def wait_closed(self) -> None:
        """Wait until the connections being set up are (closing has no delay)."""
        if self._connecting:
            await asyncio.wait(list(self._connecting))
