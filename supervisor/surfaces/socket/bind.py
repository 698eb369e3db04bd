"""Claiming the socket path: one server per path, stale files replaced, final mode before use."""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

from supervisor.errors import ConfigError, SupervisorError
from supervisor.observe.logs import get_logger
from supervisor.settings.config import SocketConfig
from supervisor.system.lockfile import acquire_or_refuse

__all__ = ["SocketInUse", "bound_listener", "lock_path_for"]

_log = get_logger()

#: sun_path is 108 bytes on Linux including the terminating NUL (104 on the BSDs).
_SUN_PATH_MAX = 107

_BACKLOG = 512

_Identity = tuple[int, int]


class SocketInUse(SupervisorError):
    """Another supervisor already serves (or is claiming) this socket path."""

    code: ClassVar[str] = "socket_in_use"


def lock_path_for(path: Path) -> Path:
    """The lock file held for a server's lifetime, beside its socket."""
    return path.with_name(path.name + ".lock")


def _check_length(path: Path) -> None:
    if len(os.fsencode(path)) > _SUN_PATH_MAX:
        raise ConfigError(
            f"socket.path {path} is longer than the {_SUN_PATH_MAX} bytes a Unix socket "
            "address can hold; choose a shorter path"
        )


def _lock(path: Path) -> int:
    """Hold an exclusive lock for the server's life: the probe-then-bind below is then race-free."""
    lock = lock_path_for(path)
    return acquire_or_refuse(
        lock,
        lambda by: SocketInUse(
            f"another supervisor{by} holds {lock}; refusing to start a second server on {path}"
        ),
    )


def _clear_stale(path: Path, kind: int) -> None:
    """Refuse if a server answers at path; remove the file if it is a socket nobody serves."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError(f"socket.path {path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, kind)
    probe.setblocking(False)
    try:
        probe.connect(os.fspath(path))
    except ConnectionRefusedError:
        pass  # a socket file with no listener: left behind by a server that died
    except FileNotFoundError:
        return
    except BlockingIOError:
        # A full accept backlog: something is listening, just busy.
        raise SocketInUse(f"a server is already listening on {path}") from None
    except OSError as exc:
        # EACCES and the like: we cannot tell whether it is live, so it is not ours to delete.
        raise SocketInUse(f"cannot probe existing socket {path}: {exc.strerror or exc}") from None
    else:
        raise SocketInUse(f"a server is already listening on {path}")
    finally:
        probe.close()
    _log.warning("socket_stale_removed", path=str(path))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _group_id(group: str) -> int:
    if group.isdigit():
        return int(group)
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise ConfigError(f"socket.group {group!r} is not a known group") from None


def _set_access(path: Path, mode: int, gid: int | None) -> None:
    try:
        if gid is not None:
            os.chown(path, -1, gid)
        os.chmod(path, mode)
    except OSError as exc:
        raise ConfigError(
            f"cannot set mode {mode:04o}"
            + (f" and group {gid}" if gid is not None else "")
            + f" on {path}: {exc.strerror or exc}"
        ) from None


def _listen_at(path: Path, mode: int, gid: int | None, kind: int) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, kind)
    try:
        sock.bind(os.fspath(path))
        _set_access(path, mode, gid)
        sock.listen(_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _bind(path: Path, mode: int, gid: int | None, kind: int) -> socket.socket:
    # Bind inside a private 0700 directory, set mode and group, then rename into place: the
    # socket is reachable at its public path only once it has its final permissions.
    staging = Path(tempfile.mkdtemp(prefix=".s", dir=path.parent))
    try:
        temp = staging / "s"
        if len(os.fsencode(temp)) > _SUN_PATH_MAX:
            # The staging path would not fit; bind in place and accept a brief window
            # with umask permissions (the parent directory is still ours).
            return _listen_at(path, mode, gid, kind)
        sock = _listen_at(temp, mode, gid, kind)
        try:
            os.rename(temp, path)
        except BaseException:
            sock.close()
            raise
        return sock
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _identity(path: Path) -> _Identity | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _ensure_parent(parent: Path) -> None:
    try:
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create socket directory {parent}: {exc.strerror or exc}"
        ) from None


def _prepare(config: SocketConfig, suffix: str) -> tuple[Path, int | None]:
    path = Path(str(Path(config.path).expanduser().absolute()) + suffix)
    _check_length(path)
    _ensure_parent(path.parent)
    return path, _group_id(config.group) if config.group else None


@contextmanager
def bound_listener(
    config: SocketConfig, *, suffix: str = "", kind: int = socket.SOCK_STREAM
) -> Iterator[tuple[socket.socket, Path]]:
    """A non-blocking socket listening at ``config.path`` (plus ``suffix``: the exec socket
    is a ``SOCK_SEQPACKET`` one beside the main socket); on exit closed, and its file
    removed if it is still ours. Raises ``SocketInUse`` or ``ConfigError`` when the path
    is unusable."""
    path, gid = _prepare(config, suffix)
    lock_fd = _lock(path)
    try:
        _clear_stale(path, kind)
        try:
            listener = _bind(path, config.mode, gid, kind)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise SocketInUse(f"{path} is already bound") from None
            raise ConfigError(f"cannot listen on {path}: {exc.strerror or exc}") from None
        ours = _identity(path)
        try:
            yield listener, path
        finally:
            listener.close()
            # Only our own file: an operator may have moved a newer socket into place.
            if ours is not None and _identity(path) == ours:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
    finally:
        os.close(lock_fd)
