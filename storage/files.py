"""Small durable-file helpers shared by the storage engine and the broker's metadata files."""

from __future__ import annotations

import os


def fsync_dir(path) -> None:
    """fsync a directory, so that creations, renames and deletions in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path, text: str, *, sync_dir: bool = True) -> None:
    """Replace ``path`` by ``text``: temporary file, fsync, rename, fsync of the folder.

    A crash leaves the old file or the new one, never a torn one.  With
    ``sync_dir=False`` the caller fsyncs the folder later (once for many files);
    until then a machine crash may leave the old file or none.
    """
    path = os.fspath(path)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    if sync_dir:
        fsync_dir(os.path.dirname(path) or ".")
