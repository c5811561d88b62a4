"""Whole-file writes that a crash or a full disk cannot tear.

:func:`write_atomic` replaces a file with new contents: they go to a
temporary file in the same directory, which is fsync'd and renamed over the
target, and then the directory is fsync'd. A crash, a kill or a full disk
leaves the old file or the new one, never part of one, and a failed write
leaves no temporary file behind.

Every file a tuning run writes whole (``best.json``, ``report.md``, the
parquet/CSV tables, the figures, the generated kernels) goes through it; the
trial log, which is appended to, uses :func:`_write_all` and
:func:`_fsync_dir` directly. This module sits just above :mod:`autotune.errors`
so that every layer (memory, codegen, search, report) can use it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["write_atomic"]


def _fsync_dir(directory: Path) -> None:
    """Make a new file's directory entry durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory; the file itself is synced
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` and fsync it; an OSError (ENOSPC: the disk is full) propagates."""
    view = memoryview(data)
    while view:  # a nearly full disk takes part of a write: the next one raises ENOSPC
        view = view[os.write(fd, view) :]
    os.fsync(fd)  # delayed allocation: a full disk may show only here


def _holds(path: Path, data: bytes) -> bool:
    """Whether the file at ``path`` holds exactly ``data`` (False if it cannot be read)."""
    try:
        if path.stat().st_size != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, skip_unchanged: bool = False) -> Path:
    """Replace the file at ``path`` with ``data`` (text as UTF-8); return the path.

    The data goes to a temporary file in the same directory, is fsync'd, and
    is renamed over ``path``, so a crash or a full disk leaves the old file or
    the new one, never part of one. On an error the temporary file is removed
    and the OSError propagates.

    With ``skip_unchanged``, a file that already holds exactly ``data`` is left
    alone (same inode, same mtime): for content-addressed files whose mtime
    others rely on, such as the kernels numba caches by source mtime.
    """
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if skip_unchanged and _holds(path, raw):
        return path
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for open()
    try:
        try:
            _write_all(fd, raw)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)
    return path
