"""Live fuzzing: mutated requests for every served API and version, sent to a
running broker over loopback.

Each frame goes on a connection of its own, which the client then half-closes:
the broker must answer or close it, never hang, never crash, and never log an
error or a traceback (a handler that fails on some input is a bug, however the
connection ends).  Between frames a separate connection checks that the broker
still answers ApiVersions.

``make test`` runs a fixed sequence of ``KCOORD_FUZZ_EXAMPLES`` (default 1500)
frames after replaying the corpus (``tests/fuzz/corpus``) and every seed;
``make fuzz`` runs a longer, random campaign.
"""

from __future__ import annotations

import os
import socket
import struct

import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.broker.healthcheck import recv_exact
from kcoord.protocol.headers import frame_request
from kcoord.protocol.messages.api_versions import API_VERSIONS
from tests.fuzz import frames

EXAMPLES = int(os.environ.get("KCOORD_FUZZ_EXAMPLES", "1500"))
RANDOM = os.environ.get("KCOORD_FUZZ_RANDOM") == "1"
KINDS = ("flip", "set", "text", "text", "insert", "delete", "truncate", "int16", "int32")


def _send(port: int, frame: bytes) -> None:
    """Send one frame, half-close, read until the broker closes (bounded)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(frame)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except (ConnectionResetError, BrokenPipeError):
            pass  # closed by the broker: fine


class Health:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0

    def check(self) -> None:
        self.correlation += 1
        self.sock.sendall(frame_request(API_VERSIONS, 0, self.correlation, "health", {}))
        (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
        body = recv_exact(self.sock, size)
        assert struct.unpack_from(">ih", body) == (self.correlation, 0)


def _answer(port: int, frame: bytes) -> int:
    """Send one frame; the correlation id of the answer (raises if the broker closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(frame)
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        return struct.unpack(">i", recv_exact(sock, size)[:4])[0]


def test_extreme_group_requests_are_answered(make_broker):
    """A JoinGroup of 3,000 protocols, ids of 32767 bytes (a member id made from
    one would not fit an answer) and ids that are not valid UTF-8 each get an
    answer, as Kafka gives, for every version: no closed connection, no
    traceback."""
    node = make_broker()
    extremes = frames.seeds(extremes_only=True)
    assert {key for key, _v, _f in extremes} == {8, 10, 11, 15, 42}
    with structlog.testing.capture_logs() as logs:
        for key, version, frame in extremes:
            assert _answer(node.port, frame) == 1, (key, version)
    assert _broken(logs) == []


def _broken(entries) -> list:
    return [e for e in entries if e.get("log_level") in ("error", "critical")
            or "exc_info" in e or "exception" in e]


def test_the_broker_survives_mutated_requests(make_broker):
    # with the consumer group protocol on, so that its requests reach the coordinator
    node = make_broker(overrides={"group.coordinator.rebalance.protocols": "classic,consumer"})
    seeds = frames.seeds()
    assert {key for key, _v, _f in seeds} >= {3, 18, 19, 20, 32, 60, 8, 9, 10, 11, 12, 13, 14,
                                              15, 16, 42, 47, 68, 69}
    health = Health(node.port)

    def serve(frame: bytes, logs: list) -> None:
        seen = len(logs)
        try:
            _send(node.port, frame)
            health.check()
        finally:
            broken = _broken(logs[seen:])
        if broken:
            saved = frames.save(frame)  # keep it: it replays first from now on
            raise AssertionError(f"frame saved as {saved}: {broken[:2]}")

    with structlog.testing.capture_logs() as logs:

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.data())
        def one_frame(data):
            _key, _version, frame = data.draw(st.sampled_from(seeds), label="seed")
            ops = data.draw(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 1 << 16),
                                               st.integers(0, 1 << 32)), min_size=1, max_size=4),
                            label="mutations")
            if data.draw(st.booleans(), label="resize"):
                ops.append(("resize", 0, 0))
            serve(frames.mutate(frame, ops), logs)

        for frame in frames.corpus() + [f for _k, _v, f in seeds]:
            serve(frame, logs)
        one_frame()
    health.sock.close()
