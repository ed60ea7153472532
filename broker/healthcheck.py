"""A liveness probe: send one ApiVersions request and check the answer.

    python -m kcoord.broker.healthcheck --host 127.0.0.1 --port 9092

Exits 0 when the broker answers with a well-formed ApiVersions response carrying
error code 0 and listing ApiVersions itself, 1 otherwise (connection refused,
timeout, a short or undecodable answer, a wrong correlation id, an error code).
The container image uses it as its ``HEALTHCHECK``.  It speaks through the
project's own codecs and the standard library only.
"""

from __future__ import annotations

import argparse
import io
import socket
import struct
import sys

from kcoord.protocol.headers import frame_request
from kcoord.protocol.messages.api_versions import API_VERSIONS

# v3 is the first flexible version and what current clients open with; every
# Kafka broker since 2.4 serves it, and the answer's header is always v0.
VERSION = 3
CORRELATION_ID = 0x6B63  # "kc"
_SIZE = struct.Struct(">i")


class Unhealthy(Exception):
    pass


def build_request(client_id: str = "kcoord-healthcheck") -> bytes:
    return frame_request(API_VERSIONS, VERSION, CORRELATION_ID, client_id, {
        "client_software_name": "kcoord-healthcheck",
        "client_software_version": "1",
    })


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from a blocking socket; ConnectionError if it closes first."""
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("connection closed before a full answer arrived")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def check_response(frame: bytes) -> dict:
    """Validate one response frame (without its size prefix); return the body."""
    if len(frame) < 4:
        raise Unhealthy(f"answer too short ({len(frame)} bytes)")
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    if correlation_id != CORRELATION_ID:
        raise Unhealthy(f"wrong correlation id {correlation_id}")
    stream = io.BytesIO(frame)
    stream.seek(4)
    try:
        body = API_VERSIONS.codec(VERSION, "response").read(stream)
    except Exception as exc:
        raise Unhealthy(f"undecodable answer: {exc or type(exc).__name__}") from None
    if stream.tell() != len(frame):
        raise Unhealthy(f"{len(frame) - stream.tell()} trailing bytes in the answer")
    if body["error_code"] != 0:
        raise Unhealthy(f"error code {body['error_code']}")
    if not any(k["api_key"] == API_VERSIONS.key for k in body["api_keys"]):
        raise Unhealthy("ApiVersions is not among the advertised APIs")
    return body


def probe(host: str, port: int, timeout: float = 5.0) -> dict:
    """Send ApiVersions to ``host:port``; the decoded answer, or :class:`Unhealthy`."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(build_request())
            (size,) = _SIZE.unpack(recv_exact(sock, 4))
            if size < 4 or size > 1 << 20:
                raise Unhealthy(f"implausible answer size {size}")
            return check_response(recv_exact(sock, size))
    except OSError as exc:  # refused, timed out, closed early
        raise Unhealthy(f"{host}:{port}: {exc.strerror or exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kcoord.broker.healthcheck",
                                     description="Check that a broker answers ApiVersions.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds (default 5)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing")
    args = parser.parse_args(argv)
    try:
        body = probe(args.host, args.port, args.timeout)
    except Unhealthy as exc:
        if not args.quiet:
            print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"ok: {args.host}:{args.port} answers ApiVersions v{VERSION} "
              f"({len(body['api_keys'])} APIs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
