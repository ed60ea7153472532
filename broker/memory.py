"""Memory without pauses: large buffers without page faults, and Python's full
garbage collections moved to moments when no client waits.

Large buffers: the C allocator is told to keep freed memory.

A broker allocates and frees buffers of a megabyte or more all the time (a
produce request's frame, a fetch answer).  glibc's malloc serves such sizes
with ``mmap`` (or grows the heap) and gives the memory back to the kernel as
soon as it is freed (``munmap``, or a heap trim once more than twice the last
such size is free at its top), so the next buffer is new memory again: every
page of it is faulted in and zeroed by the kernel before the first byte is
copied.  Measured here: 300-400 us to fill a fresh 1 MB buffer, 15 us for one
that malloc kept.  That was most of a broker's CPU time for 10 KiB messages.

``keep_freed_memory`` makes malloc serve buffers up to ``MMAP_THRESHOLD`` from
its heap and keep up to ``TRIM_THRESHOLD`` of freed memory at the top of it for
reuse (what a JVM's heap does anyway).  glibc only; elsewhere it does nothing.

Full collections: CPython's cyclic garbage collector examines every live
container object in a full (oldest generation) collection, holding the
interpreter lock all along: the event loop serves no one meanwhile.  A broker's
live objects grow with its partitions, and so does that pause: measured here,
about 60 ms at 10,000 topics.  ``FullCollections`` takes the oldest generation
out of CPython's automatic collections (the young ones stay as they are) and
runs a full collection itself when one is due by CPython's own rule, at a
moment when no connection has received anything for ``IDLE_S`` and none is
serving a request; on a broker
that is never idle, once it has been due for ``MAX_DEFER_S``, so that garbage
in cycles is still freed.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
import time
from typing import Callable

# mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 8 << 20
TRIM_THRESHOLD = 64 << 20

_done = False


def keep_freed_memory() -> bool:
    """Set the thresholds once per process; True if the allocator took them."""
    global _done
    if _done:
        return True
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
    except (ValueError, OSError, AttributeError):  # not glibc
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    _done = bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    return _done


# -- full garbage collections ---------------------------------------------------------

IDLE_S = 0.1  # no byte received by any connection for this long: a moment to collect
CHECK_S = 0.5  # how often the broker asks ``FullCollections.check``
MAX_DEFER_S = 60.0  # a collection due this long runs even while clients are served
# CPython's rule for a full collection: more than this many collections of the
# middle generation since the last full one (its default threshold), and the
# objects promoted to the oldest generation since then at least a quarter of
# those that survived the last full collection.
YOUNGER_COLLECTIONS = 10
_NEVER = 1 << 30

_installed = 0
_thresholds: tuple[int, int, int] | None = None
_install_lock = threading.Lock()


class FullCollections:
    """When to run a full collection (``check``), and the switch that stops
    CPython from running them on its own (``install``/``uninstall``).

    ``last_activity()`` is when a connection last received bytes, ``busy()``
    whether one is still serving a request."""

    def __init__(self, last_activity: Callable[[], float],
                 busy: Callable[[], bool] = lambda: False,
                 clock: Callable[[], float] = time.monotonic, collector=gc):
        self.last_activity = last_activity
        self.busy = busy
        self.clock = clock
        self.gc = collector
        self.survivors: int | None = len(collector.get_objects(generation=2))
        self.due_since: float | None = None
        self._recount_at = YOUNGER_COLLECTIONS  # middle-generation collections
        self._younger = 0
        self.collections = 0
        self.installed = False

    def install(self) -> None:
        """Stop CPython's own full collections (while any broker of the process runs).
        From Python 3.14 on, whose collector works incrementally, nothing changes."""
        global _installed, _thresholds
        if sys.version_info >= (3, 14):
            return
        with _install_lock:
            if _installed == 0:
                _thresholds = self.gc.get_threshold()
                self.gc.set_threshold(_thresholds[0], _thresholds[1], _NEVER)
            _installed += 1
            self.installed = True

    def uninstall(self) -> None:
        global _installed
        with _install_lock:
            if not self.installed:
                return
            self.installed = False
            _installed -= 1
            if _installed == 0 and _thresholds is not None:
                self.gc.set_threshold(*_thresholds)

    def check(self) -> bool:
        """Run a full collection if one is due and the moment suits; True if it ran."""
        if not self.installed:
            return False
        younger = self.gc.get_count()[2]
        if younger < self._younger:
            # A full collection ran elsewhere (``gc.collect()``): start over from it.
            self.survivors, self._recount_at, self.due_since = None, YOUNGER_COLLECTIONS, None
        self._younger = younger
        if younger <= self._recount_at:
            return False
        now = self.clock()
        if self.due_since is None:
            self.due_since = now
        idle = now - self.last_activity() >= IDLE_S and not self.busy()
        if not idle and now - self.due_since < MAX_DEFER_S:
            return False
        # Counting the oldest generation walks it (a few ms at 10,000 topics):
        # done only now, and again only after as many younger collections more.
        oldest = len(self.gc.get_objects(generation=2))
        if self.survivors is None:
            self.survivors = oldest
        if (oldest - self.survivors) * 4 < self.survivors:
            self._recount_at = younger + YOUNGER_COLLECTIONS
            self.due_since = None
            return False
        freed = self.gc.collect()
        self.survivors = max(oldest - freed, 0)
        self._recount_at = YOUNGER_COLLECTIONS
        self._younger = 0
        self.due_since = None
        self.collections += 1
        return True
