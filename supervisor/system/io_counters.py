"""The kernel's I/O counters of the processes a sweep reads again and again, each through
a descriptor kept open: a re-read is one ``pread``, not an open, a read and a close."""

from __future__ import annotations

import os
import resource

from supervisor.policy.incarnation import same_incarnation
from supervisor.system.proc_reads import read_stat_facts

__all__ = ["IoCounters", "parse_io", "read_io_bytes"]


def _default_limit() -> int:
    """Descriptors kept at most: a quarter of this process's open-file limit (its sockets,
    pidfds and database need the rest), at most 4096; past it a read is a one-off."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 64
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(0, min(4096, soft // 4))


def parse_io(data: bytes) -> int | None:
    """``rchar + wchar`` of a ``/proc/<pid>/io`` text (the kernel writes them first)."""
    rchar, _, rest = data.partition(b"\n")
    wchar, _, _ = rest.partition(b"\n")
    if not (rchar.startswith(b"rchar: ") and wchar.startswith(b"wchar: ")):
        return None
    try:
        return int(rchar[7:]) + int(wchar[7:])
    except ValueError:
        return None


def read_io_bytes(pid: int) -> int | None:
    """One read of ``rchar + wchar`` of ``/proc/<pid>/io``: every byte the process moved
    through a read or write call (pipes, sockets, files alike), or None when it cannot be
    read. The counters only grow, and only by the process's own calls (reading its /proc
    files moves nothing of its own), so an unchanged sum means it did no I/O since."""
    try:
        fd = os.open(f"/proc/{pid}/io", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return parse_io(os.read(fd, 512))
    except OSError:
        return None
    finally:
        os.close(fd)


class IoCounters:
    """``read(pid, start)``: that incarnation's ``rchar + wchar``, or None when the kernel
    will not say. A descriptor opened for one incarnation reads only that process: once it
    has exited the read fails, whoever has its pid now."""

    def __init__(self, limit: int | None = None) -> None:
        self._fds: dict[tuple[int, str], int] = {}
        self._limit = _default_limit() if limit is None else limit

    def __len__(self) -> int:
        return len(self._fds)

    def read(self, pid: int, start: str) -> int | None:
        key = (pid, start)
        fd = self._fds.get(key)
        if fd is None:
            fd = self._open(pid, start)
            if fd is None:
                return None
            if len(self._fds) >= self._limit:
                try:
                    return parse_io(os.pread(fd, 512, 0))
                except OSError:
                    return None
                finally:
                    os.close(fd)
            self._fds[key] = fd
        try:
            return parse_io(os.pread(fd, 512, 0))
        except OSError:
            self._close(key)
            return None

    @staticmethod
    def _open(pid: int, start: str) -> int | None:
        try:
            fd = os.open(f"/proc/{pid}/io", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        # The pid may have changed hands between the caller's check and the open.
        facts = read_stat_facts(pid)
        if facts is None or not same_incarnation(facts.start, start):
            os.close(fd)
            return None
        return fd

    def keep_only(self, keys: set[tuple[int, str]]) -> None:
        """Close the descriptors of every process not in ``keys`` (gone, or no longer read)."""
        for key in [k for k in self._fds if k not in keys]:
            self._close(key)

    def _close(self, key: tuple[int, str]) -> None:
        fd = self._fds.pop(key, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        self.keep_only(set())
