"""Fuzzing the SASL and TLS handshakes: random and mutated exchanges on the
secured listeners.  Each exchange goes on a connection of its own, half-closed
by the client: the broker must answer or close it, never hang, never log an
error or a traceback, and afterwards still log a client in; no line logged
meanwhile holds a password.  Bounded: ``KCOORD_FUZZ_EXAMPLES`` / 10 exchanges
of each kind (150 by default)."""

from __future__ import annotations

import logging
import os
import socket
import ssl
import struct

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol.client import WireClient
from kcoord.protocol.headers import frame_request
from kcoord.protocol.messages.api_versions import API_VERSIONS
from kcoord.protocol.messages.sasl_authenticate import SASL_AUTHENTICATE
from kcoord.protocol.messages.sasl_handshake import SASL_HANDSHAKE
from tests.support import SASL_USERS, Secured

EXAMPLES = max(int(os.environ.get("KCOORD_FUZZ_EXAMPLES", "1500")) // 10, 20)
RANDOM = os.environ.get("KCOORD_FUZZ_RANDOM") == "1"
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "", "x" * 300]
TOKENS = [b"n,,n=alice,r=abc", b"c=biws,r=abc,p=AAAA", b"\0alice\0alice-secret",
          b"n,,\x01auth=Bearer a.b.\x01\x01", b"\x01", b""]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    setup = Secured(tmp_path_factory.mktemp("fuzz-data"), tmp_path_factory.mktemp("fuzz-certs"),
                    extra={"connection.failed.authentication.delay.ms": "0",
                           "sasl.enabled.mechanisms":
                               "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"}).start()
    yield setup
    setup.stop()


def _broken(entries) -> list:
    return [e for e in entries if e.get("log_level") in ("error", "critical")
            or "exc_info" in e or "exception" in e]


class _LoopErrors(logging.Handler):
    """What the event loop itself reports (an exception escaping a protocol
    callback goes to asyncio's logger, not to structlog)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record):
        self.records.append(record.getMessage())


@pytest.fixture
def loop_errors():
    handler = _LoopErrors()
    logging.getLogger("asyncio").addHandler(handler)
    try:
        yield handler.records
    finally:
        logging.getLogger("asyncio").removeHandler(handler)


def _exchange(port: int, payload: bytes, context=None) -> None:
    """Send the bytes, half-close, read until the broker closes (bounded)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        sock = raw
        try:
            if context is not None:
                sock = context.wrap_socket(raw, server_hostname="localhost")
            sock.sendall(payload)
            if context is None:
                sock.shutdown(socket.SHUT_WR)
            else:
                # TLS has no half-close: the rest of a frame the bytes began is
                # waited for, as on any connection; the answers so far are read
                raw.settimeout(0.3)
            while sock.recv(65536):
                pass
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError, TimeoutError):
            pass  # closed by the broker: fine


def _logs_in(secured) -> None:
    with WireClient("127.0.0.1", secured.port("SASL_SSL"), timeout=10,
                    ssl_context=secured.client_context()) as client:
        assert client.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        assert client.call(36, 2, {"auth_bytes": b"\0alice\0alice-secret"})["error_code"] == 0


def _mutate(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for position, value in flips:
        if out:
            out[position % len(out)] = value % 256
    return bytes(out)


def _cut(frame: bytes, keep: int) -> bytes:
    """The frame with its body cut short (its size prefix saying so)."""
    body = frame[4:4 + max(8, min(keep, len(frame) - 5))]
    return struct.pack(">i", len(body)) + body


_frame = st.one_of(
    st.builds(lambda v: frame_request(API_VERSIONS, v, 1, "fuzz", {
        "client_software_name": "f", "client_software_version": "1"}), st.integers(0, 3)),
    st.builds(lambda v, m: frame_request(SASL_HANDSHAKE, v, 2, "fuzz", {"mechanism": m}),
              st.integers(0, 1), st.sampled_from(MECHANISMS)),
    st.builds(lambda v, t: frame_request(SASL_AUTHENTICATE, v, 3, "fuzz", {"auth_bytes": t}),
              st.integers(0, 2), st.one_of(st.sampled_from(TOKENS), st.binary(max_size=200))),
    st.builds(lambda v, m, keep: _cut(frame_request(SASL_HANDSHAKE, v, 2, "fuzz", {
        "mechanism": m}), keep), st.integers(0, 1), st.sampled_from(MECHANISMS),
        st.integers(8, 40)),
    st.builds(lambda b: struct.pack(">i", len(b)) + b, st.binary(max_size=100)),  # a raw token
    st.binary(max_size=40),  # not even a frame
)


def test_sasl_exchanges_of_any_shape_never_break_the_broker(secured, loop_errors):
    with structlog.testing.capture_logs() as logs:

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.lists(_frame, min_size=1, max_size=6),
               st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=3))
        def one_exchange(frames, flips):
            payload = _mutate(b"".join(frames), flips)
            _exchange(secured.port("SASL_PLAINTEXT"), payload)

        one_exchange()
        _logs_in(secured)
    assert _broken(logs) == []
    assert loop_errors == []
    text = repr(logs)
    assert all(password not in text for password in SASL_USERS.values())


def test_tls_ports_take_any_bytes_and_broken_handshakes(secured, loop_errors):
    context = ssl.create_default_context(cafile=secured.ca)
    with structlog.testing.capture_logs() as logs:

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.sampled_from(["SSL", "SASL_SSL"]), st.binary(max_size=300),
               st.sampled_from(["raw", "hello", "tls"]))
        def one_connection(listener, junk, how):
            port = secured.port(listener)
            if how == "raw":
                _exchange(port, junk)
            elif how == "hello":  # a TLS record header announcing a ClientHello, then junk
                _exchange(port, b"\x16\x03\x01" + struct.pack(">H", len(junk)) + junk)
            else:  # a real TLS session carrying junk instead of Kafka requests
                _exchange(port, junk or b"\0", context)

        one_connection()
        _logs_in(secured)
    assert _broken(logs) == []
    assert loop_errors == []
