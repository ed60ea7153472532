"""Running out of file descriptors, and listening beyond loopback.

* The first commit after start looked up a text codec (UTF-16, for the
  group's partition) lazily: the lookup imports a module, which needs a
  descriptor, so with none free the commit failed with a traceback and its
  connection dropped.  Codecs the serving path needs are looked up at import.
* Failed accepts were not logged: uvloop (libuv) accepts the waiting
  connections and closes them at once when no descriptor is free, and says
  nothing; 187 of 300 clients hung with nothing in the log.  The broker now
  accepts itself: a failed accept is one rate-limited warning
  (``broker.accept_failed``), the waiting clients stay in the listen backlog
  and are served once descriptors are free, and open connections are served
  throughout.
* Listening on ``0.0.0.0`` now warns that every client that can reach the
  broker may delete topics and groups: there is no authentication yet."""

from __future__ import annotations

import os
import resource
import socket
import time

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.headers import frame_request
from kcoord.protocol.messages.api_versions import API_VERSIONS
from kcoord.protocol.client import WireClient
from tests.support import BrokerProcess


def _broken(events) -> list:
    return [e for e in events if e.get("level") in ("error", "critical") or "exception" in e]


def _starve(pid: int, spare: int = 2) -> int:
    """Lower the broker's descriptor limit to what it uses now plus ``spare``;
    returns the hard limit to restore."""
    used = len(os.listdir(f"/proc/{pid}/fd"))
    _soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (used + spare, hard))
    return hard


def test_the_first_commit_without_a_free_descriptor_is_answered(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        with WireClient.to(broker.bootstrap) as client:
            client.call(19, 4, {"topics": [{"name": "orders", "num_partitions": 1,
                                            "replication_factor": 1, "assignments": [],
                                            "configs": []}],
                                "timeout_ms": 5000, "validate_only": False})
            hard = _starve(broker.proc.pid, spare=0)
            try:
                answer = client.call(8, 2, {
                    "group_id": "starved", "generation_id_or_member_epoch": -1,
                    "member_id": "", "retention_time_ms": -1, "topics": [{"name": "orders",
                    "partitions": [{"partition_index": 0, "committed_offset": 1,
                                    "committed_metadata": ""}]}]})
            finally:
                resource.prlimit(broker.proc.pid, resource.RLIMIT_NOFILE, (hard, hard))
            # Its partition's folder could not be made: a retriable coordinator error.
            code = answer["topics"][0]["partitions"][0]["error_code"]
            assert code == E.NOT_COORDINATOR
            answer = client.call(8, 2, {
                "group_id": "starved", "generation_id_or_member_epoch": -1, "member_id": "",
                "retention_time_ms": -1, "topics": [{"name": "orders", "partitions": [
                    {"partition_index": 0, "committed_offset": 2, "committed_metadata": ""}]}]})
            assert answer["topics"][0]["partitions"][0]["error_code"] == E.NONE
    finally:
        assert broker.terminate() == 0
    assert _broken(broker.events) == []
    assert "groups.write_failed" in broker.event_names()


def _answered(sock: socket.socket) -> bool:
    sock.settimeout(10)
    sock.sendall(frame_request(API_VERSIONS, 0, 7, "late", {}))
    header = sock.recv(8)
    return len(header) == 8 and header[4:8] == (7).to_bytes(4, "big")


def test_failed_accepts_are_logged_and_the_waiting_clients_served_later(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    waiting = []
    try:
        with WireClient.to(broker.bootstrap) as client:
            hard = _starve(broker.proc.pid)
            for _ in range(10):
                waiting.append(socket.create_connection(("127.0.0.1", broker.port), timeout=5))
            time.sleep(1.5)  # the broker tries to accept them and runs out
            assert client.call(18, 0, {})["error_code"] == E.NONE  # open ones are served
            resource.prlimit(broker.proc.pid, resource.RLIMIT_NOFILE, (hard, hard))
            assert [_answered(sock) for sock in waiting] == [True] * 10
    finally:
        for sock in waiting:
            sock.close()
        assert broker.terminate() == 0
    failed = [e for e in broker.events if e.get("event") == "broker.accept_failed"]
    assert 1 <= len(failed) <= 2  # rate-limited: at most one line per 10 s
    assert failed[0]["level"] == "warning"
    assert failed[0]["errno"] == "EMFILE"
    assert "ulimit" in failed[0]["reason"]
    assert _broken(broker.events) == []


def test_listening_beyond_loopback_warns_that_there_is_no_authentication(tmp_path):
    exposed = BrokerProcess(tmp_path / "exposed", "--host", "0.0.0.0").start()
    try:
        with WireClient("127.0.0.1", exposed.port) as client:
            assert client.call(18, 0, {})["error_code"] == E.NONE
    finally:
        assert exposed.terminate() == 0
    warned = [e for e in exposed.events if e.get("event") == "broker.listening_beyond_loopback"]
    assert len(warned) == 1 and warned[0]["level"] == "warning"
    assert warned[0]["listening"] == [f"0.0.0.0:{exposed.port}"]
    assert "create and delete topics" in warned[0]["reason"]
    assert "no authentication" in warned[0]["reason"]

    local = BrokerProcess(tmp_path / "local", "--host", "127.0.0.1").start()
    assert local.terminate() == 0
    assert "broker.listening_beyond_loopback" not in local.event_names()

    # with an authorizer, an anonymous PLAINTEXT client is held to the ACLs: no warning
    guarded = BrokerProcess(tmp_path / "guarded", "--host", "0.0.0.0", "--override",
                            "authorizer.class.name="
                            "org.apache.kafka.metadata.authorizer.StandardAuthorizer").start()
    try:
        with WireClient("127.0.0.1", guarded.port) as client:
            assert client.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False}
                               )["topics"] == []
    finally:
        assert guarded.terminate() == 0
    assert "broker.listening_beyond_loopback" not in guarded.event_names()
