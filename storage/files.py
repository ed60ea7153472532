"""Small durable-file helpers shared by the storage engine and the broker's metadata files."""

from __future__ import annotations

import errno
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


# --- block preallocation ------------------------------------------------------------

FALLOC_FL_KEEP_SIZE = 0x01
# Appends at least this large get their blocks allocated in one call before the
# write.  Measured on ext4 (CPU per 100 MB written): 1 MiB appends 17 ms plain,
# 11 ms preallocated; 256 KiB 16.3 and 11.9; 64 KiB the same either way; smaller
# appends cost more with the extra call (a 4 KiB one 2.8 us plain, 8.1 us).
PREALLOCATE_MIN = 256 * 1024


def _load_fallocate():
    """libc's ``fallocate`` (Linux), or None where there is none."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = getattr(libc, "fallocate64", None) or getattr(libc, "fallocate", None)
    except (OSError, AttributeError, ImportError):
        return None
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


_fallocate = _load_fallocate()


def preallocate(fd: int, offset: int, length: int) -> bool:
    """Allocate the file's blocks for ``[offset, offset + length)`` ahead of a write
    of that range, without changing the file's size (``FALLOC_FL_KEEP_SIZE``: a
    reader or a recovery never sees the range before it is written).  The write
    then finds its blocks in place instead of reserving them page by page.

    Only an optimisation: where the platform or the file system has no
    ``fallocate`` it is not tried again, and any other failure (a full disk) is
    left for the write itself to report.  True if the blocks were allocated."""
    global _fallocate
    fn = _fallocate
    if fn is None:
        return False
    if fn(fd, FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return True
    import ctypes

    if ctypes.get_errno() in (errno.EOPNOTSUPP, errno.ENOSYS):
        _fallocate = None
    return False
