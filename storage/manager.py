"""``LogManager``: every partition log under one data dir, and the dir-level files.

Like Kafka's LogManager it owns the checkpoint files of the log dir (text
format of CheckpointFile.java: version 0, entry count, ``<topic> <partition>
<offset>`` lines):

* ``recovery-point-offset-checkpoint``: offset up to which a log is known flushed;
* ``log-start-offset-checkpoint``: log start offsets moved by retention or DeleteRecords;
* ``cleaner-offset-checkpoint``: first dirty offset of each compacted log;

and the ``.kafka_cleanshutdown`` marker: written by ``close``, removed on open,
so that a log dir without it is recovered (every segment after the recovery
point is validated).
"""

from __future__ import annotations

import os
import re
from typing import Callable

import structlog

from storage.config import LogConfig
from storage.files import fsync_dir, write_atomically
from storage.log import PartitionLog, wall_clock_ms

log = structlog.get_logger("kcoord.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"

# "<topic>-<partition>"; Kafka's deleted ("...-delete") and future ("...-future")
# folders carry a suffix after the partition and are not logs.
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    m = _PARTITION_DIR.match(name)
    if not m:
        return None
    return m.group(1), int(m.group(2))


def read_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """Read a Kafka offset checkpoint file; a missing or malformed file reads as empty."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != 0:
            return {}
        count = int(lines[1])
        out = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        return out
    except (IndexError, ValueError):
        log.warning("checkpoint_unreadable", path=path)
        return {}


def write_checkpoint(path: str, entries: dict[tuple[str, int], int]) -> None:
    """Write a checkpoint atomically (temporary file, fsync, rename)."""
    body = [f"0\n{len(entries)}\n"]
    body += [f"{t} {p} {o}\n" for (t, p), o in sorted(entries.items())]
    write_atomically(path, "".join(body))


class LogManager:
    """Opens, creates and closes the partition logs of one data dir."""

    def __init__(
        self,
        data_dir: str,
        default_config: LogConfig | None = None,
        *,
        config_for: Callable[[str], LogConfig | None] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ):
        self.data_dir = data_dir
        self.default_config = default_config or LogConfig()
        self.config_for = config_for
        self.clock = clock
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        os.makedirs(data_dir, exist_ok=True)
        marker = os.path.join(data_dir, CLEAN_SHUTDOWN_FILE)
        self.clean_shutdown = os.path.exists(marker)
        self._recovery_points = read_checkpoint(os.path.join(data_dir, RECOVERY_POINT_FILE))
        self._log_starts = read_checkpoint(os.path.join(data_dir, LOG_START_FILE))
        self._cleaner_offsets = read_checkpoint(os.path.join(data_dir, CLEANER_FILE))

    def _config(self, topic: str) -> LogConfig:
        if self.config_for is not None:
            cfg = self.config_for(topic)
            if cfg is not None:
                return cfg
        return self.default_config

    def open_all(self) -> list[PartitionLog]:
        """Open every ``<topic>-<partition>`` folder; other files and folders are skipped."""
        opened = []
        for name in sorted(os.listdir(self.data_dir)):
            key = parse_partition_dir(name)
            if key is None or not os.path.isdir(os.path.join(self.data_dir, name)):
                continue
            opened.append(self._open(key))
        # The marker only vouches for the shutdown before this start.
        try:
            os.unlink(os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE))
        except FileNotFoundError:
            pass
        return opened

    def _open(self, key: tuple[str, int], config: LogConfig | None = None) -> PartitionLog:
        topic, partition = key
        plog = PartitionLog(
            os.path.join(self.data_dir, f"{topic}-{partition}"),
            config if config is not None else self._config(topic),
            recovery_point=self._recovery_points.get(key, 0),
            log_start_offset=self._log_starts.get(key),
            cleaner_offset=self._cleaner_offsets.get(key),
            clean_shutdown=self.clean_shutdown and key in self._recovery_points,
            clock=self.clock,
        )
        self.logs[key] = plog
        return plog

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The log of a partition, opening or creating its folder on first use."""
        key = (topic, partition)
        plog = self.logs.get(key)
        if plog is None:
            plog = self._open(key, config)
            fsync_dir(self.data_dir)
        return plog

    def delete(self, topic: str, partition: int) -> None:
        plog = self.logs.pop((topic, partition), None)
        if plog is not None:
            plog.delete()
        for table in (self._recovery_points, self._log_starts, self._cleaner_offsets):
            table.pop((topic, partition), None)
        # Kafka rewrites the checkpoints when a log goes: stale entries would be
        # applied to a partition of the same name created later.
        self.write_checkpoints()

    def run_retention(self, now_ms: int | None = None) -> int:
        """One retention pass over every log; returns the segments deleted."""
        now = self.clock() if now_ms is None else now_ms
        deleted = sum(plog.delete_old_segments(now) for plog in list(self.logs.values()))
        if deleted:
            self.write_checkpoints()
        return deleted

    def run_cleaner(self, now_ms: int | None = None) -> int:
        """Compact every log that needs it (synchronously); returns how many were cleaned."""
        now = self.clock() if now_ms is None else now_ms
        cleaned = 0
        for plog in list(self.logs.values()):
            if plog.config.compact and plog.compact(now) is not None:
                cleaned += 1
        if cleaned:
            self.write_checkpoints()
        return cleaned

    async def run_cleaner_async(self, now_ms: int | None = None) -> int:
        """Compact every log that needs it, each in a worker thread."""
        now = self.clock() if now_ms is None else now_ms
        cleaned = 0
        for plog in list(self.logs.values()):
            if plog.config.compact and await plog.compact_async(now) is not None:
                cleaned += 1
        if cleaned:
            self.write_checkpoints()
        return cleaned

    def write_checkpoints(self) -> None:
        for key, plog in self.logs.items():
            self._recovery_points[key] = plog.recovery_point
            self._log_starts[key] = plog.log_start_offset
            if plog.cleaner_offset is not None:
                self._cleaner_offsets[key] = plog.cleaner_offset
        write_checkpoint(os.path.join(self.data_dir, RECOVERY_POINT_FILE), self._recovery_points)
        write_checkpoint(os.path.join(self.data_dir, LOG_START_FILE), self._log_starts)
        write_checkpoint(os.path.join(self.data_dir, CLEANER_FILE), self._cleaner_offsets)

    def close(self) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown marker."""
        for plog in self.logs.values():
            plog.close()
        self.write_checkpoints()
        with open(os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE), "w") as f:
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(self.data_dir)
        log.info("log_manager_closed", data_dir=self.data_dir, logs=len(self.logs))
