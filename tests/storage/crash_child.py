"""Child process of the crash test: appends keyed records forever and reports each acknowledgement.

Usage: python crash_child.py <partition dir>

Runs under the default fsync policy (``never``) with compaction on and small
segments, compacting every few appends so that a SIGKILL often lands in the
middle of a compaction.  After each append returns it writes
``<offset> <key> <value>`` to stdout and flushes: that line is the
acknowledgement.
"""

import sys

import structlog

from protocol.records import Record, build_batch
from storage import LogConfig, PartitionLog

CONFIG = LogConfig(segment_bytes=8_000, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)


def main() -> None:
    # stdout carries the acknowledgements only.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    plog = PartitionLog(sys.argv[1], CONFIG)
    out = sys.stdout
    n = plog.log_end_offset
    while True:
        key = b"k%d" % (n % 37)
        value = b"v%d-" % n + b"x" * 60
        info = plog.append(build_batch([Record(None, 1_000 + n, key, value)]))
        out.write(f"{info.first_offset} {key.decode()} {value.decode()}\n")
        out.flush()
        n += 1
        if n % 25 == 0:
            plog.compact(now_ms=2_000_000, force=True)


if __name__ == "__main__":
    main()
