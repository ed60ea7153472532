"""The data dir's identity: ``meta.properties`` (as Kafka writes it) and ``.lock``.

The cluster id is generated on the first start and kept, so clients see the
same cluster across restarts.  Like Kafka, a data dir written by another node id
is refused rather than silently adopted.
"""

from __future__ import annotations

import base64
import fcntl
import os
import uuid
from pathlib import Path

from kcoord.broker.config import read_properties
from kcoord.storage.files import write_atomically


class DataDirError(RuntimeError):
    pass


def _random_id() -> str:
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def load_or_create_identity(data_dir: Path, node_id: int) -> str:
    """Return the cluster id stored in ``meta.properties``, creating the file if absent."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "meta.properties"
    if path.exists():
        try:
            props = read_properties(path)
            stored = props.get("node.id")
            stored = None if stored is None else int(stored)
        except ValueError as exc:  # a malformed escape, a node id that is not a number
            raise DataDirError(f"{path} cannot be read: {exc}. Repair it, or move the data "
                               f"dir aside to start an empty one.") from None
        if stored is not None and stored != node_id:
            raise DataDirError(
                f"Stored node id {stored} doesn't match the configured node id {node_id} "
                f"in {path}. Use the matching node.id or another data dir."
            )
        cluster_id = props.get("cluster.id")
        if cluster_id:
            return cluster_id
    cluster_id = _random_id()
    body = (
        "#\n#kcoord broker data directory\n"
        f"cluster.id={cluster_id}\n"
        f"directory.id={_random_id()}\n"
        f"node.id={node_id}\n"
        "version=1\n"
    )
    write_atomically(path, body)
    return cluster_id


class DirLock:
    """An exclusive ``flock`` on ``<data dir>/.lock`` for the broker's lifetime."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / ".lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        if self.path.parent.exists() and not self.path.parent.is_dir():
            raise DataDirError(f"the data dir {self.path.parent} is a file, not a directory")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise DataDirError(
                f"Failed to acquire lock on {self.path}: another broker is using the data dir "
                f"{self.path.parent}"
            ) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
