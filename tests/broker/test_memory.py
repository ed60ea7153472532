"""``broker.memory``: buffers of a megabyte, freed and allocated again, reuse
memory instead of having the kernel fault in and zero new pages each time; full
garbage collections run when the broker is idle (or long overdue), not in the
middle of serving clients."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kcoord.broker.memory import keep_freed_memory

CHILD = r"""
import collections, sys
from kcoord.broker.memory import keep_freed_memory
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


# -- full garbage collections -----------------------------------------------------------


class FakeGC:
    """What ``FullCollections`` asks of the ``gc`` module, with counts set by hand."""

    def __init__(self, oldest: int):
        self.oldest = oldest  # objects in the oldest generation
        self.younger = 0  # middle-generation collections since the last full one
        self.threshold = (700, 10, 10)
        self.full = 0
        self.counted = 0

    def get_objects(self, generation):
        assert generation == 2
        self.counted += 1
        return [None] * self.oldest

    def get_count(self):
        return (0, 0, self.younger)

    def collect(self):
        self.full += 1
        self.younger = 0
        freed = self.oldest // 2  # half of it was garbage
        self.oldest -= freed
        return freed

    def get_threshold(self):
        return self.threshold

    def set_threshold(self, *values):
        self.threshold = tuple(values)


def _policy(oldest=1000, installed=True):
    from kcoord.broker.memory import FullCollections
    clock = {"now": 100.0, "active": 100.0, "busy": False}
    fake = FakeGC(oldest)
    policy = FullCollections(lambda: clock["active"], busy=lambda: clock["busy"],
                             clock=lambda: clock["now"], collector=fake)
    policy.installed = installed  # as ``install`` leaves it (without touching the process)
    return policy, fake, clock


# From Python 3.14 on, CPython collects incrementally and the broker leaves it alone.
INCREMENTAL = sys.version_info >= (3, 14)


def test_a_due_full_collection_waits_for_a_moment_without_requests():
    from kcoord.broker.memory import IDLE_S, YOUNGER_COLLECTIONS
    policy, fake, clock = _policy()
    fake.oldest = 1300  # 30% more objects in the oldest generation: due by CPython's rule
    fake.younger = YOUNGER_COLLECTIONS  # ...but not yet by its count of younger collections
    clock["now"] += 5
    assert not policy.check() and fake.full == 0
    fake.younger += 1
    clock["active"] = clock["now"] - IDLE_S / 2  # a request just arrived
    assert not policy.check() and fake.full == 0 and fake.counted == 1
    clock["now"] += IDLE_S  # nothing arrived since
    assert policy.check()
    assert fake.full == 1 and policy.survivors == 650 and policy.collections == 1
    assert not policy.check()  # done: nothing due until younger collections pile up again


def test_a_broker_never_idle_still_collects_once_the_collection_is_long_due():
    from kcoord.broker.memory import MAX_DEFER_S
    policy, fake, clock = _policy()
    fake.oldest, fake.younger = 2000, 50
    became_due = clock["now"]
    while clock["now"] < became_due + MAX_DEFER_S - 1:
        clock["active"] = clock["now"]  # requests all the time
        assert not policy.check()
        clock["now"] += 1
    assert fake.full == 0 and fake.counted == 1  # never walked while it waited
    clock["now"] = clock["active"] = became_due + MAX_DEFER_S
    assert policy.check() and fake.full == 1


def test_growth_under_a_quarter_is_not_collected_nor_counted_again_at_once():
    from kcoord.broker.memory import YOUNGER_COLLECTIONS
    policy, fake, clock = _policy()
    fake.oldest, fake.younger = 1200, YOUNGER_COLLECTIONS + 1  # 20% more: not due
    clock["now"] += 10  # idle
    assert not policy.check() and fake.counted == 2  # at start, and now
    fake.younger += YOUNGER_COLLECTIONS
    assert not policy.check() and fake.counted == 2  # not walked again so soon
    fake.younger += 1
    fake.oldest = 1250
    assert policy.check() and fake.full == 1 and fake.counted == 3


def test_a_connection_still_serving_a_request_is_not_paused():
    policy, fake, clock = _policy()
    fake.oldest, fake.younger = 2000, 50
    clock["now"] += 5  # nothing received for seconds...
    clock["busy"] = True  # ...but a pipelined backlog or a large request is being served
    assert not policy.check() and fake.full == 0
    clock["busy"] = False
    assert policy.check() and fake.full == 1


