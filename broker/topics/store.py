"""Topic metadata on disk: a snapshot and a journal, so that a change costs the same
at 10,000 topics as at 10.

Kafka keeps topics in its KRaft metadata log; kcoord keeps them in two small
files of its own in the data dir:

* ``kcoord-topics.json``: a snapshot of every topic, and the sequence number of
  the last journal entry it includes;
* ``kcoord-topics.journal``: one JSON line per change after the snapshot
  (``create`` with the whole topic, ``delete`` with the name and id), appended
  and fsynced before the change is acknowledged.

Loading reads the snapshot and replays the journal entries with a higher
sequence number; a torn last line (a crash in the middle of an append) is
ignored and cut off.  When the journal grows longer than the topic count (and
at least ``MIN_COMPACT_ENTRIES``), a new snapshot is written atomically and the
journal emptied, which keeps the amortized cost per change constant.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

import structlog

from kcoord.storage.files import fsync_dir, write_atomically

log = structlog.get_logger("kcoord.topics")

SNAPSHOT_FILE = "kcoord-topics.json"
JOURNAL_FILE = "kcoord-topics.journal"
MIN_COMPACT_ENTRIES = 1024


class TopicStore:
    """Persists topic entries (plain dicts with ``name`` and ``topic_id``)."""

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        self.snapshot_path = self.data_dir / SNAPSHOT_FILE
        self.journal_path = self.data_dir / JOURNAL_FILE
        self._seq = 0
        self._journal_entries = 0
        self.topics: dict[str, dict] = {}  # the state the files hold, kept for snapshots

    def load(self) -> dict[str, dict]:
        """Every topic entry by name, as the last acknowledged change left them."""
        topics: dict[str, dict] = {}
        snapshot_seq = 0
        if self.snapshot_path.exists():
            data = json.loads(self.snapshot_path.read_text(encoding="utf-8"))
            snapshot_seq = int(data.get("journal_seq", 0))
            for entry in data.get("topics", []):
                topics[entry["name"]] = entry
        self._seq = snapshot_seq
        self._journal_entries = 0
        if self.journal_path.exists():
            raw = self.journal_path.read_bytes()
            good = 0
            for line in raw.split(b"\n"):
                end = good + len(line) + 1
                if end > len(raw):
                    break  # no newline: a torn append, never acknowledged
                good = end
                try:
                    entry = json.loads(line)
                    seq = int(entry["seq"])
                except (ValueError, KeyError, TypeError):
                    log.warning("topics.journal_line_unreadable", offset=good - len(line) - 1)
                    continue
                self._journal_entries += 1
                if seq <= snapshot_seq:
                    continue
                self._seq = max(self._seq, seq)
                self._apply(topics, entry)
            if good < len(raw):
                log.warning("topics.journal_tail_cut", bytes=len(raw) - good)
                with open(self.journal_path, "r+b") as fh:
                    fh.truncate(good)
                    os.fsync(fh.fileno())
        self.topics = dict(topics)
        return topics

    @staticmethod
    def _apply(topics: dict[str, dict], entry: dict) -> None:
        if entry["op"] == "create":
            topic = entry["topic"]
            topics[topic["name"]] = topic
        elif entry["op"] == "delete":
            current = topics.get(entry["name"])
            if current is not None and current["topic_id"] == entry["topic_id"]:
                del topics[entry["name"]]

    def record(self, created: Iterable[dict] = (), deleted: Iterable[dict] = ()) -> None:
        """Append the changes of one operation with one write and one fsync.

        Not thread-safe: callers serialize their changes (one worker thread).
        """
        lines = []
        seq = self._seq
        for topic in created:
            seq += 1
            lines.append({"seq": seq, "op": "create", "topic": topic})
        for topic in deleted:
            seq += 1
            lines.append({"seq": seq, "op": "delete", "name": topic["name"],
                          "topic_id": topic["topic_id"]})
        if not lines:
            return
        data = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines).encode()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        new_file = not self.journal_path.exists()
        fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            good = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError:
                # Never leave half a line: the next change would be appended to
                # it and both would read as one unreadable line.
                try:
                    os.ftruncate(fd, good)
                except OSError:
                    pass
                raise
        finally:
            os.close(fd)
        if new_file:
            fsync_dir(self.data_dir)
        self._seq = seq
        self._journal_entries += len(lines)
        for line in lines:
            self._apply(self.topics, line)
        if self._journal_entries > max(MIN_COMPACT_ENTRIES, len(self.topics)):
            # The change is in the journal already: a snapshot that cannot be
            # written now (a full disk) leaves it there and is tried again at the
            # next change, and the change is not reported as failed (its caller
            # would undo in memory what the next start reads back).
            try:
                self.write_snapshot()
            except OSError as exc:
                log.warning("topics.snapshot_failed", path=str(self.snapshot_path),
                            error=str(exc))

    def write_snapshot(self) -> None:
        """Replace the snapshot by the current state and empty the journal.

        A crash after the snapshot's rename and before the journal is emptied is
        harmless: entries up to the snapshot's sequence number are skipped.
        """
        data = {"version": 2, "journal_seq": self._seq,
                "topics": sorted(self.topics.values(), key=lambda t: t["name"])}
        self.data_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(self.snapshot_path, json.dumps(data, indent=1, sort_keys=True))
        if self.journal_path.exists():
            with open(self.journal_path, "r+b") as fh:
                fh.truncate(0)
                os.fsync(fh.fileno())
        self._journal_entries = 0
