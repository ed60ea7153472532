"""kcoord as a test fixture: how soon a test can use a broker, and what one costs.

* From entering ``EmbeddedBroker`` to the first acknowledged produce (a topic
  created, one record produced with acks=all): in this process (after a first
  broker, which pays the imports) and as a ``kcoord serve`` child process
  (after a first, which starts the launcher that the others are forked from,
  ``broker.launcher``); median of several (goals, issue #25: under 100 ms
  in-process, under 300 ms as a child process).  A child is also timed as a
  fresh interpreter (``KCOORD_EMBEDDED_FORK=0``), which every start pays where
  no launcher can fork.
* Memory of one in-process broker: the resident set of a fresh interpreter
  before and after starting one and producing to it, the imports counted
  apart (goal: under 25 MiB per broker).
* A suite of 100 tests (10 in quick mode), each creating a topic and producing
  to it, run by pytest with the plugin alone: every test with a fresh broker
  (``kcoord_factory``) next to every test sharing the session's (``kcoord``).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUICK = os.environ.get("KCOORD_BENCH_QUICK") == "1"
REPEATS = 3 if QUICK else 10
SUITE_TESTS = 10 if QUICK else 100


def _first_produce_ms(process: bool) -> float:
    from kcoord.broker.embedded import EmbeddedBroker
    from kcoord.broker.testing import Kcoord

    began = time.perf_counter()
    with EmbeddedBroker(process=process) as broker, Kcoord(broker.bootstrap) as kafka:
        kafka.produce(kafka.create_topic("first"), [b"x"])
        return (time.perf_counter() - began) * 1000


_MEMORY = """
import os, sys
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
bare = rss()
from kcoord.broker.embedded import EmbeddedBroker
from kcoord.broker.testing import Kcoord
import kcoord.broker.app, kcoord.broker.apis as apis
apis.load_handlers()
imported = rss()
with EmbeddedBroker() as b, Kcoord(b.bootstrap) as k:
    k.produce(k.create_topic("m"), [b"x"] * 100)
    print(imported - bare, rss() - imported)
"""


def _memory() -> tuple[float, float]:
    """MiB of the imports, MiB of one started broker."""
    out = subprocess.run([sys.executable, "-c", _MEMORY], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).resolve().parent.parent, check=True)
    imports, broker = (int(v) / 2**20 for v in out.stdout.split())
    return imports, broker


_SUITE = """
import pytest

@pytest.mark.parametrize("n", range({tests}))
def test_one(n, {fixture}):
    kafka = {make}
    topic = kafka.create_topic("t")
    assert kafka.produce(topic, [b"x"]) == [0]
"""


def _suite_seconds(fresh: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-suite-") as where:
        where = Path(where)
        (where / "pytest.ini").write_text("[pytest]\n")
        (where / "test_suite.py").write_text(_SUITE.format(
            tests=SUITE_TESTS, fixture="kcoord_factory" if fresh else "kcoord",
            make="kcoord_factory()" if fresh else "kcoord"))
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-c", "pytest.ini", "--confcutdir", "."], cwd=where,
                              capture_output=True, text=True, timeout=600)
        seconds = time.perf_counter() - began
        if done.returncode != 0:
            raise RuntimeError(done.stdout[-2000:] + done.stderr[-2000:])
        return seconds


def _compile_bytecode() -> None:
    """Every kcoord module's bytecode compiled, as pip compiles it when it installs
    the wheel: otherwise an editable install under PYTHONDONTWRITEBYTECODE (set in
    some CI images) compiles kcoord's sources again in every child process, about
    200 ms of a start."""
    import compileall
    import importlib

    for name in ("broker", "protocol", "storage", "pipeline"):
        package = importlib.import_module(f"kcoord.{name}")
        compileall.compile_dir(os.path.dirname(package.__file__), quiet=1)


def run() -> None:
    print("kcoord as a test fixture (EmbeddedBroker, the pytest plugin; bytecode compiled, "
          "as pip installs it)")
    _compile_bytecode()
    cold = _first_produce_ms(process=False)
    warm = statistics.median(_first_produce_ms(process=False) for _ in range(REPEATS))
    first_child = _first_produce_ms(process=True)
    child = statistics.median(_first_produce_ms(process=True) for _ in range(REPEATS))
    os.environ["KCOORD_EMBEDDED_FORK"] = "0"
    try:
        fresh = statistics.median(_first_produce_ms(process=True) for _ in range(REPEATS))
    finally:
        del os.environ["KCOORD_EMBEDDED_FORK"]
    print(f"  to the first acknowledged produce: in-process {warm:.0f} ms (goal: under 100; "
          f"the first in a process, imports included, {cold:.0f} ms), as a child process "
          f"{child:.0f} ms (goal: under 300; the first, which starts the launcher, "
          f"{first_child:.0f} ms; a fresh interpreter each time {fresh:.0f} ms)")
    imports, broker = _memory()
    print(f"  memory of one in-process broker: {broker:.1f} MiB (goal: under 25), "
          f"its imports {imports:.1f} MiB once per process")
    fresh, shared = _suite_seconds(fresh=True), _suite_seconds(fresh=False)
    print(f"  a suite of {SUITE_TESTS} tests, each creating a topic and producing: "
          f"{fresh:.1f} s with a fresh broker per test, {shared:.1f} s sharing the "
          f"session's ({fresh / shared:.1f}x)")
    print()
