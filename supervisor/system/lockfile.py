"""Lock files: one server per socket path and one daemon per database, and short writer locks."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from supervisor.errors import ConfigError, SupervisorError

__all__ = [
    "DatabaseLocked",
    "acquire",
    "acquire_or_refuse",
    "database_lock",
    "database_lock_path",
    "exclusive",
    "holder",
]

#: The recorded pid is one short line; anything longer is not ours.
_HOLDER_READ_SIZE = 32


class DatabaseLocked(SupervisorError, code="database_locked"):
    """Another daemon already runs on this registry database."""


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot open lock file {path}: {exc.strerror or exc}") from None


def acquire(path: Path) -> int | None:
    """A descriptor holding an exclusive lock on ``path``, or None if another process holds it.

    The lock lives as long as the descriptor (and dies with the process, however it dies).
    The file is left in place on release: unlinking a lock file another process may be
    about to open would let two of them hold "the" lock at once. Raises ``ConfigError``
    when the file cannot be opened or locked at all.
    """
    fd = _open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError as exc:
        os.close(fd)
        raise ConfigError(f"cannot lock {path}: {exc.strerror or exc}") from None
    # Our pid in the file lets the refusal of a second process name the holder; the lock,
    # not this content, is what excludes, so a failed write changes nothing.
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Wait for, then hold, an exclusive lock on ``path`` for the block.

    For short read-modify-write sections that several processes may run at once;
    like ``acquire`` it leaves the file in place and the lock dies with the process.
    """
    fd = _open(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            raise ConfigError(f"cannot lock {path}: {exc.strerror or exc}") from None
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def holder(path: Path) -> int | None:
    """The pid the current holder wrote into ``path``, if it can be read."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_HOLDER_READ_SIZE).strip()
    except OSError:
        return None
    return int(raw) if raw.isdigit() else None


def database_lock_path(db_path: Path) -> Path:
    """The lock file beside a registry database: ``<db>.lock``."""
    return db_path.with_name(db_path.name + ".lock")


def acquire_or_refuse(path: Path, refusal: Callable[[str], SupervisorError]) -> int:
    """``acquire``, raising ``refusal(by)`` when another process holds the lock.

    ``by`` is `` (pid N)`` when the holder recorded its pid, else empty.
    """
    fd = acquire(path)
    if fd is None:
        pid = holder(path)
        raise refusal(f" (pid {pid})" if pid is not None else "")
    return fd


@contextmanager
def database_lock(db_path: Path) -> Iterator[Path]:
    """Hold the database's lock file for the block; ``DatabaseLocked`` if another daemon does.

    SQLite in WAL mode lets a second daemon open the same file without complaint, and two
    daemons would then probe, expire and retire over each other's shoulders.
    """
    lock = database_lock_path(db_path)
    fd = acquire_or_refuse(
        lock,
        lambda by: DatabaseLocked(
            f"another supervisor{by} is already running on the database {db_path}; it holds {lock}"
        ),
    )
    try:
        yield lock
    finally:
        os.close(fd)
