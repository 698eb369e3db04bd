"""Reading a client config file once, and replacing it atomically only if nobody changed it."""

# MCP clients and editors rewrite their own config files (Claude Code keeps its whole
# state in ~/.claude.json), so a write here is the last step of a read-edit-write that
# must not lose their changes: the new text goes to a temporary file in the same
# directory, is fsynced, and replaces the file by rename only if the file still has
# the bytes, size and mtime it had when it was read. A timestamped backup of the old
# bytes is written beside it first.

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["BACKUP_INFIX", "ChangedSinceRead", "Snapshot", "read_snapshot", "replace_file"]

BACKUP_INFIX = ".fleet-supervisor-"


class ChangedSinceRead(RuntimeError):
    """The file changed between our read and our rename: nothing was written."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A file's bytes and the stat facts that tell whether it changed afterwards."""

    path: Path
    data: bytes
    size: int
    mtime_ns: int
    mode: int


def read_snapshot(path: Path) -> Snapshot:
    """Read ``path`` (symlinks followed: the real file is the one edited)."""
    real = Path(os.path.realpath(path))
    with open(real, "rb") as handle:
        facts = os.fstat(handle.fileno())
        data = handle.read()
    return Snapshot(real, data, facts.st_size, facts.st_mtime_ns, stat.S_IMODE(facts.st_mode))


def _unchanged(snapshot: Snapshot) -> bool:
    try:
        now = read_snapshot(snapshot.path)
    except OSError:
        return False
    return (now.data, now.size, now.mtime_ns) == (snapshot.data, snapshot.size, snapshot.mtime_ns)


def _write_new(path: Path, data: bytes, mode: int, *, exclusive: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _backup_path(path: Path, now: datetime) -> Path:
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    candidate = path.with_name(f"{path.name}{BACKUP_INFIX}{stamp}.bak")
    counter = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}{BACKUP_INFIX}{stamp}-{counter}.bak")
        counter += 1
    return candidate


def replace_file(
    snapshot: Snapshot,
    data: bytes,
    *,
    backup: bool = True,
    before_rename: Callable[[Path], None] | None = None,
    now: datetime | None = None,
) -> Path | None:
    """Put ``data`` in place of the file ``snapshot`` read; the backup's path, if one.

    Raises ChangedSinceRead (having removed the temporary file and the backup) when the
    file is not what was read any more. ``before_rename`` runs just before the check, for
    tests that play a concurrent writer.
    """
    path = snapshot.path
    temporary = path.with_name(f".{path.name}{BACKUP_INFIX}{os.getpid()}.tmp")
    _write_new(temporary, data, snapshot.mode, exclusive=False)
    saved = None
    try:
        if backup:
            saved = _backup_path(path, now or datetime.now(UTC))
            _write_new(saved, snapshot.data, snapshot.mode, exclusive=True)
        if before_rename is not None:
            before_rename(path)
        if not _unchanged(snapshot):
            raise ChangedSinceRead(f"{path} changed since it was read; nothing was written")
        os.rename(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        if saved is not None:
            saved.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return saved
