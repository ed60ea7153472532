"""Running out of file descriptors (each partition held several for its whole
life) could leave a half-made topic, or a broker unable to answer or to stop.
Now an empty partition holds no descriptor (segment and index files open on
first use), and a create that hits the limit fails cleanly and quickly: the
topic is not kept, its folders are removed, the broker keeps answering and
stops normally."""

from __future__ import annotations

import os
import re
import resource
import socket
import time

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.client import WireClient
from tests.support import BrokerProcess


def _create(client, name, partitions):
    return client.call(19, 4, {"topics": [{"name": name, "num_partitions": partitions,
                                           "replication_factor": 1, "assignments": [],
                                           "configs": []}],
                               "timeout_ms": 5000, "validate_only": False})["topics"][0]


def test_idle_partitions_hold_no_descriptors(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        client = WireClient("127.0.0.1", broker.port)
        before = len(os.listdir(f"/proc/{broker.proc.pid}/fd"))
        assert _create(client, "wide", 300)["error_code"] == ErrorCode.NONE
        after = len(os.listdir(f"/proc/{broker.proc.pid}/fd"))
        assert after - before < 10
        client.close()
    finally:
        assert broker.terminate() == 0


def test_a_create_at_the_descriptor_limit_fails_cleanly(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    extra = []
    try:
        client = WireClient("127.0.0.1", broker.port)
        pid = broker.proc.pid
        used = len(os.listdir(f"/proc/{pid}/fd"))
        _soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (used + 2, hard))
        for _ in range(6):  # take every descriptor left (accepts beyond the limit fail)
            extra.append(socket.create_connection(("127.0.0.1", broker.port), timeout=5))
        time.sleep(0.5)
        began = time.monotonic()
        answer = _create(client, "starved", 4)
        assert time.monotonic() - began < 5
        assert answer["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
        assert "Too many open files" in answer["error_message"]
        for sock in extra:
            sock.close()
        extra.clear()
        time.sleep(0.3)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (hard, hard))
        assert client.call(18, 0, {})["error_code"] == ErrorCode.NONE
        meta = client.call(3, 1, {"topics": None})
        assert "starved" not in [t["name"] for t in meta["topics"]]
        # No partition folder is kept; a removal that needed a descriptor is retried.
        assert not any(re.fullmatch(r"starved-\d+", n) for n in os.listdir(tmp_path / "data"))
        fresh = WireClient("127.0.0.1", broker.port)
        assert _create(fresh, "fed", 4)["error_code"] == ErrorCode.NONE
        fresh.close()
        client.close()
    finally:
        for sock in extra:
            sock.close()
        assert broker.terminate() == 0


def test_a_removal_that_failed_is_retried(tmp_path, monkeypatch):
    import shutil

    from kcoord.storage.manager import LogManager

    manager = LogManager(str(tmp_path))
    manager.create_partitions("gone", 2, "AAAAAAAAAAAAAAAAAAAAAA")
    real = shutil.rmtree
    monkeypatch.setattr(shutil, "rmtree", lambda *a, **k: None)  # EMFILE while removing
    manager.remove_partitions([], [("gone", 0), ("gone", 1)])
    assert len(manager.pending_removals) == 2
    monkeypatch.setattr(shutil, "rmtree", real)
    assert manager.remove_leftover_dirs() == 2
    assert not manager.pending_removals and os.listdir(tmp_path) == []
