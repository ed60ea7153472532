"""Child process of the SIGKILL campaign: works a data dir through the log manager
and reports every acknowledged append.

Usage: python crash_child.py <data dir> <seed> <policy of round>

Three partitions, one per cleanup policy (``c-0`` compact, ``d-0`` delete with
a small ``retention.bytes``, ``x-0`` compact,delete), small segments.  The
partitions' configs for this round are the given policy for every log (so a
log written as compact is reopened under delete and back: the campaign reopens
under each policy).  The child appends keyed records at random, and now and
then compacts, runs retention, writes the checkpoints, rolls, or closes the log
manager cleanly and opens it again (clean-shutdown marker, checkpoints).

After an append returns it prints ``<partition> <offset> <key> <value>`` and
flushes: that line is the acknowledgement.  Default fsync policy (``never``):
the bytes are with the OS, which survives the SIGKILL.
"""

import random
import sys

import structlog

from kcoord.protocol.records import Record, build_batch
from kcoord.storage import LogConfig
from kcoord.storage.manager import LogManager

PARTITIONS = ("c", "d", "x")


def config(policy: str) -> LogConfig:
    return LogConfig(segment_bytes=2_000, cleanup_policy=policy, min_cleanable_dirty_ratio=0.0,
                     retention_ms=-1, retention_bytes=6_000, index_interval_bytes=300)


def main() -> None:
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    data_dir, seed, policy = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed)
    cfg = config(policy)
    out = sys.stdout

    def open_manager():
        manager = LogManager(data_dir, cfg, clock=lambda: 2_000_000)
        manager.open_all()
        return manager, {t: manager.get_or_create(t, 0) for t in PARTITIONS}

    manager, logs = open_manager()
    n = 0
    while True:
        topic = rng.choice(PARTITIONS)
        plog = logs[topic]
        count = rng.choice((1, 1, 2, 5))
        first = plog.log_end_offset
        records = []
        for i in range(count):
            key = f"k{rng.randrange(23)}"
            records.append(Record(None, 1_000_000 + n, key.encode(), f"{topic}{first + i}".encode()
                                  + b"." * rng.randrange(80)))
        info = plog.append(build_batch(records))
        for i, record in enumerate(records):
            out.write(f"{topic} {info.first_offset + i} {record.key.decode()} "
                      f"{record.value.decode()}\n")
        out.flush()
        n += 1
        roll = rng.random()
        if roll < 0.04:
            manager.run_cleaner(2_000_000)
        elif roll < 0.08:
            manager.run_retention(2_000_000)
        elif roll < 0.11:
            manager.write_checkpoints()
        elif roll < 0.13:
            plog.roll()
        elif roll < 0.14:
            manager.close()
            manager, logs = open_manager()


if __name__ == "__main__":
    main()
