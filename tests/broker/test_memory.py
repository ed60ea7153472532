"""``broker.memory``: buffers of a megabyte, freed and allocated again, reuse
memory instead of having the kernel fault in and zero new pages each time."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from broker.memory import keep_freed_memory

CHILD = r"""
import collections, sys
from broker.memory import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def minor_faults():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])
# As a busy connection does: a few frames of about a megabyte alive at a time,
# of slightly different sizes, and one more per request.
alive = collections.deque()
for i in range(50):  # warm up
    alive.append(bytearray(1_000_000 + (i % 7) * 4096))
    if len(alive) > 4: alive.popleft()
before = minor_faults()
for i in range(300):
    alive.append(bytearray(1_000_000 + (i % 7) * 4096))
    if len(alive) > 4: alive.popleft()
print((minor_faults() - before) / 300)
"""


def _faults_per_mb(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                             os.path.abspath(__file__)))))
    return float(out.stdout)


def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError, AttributeError):
        return False


@pytest.mark.skipif(not _glibc() or not os.path.exists("/proc/self/stat"),
                    reason="glibc's allocator, counted through /proc")
def test_megabyte_buffers_reuse_freed_memory():
    assert keep_freed_memory()
    # A fresh megabyte is 245 pages, each faulted in; kept memory faults none.
    assert _faults_per_mb("keep") < 10
    assert keep_freed_memory()  # once per process; asking again is harmless
