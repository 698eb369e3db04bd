"""Reading a client config file once, and replacing it atomically only if nobody changed it."""

# MCP clients and editors rewrite their own config files (Claude Code keeps its whole
# state in ~/.claude.json), so a write here is the last step of a read-edit-write that
# must not lose their changes: the new text is written atomically (supervisor.system.atomic_file),
# and the rename happens only if the file still has the bytes, size and mtime it had
# when it was read. A timestamped backup of the old bytes is written beside it first.

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from supervisor.system.atomic_file import create_file, replace_atomically

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
    saved: list[Path] = []

    def backup_and_check() -> None:
        if backup:
            copy = _backup_path(path, now or datetime.now(UTC))
            create_file(copy, snapshot.data, snapshot.mode)
            saved.append(copy)
        if before_rename is not None:
            before_rename(path)
        if not _unchanged(snapshot):
            raise ChangedSinceRead(f"{path} changed since it was read; nothing was written")

    try:
        replace_atomically(path, data, mode=snapshot.mode, before_rename=backup_and_check)
    except BaseException:
        for made in saved:
            made.unlink(missing_ok=True)
        raise
    return saved[0] if saved else None
