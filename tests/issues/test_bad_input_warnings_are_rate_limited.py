"""Every bad frame logged a warning with no rate limit (25 MB of log in one fuzz
campaign).  Warnings about bad input are now limited per client host and
reason, once per window, and the next line counts what was left out."""

from __future__ import annotations

import socket
import struct

import structlog

from kcoord.broker.server import WarningLimiter


class ManualClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_one_line_per_host_and_reason_per_window_with_counts():
    clock = ManualClock()
    limiter = WarningLimiter(window_s=10, clock=clock)
    with structlog.testing.capture_logs() as logs:
        for port in range(100):
            limiter.warn("request.undecodable", f"10.0.0.1:{port}", api="Metadata")
        limiter.warn("request.unknown_api_key", "10.0.0.1:5")  # another reason
        limiter.warn("request.undecodable", "10.0.0.2:5")  # another host
        clock.now = 10.0
        limiter.warn("request.undecodable", "10.0.0.1:7", api="Metadata")
    lines = [(e["event"], e["peer"], e.get("suppressed")) for e in logs]
    assert lines == [
        ("request.undecodable", "10.0.0.1:0", None),
        ("request.unknown_api_key", "10.0.0.1:5", None),
        ("request.undecodable", "10.0.0.2:5", None),
        ("request.undecodable", "10.0.0.1:7", 99),
    ]


def test_the_limiter_remembers_a_bounded_number_of_keys():
    limiter = WarningLimiter(max_keys=3, clock=ManualClock())
    with structlog.testing.capture_logs() as logs:
        for host in range(10):
            limiter.warn("request.undecodable", f"10.0.1.{host}:1")
        limiter.warn("request.undecodable", "10.0.1.0:1")  # forgotten: logged again
    assert len(logs) == 11 and len(limiter._seen) == 3


def test_a_burst_of_bad_connections_logs_one_line(make_broker):
    node = make_broker()
    with structlog.testing.capture_logs() as logs:
        for _ in range(50):
            with socket.create_connection(("127.0.0.1", node.port)) as sock:
                sock.sendall(struct.pack(">i", -5))
                sock.settimeout(5)
                assert sock.recv(10) == b""  # closed by the broker
    rejected = [e for e in logs if e["event"] == "connection.frame_size_rejected"]
    assert len(rejected) == 1


def test_each_unknown_api_key_and_version_a_client_sends_is_named(make_broker):
    """A client that finds an API missing tries the next one: every key and
    version it was refused is in the log, with its client id, not only the
    first (the same one again within the window is counted, not repeated)."""
    node = make_broker()

    def send(api_key: int, version: int) -> None:
        header = struct.pack(">hhih", api_key, version, 1, 4) + b"sara"
        with socket.create_connection(("127.0.0.1", node.port)) as sock:
            sock.sendall(struct.pack(">i", len(header)) + header)
            sock.settimeout(5)
            assert sock.recv(10) == b""  # closed by the broker

    with structlog.testing.capture_logs() as logs:
        for key, version in ((999, 0), (998, 1), (999, 0), (3, 99), (3, 98)):
            send(key, version)
    named = [(e["event"], e["api_key"], e["api_version"], e["client_id"]) for e in logs
             if e["event"] in ("request.unknown_api_key", "request.unsupported_version")]
    assert named == [("request.unknown_api_key", 999, 0, "sara"),
                     ("request.unknown_api_key", 998, 1, "sara"),
                     ("request.unsupported_version", 3, 99, "sara"),
                     ("request.unsupported_version", 3, 98, "sara")]
