"""Replacing a file atomically: temporary file beside it, fsync, rename, fsync the directory."""

# Readers of the file (an MCP client, the daemon reloading its profiles) must see the
# old bytes or the new ones, never half a file, and a crash right after the rename must
# not lose it: the temporary file sits in the same directory (so the rename stays on one
# filesystem), is fsynced before the rename, and the directory is fsynced after it.

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["create_file", "replace_atomically"]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def create_file(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a new file ``path`` (FileExistsError if it exists), fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, mode)
        _write_all(fd, data)
    finally:
        os.close(fd)


def replace_atomically(
    path: Path,
    data: bytes,
    *,
    mode: int | None = None,
    owner: tuple[int, int] | None = None,
    before_rename: Callable[[], None] | None = None,
) -> None:
    """Put ``data`` in place of ``path`` by rename; the new file gets ``mode`` (else 0600).

    ``owner`` (uid, gid) is given to the new file where allowed. ``before_rename`` runs
    once the new bytes are on disk; if it raises, nothing is renamed, the temporary
    file is removed and the exception propagates.
    """
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            if owner is not None and owner != (os.getuid(), os.getgid()):
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, *owner)
            _write_all(fd, data)
        finally:
            os.close(fd)
        if before_rename is not None:
            before_rename()
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # makes the rename itself durable
    finally:
        os.close(directory)
