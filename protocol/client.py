"""A blocking client that speaks to any Kafka broker through the project's own schemas.

Requests are framed with ``protocol.headers.frame_request`` and answers decoded
with the same codecs the broker uses.  The embedded broker's helpers
(``broker.testing``) talk to kcoord with it, and the differential tests send
exactly the same bytes to kcoord and to Apache Kafka and read both answers the
same way.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
import socket
import struct
from typing import Any

from kcoord.broker.healthcheck import recv_exact
from kcoord.protocol.headers import frame_request, response_header_codec, response_header_version
from kcoord.protocol.messages import ALL_APIS
from kcoord.protocol.schema import Api

_SIZE = struct.Struct(">i")


def plain(value: Any) -> Any:
    """A decoded message as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


class WireClient:
    """One TCP connection; ``call`` sends one request and returns the decoded answer."""

    def __init__(self, host: str, port: int, timeout: float = 30, client_id: str = "kcoord",
                 ssl_context=None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:  # a TLS listener: an ssl.SSLContext of the client's
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=host)
        self.client_id = client_id
        self.correlation_id = 0

    @classmethod
    def to(cls, bootstrap: str, **kwargs) -> "WireClient":
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port), **kwargs)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, api: Api | int, version: int, body: dict | None = None) -> dict:
        self.send(api, version, body)
        return self.receive(api, version)

    def send(self, api: Api | int, version: int, body: dict | None = None) -> int:
        """Send a request whose answer comes later (``receive``): a parked
        JoinGroup, or requests sent together; its correlation id."""
        api = ALL_APIS[api] if isinstance(api, int) else api
        self.correlation_id += 1
        self.sock.sendall(frame_request(api, version, self.correlation_id, self.client_id,
                                        body or {}))
        return self.correlation_id

    def receive(self, api: Api | int, version: int, correlation_id: int | None = None) -> dict:
        """The next answer, that of ``correlation_id`` (by default the last request's)."""
        api = ALL_APIS[api] if isinstance(api, int) else api
        return self.decode_response(api, version, self.recv_frame(), correlation_id)

    def decode_response(self, api: Api, version: int, frame: bytes,
                        correlation_id: int | None = None) -> dict:
        header_version = response_header_version(api.key, api.is_flexible(version))
        stream = io.BytesIO(frame)
        header = response_header_codec(header_version).read(stream)
        expected = self.correlation_id if correlation_id is None else correlation_id
        if header["correlation_id"] != expected:
            raise AssertionError(f"correlation id {header['correlation_id']} != {expected}")
        return plain(api.codec(version, "response").decode(frame[stream.tell():]))

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def recv_frame(self) -> bytes:
        (size,) = _SIZE.unpack(recv_exact(self.sock, 4))
        return recv_exact(self.sock, size)
