"""``python -m benchmarks`` (``make bench``): run every benchmark and print its figures.

    python -m benchmarks              # all of them
    python -m benchmarks server codec # some of them, by name

Benchmarks print figures, not pass/fail.  ``KCOORD_BENCH_QUICK=1`` shortens
every measurement (for a smoke test; the figures are then rough).  A benchmark
that raises is reported and the others still run; the exit status is then 1.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import time
import traceback

# name -> module; each module has a run() that prints its figures.
BENCHMARKS = {
    "codec": "benchmarks.bench_codec",
    "server": "benchmarks.bench_server",
    "storage": "benchmarks.bench_storage",
    "topics": "benchmarks.bench_topics",
    "data": "benchmarks.bench_data",
    "groups": "benchmarks.bench_groups",
    "fixture": "benchmarks.bench_fixture",
    "kafka": "benchmarks.bench_kafka",
    "consumer": "benchmarks.bench_consumer_groups",
    "transactions": "benchmarks.bench_transactions",
    "security": "benchmarks.bench_security",
    "pipeline": "benchmarks.bench_pipeline",
}


def _load(module_name: str):
    """The module's ``run``, or None (with a note) when the benchmark is not there yet."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise  # the benchmark exists but something it imports is missing
        print(f"({module_name} is not there yet: skipped)\n")
        return None
    run = getattr(module, "run", None)
    if not callable(run):
        print(f"({module_name} has no run(): skipped)\n")
        return None
    return run


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}",
              file=sys.stderr)
        return 2
    quick = os.environ.get("KCOORD_BENCH_QUICK") == "1"
    print(f"kcoord benchmarks: Python {platform.python_version()} "
          f"({platform.python_implementation()}), {platform.machine()}, "
          f"{os.cpu_count()} CPUs{', QUICK mode (rough figures)' if quick else ''}\n")
    failed = []
    began = time.monotonic()
    for name in names:
        module_name = BENCHMARKS[name]
        try:
            run = _load(module_name)
            if run is not None:
                run()
        except Exception:
            failed.append(name)
            print(f"{name}: FAILED to run", flush=True)
            traceback.print_exc()
            print()
        sys.stdout.flush()
    print(f"benchmarks done in {time.monotonic() - began:.1f} s"
          + (f"; failed to run: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
