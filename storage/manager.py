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

import asyncio
import contextlib
import os
import shutil
import threading
import uuid
from typing import Callable

import structlog

from kcoord.storage.config import LogConfig
from kcoord.storage.files import fsync_dir, write_atomically
from kcoord.storage.errors import KafkaStorageError, LogClosedError
from kcoord.storage.layout import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_FILE,
    LOG_START_FILE,
    PARTITION_METADATA_FILE,
    RECOVERY_POINT_FILE,
    parse_partition_dir,
)
from kcoord.storage.log import PartitionLog, wall_clock_ms

log = structlog.get_logger("kcoord.storage")


def read_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """Read a Kafka offset checkpoint file; a missing or unreadable file reads as empty.

    A malformed entry line is skipped with a warning, keeping every good one:
    a log without an entry is merely recovered from its start.
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return {}
    try:
        version, count = int(lines[0]), int(lines[1])
    except (IndexError, ValueError):
        log.warning("checkpoint_unreadable", path=path)
        return {}
    if version != 0:
        log.warning("checkpoint_unreadable", path=path, version=version)
        return {}
    out = {}
    bad = 0
    for line in lines[2:]:
        if not line:
            continue
        parts = line.split(" ")
        try:
            if len(parts) != 3:
                raise ValueError(line)
            topic, partition, offset = parts[0], int(parts[1]), int(parts[2])
            if not topic or partition < 0 or offset < 0:
                raise ValueError(line)
        except ValueError:
            bad += 1
            continue
        out[(topic, partition)] = offset
    if bad or len(out) != count:
        log.warning("checkpoint_lines_skipped", path=path, expected=count, read=len(out),
                    malformed=bad)
    return out


def write_checkpoint(path: str, entries: dict[tuple[str, int], int]) -> None:
    """Write a checkpoint atomically (temporary file, fsync, rename)."""
    body = [f"0\n{len(entries)}\n"]
    body += [f"{t} {p} {o}\n" for (t, p), o in sorted(entries.items())]
    write_atomically(path, "".join(body))




def write_partition_metadata(directory: str, topic_id: str, *, sync_dir: bool = True) -> None:
    """Kafka's ``partition.metadata``: the topic id the folder belongs to.

    Without ``sync_dir`` a machine crash may lose the file (never tear it):
    the next start writes it again for the topic that owns the folder.
    """
    write_atomically(os.path.join(directory, PARTITION_METADATA_FILE),
                     f"version: 0\ntopic_id: {topic_id}\n", sync_dir=sync_dir)


def read_partition_metadata(directory: str) -> str | None:
    """The topic id in a folder's ``partition.metadata``; None if there is none,
    ``""`` if it cannot be read (PartitionMetadataFile.read)."""
    try:
        with open(os.path.join(directory, PARTITION_METADATA_FILE), encoding="utf-8",
                  errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    if fields.get("version") != "0":
        return ""
    return fields.get("topic_id", "")


def suffixed_dir_name(name: str, suffix: str) -> str:
    """``<topic>-<partition>.<unique id>-<suffix>`` (UnifiedLog.logDeleteDirName and
    logStrayDirName): no longer a partition folder, never opened again."""
    return f"{name}.{uuid.uuid4().hex}-{suffix}"


class LogManager:
    """Opens, creates, deletes and closes the partition logs of one data dir.

    Lifecycle rules, after Kafka's LogManager:

    * a folder whose owner is unknown, or whose ``partition.metadata`` names
      another topic id, is set aside as ``-stray`` at start and never opened;
    * a deleted log's folder is renamed to ``-delete`` first (so a crash can
      never bring it back), then removed;
    * checkpoint entries belong to the logs open now: a partition created where
      the checkpoint files still hold an entry of an older log of the same name
      rewrites them before it takes any data.

    ``create_partitions`` and ``remove_partitions`` do file work only and may
    run in a worker thread; ``register`` and ``detach`` change the set of open
    logs and run on the caller's (event loop) thread.
    """

    def __init__(
        self,
        data_dir: str,
        default_config: LogConfig | None = None,
        *,
        config_for: Callable[[str], LogConfig | None] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        on_offline: Callable[[str], None] | None = None,
    ):
        self.data_dir = data_dir
        self.on_offline = on_offline
        self.offline = False
        self.default_config = default_config or LogConfig()
        self.config_for = config_for
        self.clock = clock
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.pending_removals: set[str] = set()  # -delete folders not yet removed
        os.makedirs(data_dir, exist_ok=True)
        # Held open while the manager lives: the data dir's inode is never reused
        # for another directory at the same path meanwhile, so a deleted or
        # replaced data dir is always told from the one opened here.
        self._dir_fd: int | None = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
        marker = os.path.join(data_dir, CLEAN_SHUTDOWN_FILE)
        self.clean_shutdown = os.path.exists(marker)
        self._checkpoint_lock = threading.RLock()  # the tables below
        self._write_lock = threading.Lock()  # one checkpoint writer at a time
        self._recovery_points = read_checkpoint(os.path.join(data_dir, RECOVERY_POINT_FILE))
        self._log_starts = read_checkpoint(os.path.join(data_dir, LOG_START_FILE))
        self._cleaner_offsets = read_checkpoint(os.path.join(data_dir, CLEANER_FILE))
        # Keys that the checkpoint files on disk hold an entry for.
        self._on_disk = set(self._recovery_points) | set(self._log_starts) | set(self._cleaner_offsets)

    def _config(self, topic: str) -> LogConfig:
        if self.config_for is not None:
            cfg = self.config_for(topic)
            if cfg is not None:
                return cfg
        return self.default_config

    # --- failure ------------------------------------------------------------------------

    def _log_io_error(self, plog: PartitionLog, exc: OSError) -> None:
        self.dir_failed(f"{plog.name}: {exc}")

    def dir_failed(self, reason: str) -> None:
        """Take the whole log dir offline after an I/O error (LogDirFailureChannel).

        Every log refuses further work with KAFKA_STORAGE_ERROR, nothing more is
        written (no checkpoints, no clean-shutdown marker, so the next start
        recovers every log), and ``on_offline`` is told once.
        """
        if self.offline:
            return
        self.offline = True
        for plog in list(self.logs.values()):
            plog.set_offline()
        log.critical("log_dir_offline", data_dir=self.data_dir, reason=reason)
        if self.on_offline is not None:
            self.on_offline(reason)

    def check_dir(self) -> bool:
        """False (and the log dir offline) once the data dir was deleted or replaced
        under the running broker: the files still open would take writes that no
        restart finds again."""
        if self.offline or self._dir_fd is None:
            return not self.offline
        opened = os.fstat(self._dir_fd)
        if opened.st_nlink == 0 or _identity(self.data_dir) != (opened.st_dev, opened.st_ino):
            self.dir_failed(f"the data dir {self.data_dir} was deleted or replaced while the "
                            "broker was running")
            return False
        return True

    def _check_online(self) -> None:
        if self.offline:
            raise KafkaStorageError(f"the log dir {self.data_dir} is offline")

    # --- opening ------------------------------------------------------------------------

    def open_all(self, owner: Callable[[str, int], str | None] | None = None) -> list[PartitionLog]:
        """Open every ``<topic>-<partition>`` folder; other files and folders are skipped.

        With ``owner`` (topic id string of the topic that owns a partition, or
        None), folders that no topic owns, or that belong to another topic id,
        are renamed to ``-stray`` instead of being opened (LogManager's stray
        detection in KRaft mode).
        """
        opened = []
        strays = 0
        for name in sorted(os.listdir(self.data_dir)):
            key = parse_partition_dir(name)
            path = os.path.join(self.data_dir, name)
            if key is None or not os.path.isdir(path):
                continue
            if owner is not None:
                expected = owner(*key)
                found = read_partition_metadata(path)
                if expected is None or (found is not None and found != expected):
                    self._set_aside(path, key, expected, found)
                    strays += 1
                    continue
                if found is None:
                    write_partition_metadata(path, expected)
            opened.append(self._open(key))
        if strays:
            fsync_dir(self.data_dir)
        with self._checkpoint_lock:
            # Entries of logs that are gone are not written again.
            for table in (self._recovery_points, self._log_starts, self._cleaner_offsets):
                for key in [k for k in table if k not in self.logs]:
                    del table[key]
        # The marker only vouches for the shutdown before this start.
        try:
            os.unlink(os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE))
        except FileNotFoundError:
            pass
        return opened

    def _set_aside(self, path: str, key, expected, found) -> None:
        stray = os.path.join(self.data_dir, suffixed_dir_name(os.path.basename(path), "stray"))
        os.replace(path, stray)
        log.warning("log_set_aside_as_stray", log=os.path.basename(path), moved_to=stray,
                    owner_topic_id=expected, folder_topic_id=found,
                    reason="no topic owns it" if expected is None else "topic id mismatch")

    def _open(self, key: tuple[str, int], config: LogConfig | None = None) -> PartitionLog:
        topic, partition = key
        with self._checkpoint_lock:
            recovery_point = self._recovery_points.get(key, 0)
            log_start = self._log_starts.get(key)
            cleaner_offset = self._cleaner_offsets.get(key)
        plog = PartitionLog(
            os.path.join(self.data_dir, f"{topic}-{partition}"),
            config if config is not None else self._config(topic),
            recovery_point=recovery_point,
            log_start_offset=log_start,
            cleaner_offset=cleaner_offset,
            clean_shutdown=self.clean_shutdown and key in self._recovery_points,
            clock=self.clock,
            on_io_error=self._log_io_error,
        )
        self.logs[key] = plog
        return plog

    def _forget_stale_entries(self, keys) -> None:
        """Drop checkpoint entries of older logs of these partitions, on disk too,
        before a new log of the same name takes any data."""
        with self._write_lock:
            with self._checkpoint_lock:
                for key in keys:
                    for table in (self._recovery_points, self._log_starts, self._cleaner_offsets):
                        table.pop(key, None)
                stale = bool(self._on_disk.intersection(keys))
                tables = self._snapshot_tables()
            if stale:
                self._write_checkpoint_files(*tables)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None,
                      topic_id: str | None = None) -> PartitionLog:
        """The log of a partition, opening or creating its folder on first use."""
        key = (topic, partition)
        plog = self.logs.get(key)
        if plog is None:
            self._check_online()
            plog = self._create(key, config, topic_id)
            fsync_dir(self.data_dir)
        return plog

    def _create(self, key, config, topic_id) -> PartitionLog:
        path = os.path.join(self.data_dir, f"{key[0]}-{key[1]}")
        if not os.path.exists(path):
            self._forget_stale_entries([key])
            try:
                os.mkdir(path)  # in the data dir, which must still be there
            except OSError as exc:
                self.dir_failed(f"{key[0]}-{key[1]}: {exc}")
                raise KafkaStorageError(f"cannot create the folder of {key[0]}-{key[1]}: "
                                        f"{exc}") from exc
        if topic_id is not None:
            write_partition_metadata(path, topic_id)
        return self._open(key, config)

    # --- topic lifecycle ---------------------------------------------------------------

    def create_partitions(self, topic: str, count: int, topic_id: str,
                          config: LogConfig | None = None, first: int = 0) -> list[PartitionLog]:
        """Create (or open) the logs of partitions ``first``..count-1 of a topic
        (``first`` > 0: the partitions added to an existing one).

        File work only, safe in a worker thread; ``register`` the result.  On
        failure (out of file descriptors, disk full) whatever was made is
        removed again and the error raised.
        """
        self._check_online()
        keys = [(topic, p) for p in range(first, count)]
        made: list[PartitionLog] = []
        try:
            self._forget_stale_entries(
                [k for k in keys if not os.path.exists(os.path.join(self.data_dir, f"{k[0]}-{k[1]}"))])
            for key in keys:
                path = os.path.join(self.data_dir, f"{key[0]}-{key[1]}")
                os.makedirs(path, exist_ok=True)
                write_partition_metadata(path, topic_id, sync_dir=False)
                made.append(PartitionLog(path, config if config is not None else self._config(topic),
                                         clock=self.clock, on_io_error=self._log_io_error))
            fsync_dir(self.data_dir)
        except BaseException:
            self.remove_partitions(made, [(topic, p) for p in range(first + len(made), count)])
            raise
        return made

    def register(self, logs: list[PartitionLog]) -> None:
        for plog in logs:
            key = parse_partition_dir(plog.name)
            self.logs[key] = plog

    def detach(self, topic: str, count: int) -> list[PartitionLog]:
        """Take a topic's logs out of service (no more appends or reads)."""
        gone = []
        for p in range(count):
            plog = self.logs.pop((topic, p), None)
            if plog is not None:
                gone.append(plog)
        with self._checkpoint_lock:
            for p in range(count):
                for table in (self._recovery_points, self._log_starts, self._cleaner_offsets):
                    table.pop((topic, p), None)
        return gone

    def remove_partitions(self, logs: list[PartitionLog], extra: list | None = None) -> None:
        """Close detached logs, rename their folders to ``-delete``, then remove them.

        ``extra`` names more ``(topic, partition)`` folders to remove if present.
        File work only, safe in a worker thread.
        """
        doomed = []
        folders = [plog.directory for plog in logs]
        folders += [os.path.join(self.data_dir, f"{t}-{p}") for t, p in extra or ()]
        for plog in logs:
            plog.close_files()
        for folder in folders:
            if not os.path.exists(folder):
                continue
            target = os.path.join(self.data_dir,
                                  suffixed_dir_name(os.path.basename(folder), "delete"))
            os.replace(folder, target)
            doomed.append(target)
        if doomed:
            fsync_dir(self.data_dir)
        for target in doomed:
            shutil.rmtree(target, ignore_errors=True)
            if os.path.exists(target):
                self.pending_removals.add(target)  # retried by remove_leftover_dirs

    def delete(self, topic: str, partition: int) -> None:
        """Remove one partition's log and folder (tests and tools)."""
        key = (topic, partition)
        plog = self.logs.pop(key, None)
        with self._checkpoint_lock:
            for table in (self._recovery_points, self._log_starts, self._cleaner_offsets):
                table.pop(key, None)
        self.remove_partitions([plog] if plog is not None else [], [] if plog else [key])

    def remove_leftover_dirs(self) -> int:
        """Remove ``-delete`` folders that a crash, or a failed removal, left behind
        (strays are kept for the operator)."""
        removed = 0
        self.pending_removals.clear()
        for name in os.listdir(self.data_dir):
            path = os.path.join(self.data_dir, name)
            if name.endswith("-delete") and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
                if os.path.exists(path):
                    self.pending_removals.add(path)
                else:
                    removed += 1
        return removed

    # --- maintenance ---------------------------------------------------------------------

    def _maintainable(self) -> list[PartitionLog]:
        """The logs a maintenance pass works on: none once the dir is offline."""
        if self.offline:
            return []
        return [plog for plog in list(self.logs.values()) if not plog.closed]

    def run_retention(self, now_ms: int | None = None) -> int:
        """One retention pass over every log; returns the segments deleted."""
        deleted = self._retain(self.clock() if now_ms is None else now_ms)
        if deleted:
            self.write_checkpoints()
        return deleted

    def _retain(self, now: int, compacted_only: bool = False) -> int:
        """Retention of every log (``compacted_only``: of those whose
        ``cleanup.policy`` is both compact and delete); the segments deleted."""
        deleted = 0
        for plog in self._maintainable():
            if compacted_only and not (plog.config.compact and plog.config.delete):
                continue
            with _unless_deleted_meanwhile(plog):
                deleted += plog.delete_old_segments(now)
        return deleted

    def run_cleaner(self, now_ms: int | None = None) -> int:
        """Compact every log that needs it (synchronously), then retention on the
        compacted and deleted logs (``_retain_compacted``); returns how many were
        cleaned."""
        now = self.clock() if now_ms is None else now_ms
        cleaned = 0
        for plog in self._maintainable():
            if plog.config.compact:
                with _unless_deleted_meanwhile(plog):
                    cleaned += plog.compact(now) is not None
        deleted = self._retain_compacted(now)
        if cleaned or deleted:
            self.write_checkpoints()
        return cleaned

    async def run_cleaner_async(self, now_ms: int | None = None) -> int:
        """Compact every log that needs it, each in a worker thread, then
        retention on the compacted and deleted logs (in a worker thread too)."""
        now = self.clock() if now_ms is None else now_ms
        cleaned = 0
        for plog in self._maintainable():
            if plog.config.compact:
                with _unless_deleted_meanwhile(plog):
                    cleaned += await plog.compact_async(now) is not None
        loop = asyncio.get_running_loop()
        deleted = await loop.run_in_executor(None, self._retain_compacted, now)
        if cleaned or deleted:
            await loop.run_in_executor(None, self.write_checkpoints)
        return cleaned

    def _retain_compacted(self, now: int) -> int:
        """Retention of every log whose ``cleanup.policy`` is both compact and
        delete, as Kafka's log cleaner applies it after each of its passes
        (``LogCleanerManager.deletableLogs``, ``deleteOldSegments``): such a log
        loses its expired segments at the cleaner's pace
        (``log.cleaner.backoff.ms``), not only at the retention check
        (``log.retention.check.interval.ms``).  Returns the segments deleted."""
        return self._retain(now, compacted_only=True)

    def write_checkpoints(self) -> None:
        """Write the three checkpoint files from the logs open now (any thread).

        The tables are copied under ``_checkpoint_lock`` and written outside it
        (writers take ``_write_lock``), so the event loop, which takes the
        former to forget a deleted topic's entries, never waits for an fsync.
        """
        if self.offline:
            return
        with self._write_lock:
            with self._checkpoint_lock:
                for key, plog in list(self.logs.items()):
                    self._recovery_points[key] = plog.recovery_point
                    self._log_starts[key] = plog.log_start_offset
                    if plog.cleaner_offset is not None:
                        self._cleaner_offsets[key] = plog.cleaner_offset
                    else:
                        # A reset (truncation) must not come back from the last checkpoint.
                        self._cleaner_offsets.pop(key, None)
                tables = self._snapshot_tables()
            self._write_checkpoint_files(*tables)

    def _snapshot_tables(self):
        return dict(self._recovery_points), dict(self._log_starts), dict(self._cleaner_offsets)

    def _write_checkpoint_files(self, recovery_points, log_starts, cleaner_offsets) -> None:
        try:
            write_checkpoint(os.path.join(self.data_dir, RECOVERY_POINT_FILE), recovery_points)
            write_checkpoint(os.path.join(self.data_dir, LOG_START_FILE), log_starts)
            write_checkpoint(os.path.join(self.data_dir, CLEANER_FILE), cleaner_offsets)
        except OSError as exc:
            self.dir_failed(f"checkpoint write: {exc}")
            raise KafkaStorageError(f"could not write the checkpoints: {exc}") from exc
        self._on_disk = set(recovery_points) | set(log_starts) | set(cleaner_offsets)

    def close(self) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown marker.

        A log dir that went offline is only closed: without the marker the next
        start recovers every log.
        """
        for plog in self.logs.values():
            try:
                plog.close()
            except KafkaStorageError:
                pass  # reported by dir_failed; the remaining logs are closed without flushing
        self._close_dir_fd()
        if self.offline:
            log.warning("log_manager_closed_offline", data_dir=self.data_dir, logs=len(self.logs))
            return
        self.write_checkpoints()
        try:
            with open(os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE), "w") as f:
                f.flush()
                os.fsync(f.fileno())
            fsync_dir(self.data_dir)
        except OSError as exc:
            self.dir_failed(f"clean-shutdown marker: {exc}")
            return
        log.info("log_manager_closed", data_dir=self.data_dir, logs=len(self.logs))

    def _close_dir_fd(self) -> None:
        fd, self._dir_fd = self._dir_fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        # A manager dropped without close() (a test's) gives its descriptor back.
        if getattr(self, "_dir_fd", None) is not None:
            self._close_dir_fd()

    async def drain(self) -> None:
        """Wait for the flushes in flight of every log (before ``close``)."""
        for plog in list(self.logs.values()):
            await plog.flusher.drain()


@contextlib.contextmanager
def _unless_deleted_meanwhile(plog: PartitionLog):
    """A maintenance pass skips a log whose topic was deleted while it ran (its
    files are closed under it); any other error is raised."""
    try:
        yield
    except (LogClosedError, OSError):
        if not plog.closed or plog.offline:
            raise


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of a directory, None if it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