def test_a_full_collection_run_elsewhere_becomes_the_new_starting_point():
    from kcoord.broker.memory import YOUNGER_COLLECTIONS
    policy, fake, clock = _policy()
    fake.younger = YOUNGER_COLLECTIONS - 2
    assert not policy.check()
    fake.oldest, fake.younger = 5000, 0  # someone called gc.collect(): 5000 survived it
    assert not policy.check()
    fake.younger = YOUNGER_COLLECTIONS + 1
    clock["now"] += 5
    assert not policy.check() and fake.full == 0  # 5000 is where it starts, not growth
    assert policy.survivors == 5000
    fake.younger += YOUNGER_COLLECTIONS + 1
    fake.oldest = 6500
    assert policy.check() and fake.full == 1


def test_the_oldest_generation_is_left_to_the_broker_while_one_runs():
    policy, fake, _clock = _policy(installed=False)
    assert not policy.check()  # not installed: CPython collects as usual
    policy.install()
    if INCREMENTAL:
        assert fake.threshold == (700, 10, 10) and not policy.installed
        return
    assert fake.threshold[:2] == (700, 10) and fake.threshold[2] >= 1 << 30
    other, *_ = _policy(installed=False)  # a second broker of the process (as in tests)
    other.gc = fake
    other.install()
    try:
        assert fake.threshold[:2] == (700, 10) and fake.threshold[2] >= 1 << 30
        other.uninstall()
        assert fake.threshold[2] >= 1 << 30  # the first still runs
    finally:
        policy.uninstall()
    assert fake.threshold == (700, 10, 10)
    policy.uninstall()  # once only
    other.uninstall()
    assert fake.threshold == (700, 10, 10)


def test_a_running_broker_frees_garbage_in_cycles_itself_when_idle(make_broker):
    import gc
    import time
    import weakref

    from kcoord.protocol.client import WireClient

    assert make_broker().broker.collections is None  # embedded: the collector left alone
    # As ``kcoord serve`` runs it, the process its own:
    node = make_broker(own_process=True)
    if INCREMENTAL:
        assert gc.get_threshold()[2] < 1 << 30 and not node.broker.collections.installed
        return
    assert gc.get_threshold()[2] >= 1 << 30  # CPython runs no full collection on its own
    before = node.broker.last_activity
    with WireClient.to(f"127.0.0.1:{node.broker.port}") as client:
        client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert node.broker.last_activity > before  # a request received counts as activity
    node.broker.last_activity = time.monotonic() + 3600  # no collection while this is set up

    class Node:
        pass

    # Cycles that reach the oldest generation while referenced, then become
    # garbage there: only a full collection frees them.
    cycles = []
    for _ in range(max(node.broker.collections.survivors // 2, 10_000)):
        a, b = Node(), Node()
        a.other, b.other = b, a
        cycles.append(a)
    probe = weakref.ref(cycles[0])
    gc.collect(0)
    for _ in range(12):
        gc.collect(1)  # promoted, and counted as younger collections
    del cycles, a, b
    node.broker.last_activity = 0.0  # idle from now on
    deadline = time.monotonic() + 15
    while (probe() is not None or not node.broker.collections.collections) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert probe() is None  # freed by the broker's own full collection
    assert node.broker.collections.collections >= 1
    node.stop()
    assert gc.get_threshold()[2] < 1 << 30  # given back once the broker stopped


def test_kcoord_serve_shortens_the_interpreter_switch_interval(make_broker):
    """Work in worker threads (replaying __consumer_offsets, compaction) holds the
    interpreter lock for up to the switch interval whenever the event loop wants
    it: ``kcoord serve`` shortens it from CPython's 5 ms and gives it back on
    stop; an embedded broker leaves it alone."""
    import sys

    from kcoord.broker.app import SWITCH_INTERVAL_S

    default = sys.getswitchinterval()
    assert default != SWITCH_INTERVAL_S
    embedded = make_broker()
    assert sys.getswitchinterval() == default
    embedded.stop()
    node = make_broker(own_process=True)
    assert sys.getswitchinterval() == SWITCH_INTERVAL_S
    node.stop()
    assert sys.getswitchinterval() == default
