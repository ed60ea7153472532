"""SIGKILL crash test: every acknowledged record survives, also through compaction.

This is the one storage test that waits on the wall clock: the child must be
killed at random moments.  Each round is bounded (kill within 0.2-0.9 s).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

from storage import LogConfig, PartitionLog
from tests.storage.helpers import all_records

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_child.py")
CONFIG = LogConfig(segment_bytes=8_000, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)


def _run_and_kill(path: str, rng: random.Random) -> list[tuple[int, str, str]]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    child = subprocess.Popen(
        [sys.executable, CHILD, path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    try:
        deadline = time.monotonic() + 10
        # Wait for the first acknowledgement so the kill lands while appending.
        first = child.stdout.readline()
        assert first, "child died before acknowledging anything"
        assert time.monotonic() < deadline
        time.sleep(rng.uniform(0.2, 0.9))
        os.kill(child.pid, signal.SIGKILL)
        rest = child.stdout.read()
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    acked = []
    for line in (first + rest).decode().splitlines():
        parts = line.split(" ")
        if len(parts) == 3:  # a line cut by the kill was never acknowledged
            acked.append((int(parts[0]), parts[1], parts[2]))
    return acked


def test_acknowledged_records_survive_sigkill(tmp_path):
    rng = random.Random(int(time.time()))
    path = str(tmp_path / "crash-0")
    acked: dict[int, tuple[str, str]] = {}
    for _round in range(4):
        for offset, key, value in _run_and_kill(path, rng):
            acked[offset] = (key, value)
        plog = PartitionLog(path, CONFIG)
        present = {o: (k.decode(), v.decode()) for o, _t, k, v in all_records(plog)}
        latest_offset_of_key: dict[str, int] = {}
        for o, (k, _v) in present.items():
            latest_offset_of_key[k] = max(o, latest_offset_of_key.get(k, -1))
        for offset, (key, value) in acked.items():
            if offset in present:
                assert present[offset] == (key, value)
            else:
                # Only compaction may drop an acknowledged record, and only for a newer one.
                assert latest_offset_of_key.get(key, -1) > offset, (offset, key)
        assert plog.log_end_offset > max(acked)
        plog.close()
    assert len(acked) > 50
