"""Whether any process still holds the other end of a process's stdio pipe: the kernel's own count.

A pipe is one kernel object with a count of open read ends and of open write ends, over
every process, user and namespace, descriptors in flight in a Unix socket included. The
count is not printed anywhere, but ``poll`` reports it: a read end polls ``POLLHUP`` when
no write end is open, and a write end polls ``POLLERR`` when no read end is. The probe
opens the process's own descriptor anew through ``/proc/<pid>/fd/<n>`` (the kernel allows
that to whoever may inspect the process: its user or root), on the same side the process
holds it, so that it adds itself to the side it does not ask about, and polls it without
waiting. It reads and writes nothing.
"""

from __future__ import annotations

import os
import select
from dataclasses import dataclass

__all__ = [
    "ACCESS_BOTH",
    "ACCESS_READ",
    "ACCESS_WRITE",
    "PipeEnd",
    "fd_access",
    "pipe_inode",
    "probe_pipe",
]

ACCESS_READ = "read"
ACCESS_WRITE = "write"
ACCESS_BOTH = "both"
_ACCMODE = 0o3
_ACCESS = {os.O_RDONLY: ACCESS_READ, os.O_WRONLY: ACCESS_WRITE, os.O_RDWR: ACCESS_BOTH}


@dataclass(frozen=True, slots=True, kw_only=True)
class PipeEnd:
    """One probe of a process's pipe descriptor.

    ``released`` is True when no process anywhere holds the other end (the side the
    process does not hold), False when one does, None when it cannot be told; ``why``
    says which in words."""

    link: str
    access: str | None
    released: bool | None
    why: str


def pipe_inode(link: str | None) -> int | None:
    """The inode of a ``pipe:[n]`` link, else None."""
    if link is None or not link.startswith("pipe:[") or not link.endswith("]"):
        return None
    raw = link[len("pipe:[") : -1]
    return int(raw) if raw.isdigit() else None


def fd_access(pid: int, fd: int) -> str | None:
    """How the process holds the descriptor (its ``flags`` in fdinfo), None if unreadable."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("flags:"):
                    return _ACCESS.get(int(line.split()[1], 8) & _ACCMODE)
    except (OSError, ValueError, IndexError):
        return None
    return None


def probe_pipe(pid: int, fd: int, link: str) -> PipeEnd:
    """Whether the other end of the pipe ``link`` that ``pid`` holds as ``fd`` is held by
    any process. Fails closed: whatever cannot be read or changed while read is None."""
    inode = pipe_inode(link)
    if inode is None:
        return PipeEnd(link=link, access=None, released=None, why="not a pipe")
    access = fd_access(pid, fd)
    if access is None:
        why = f"pid {pid}'s descriptor {fd} cannot be read (gone, or not ours to inspect)"
        return PipeEnd(link=link, access=None, released=None, why=why)
    if access == ACCESS_BOTH:
        why = "the process holds both of its ends itself"
        return PipeEnd(link=link, access=access, released=False, why=why)
    reads = access == ACCESS_READ
    flags = (os.O_RDONLY if reads else os.O_WRONLY) | os.O_NONBLOCK | os.O_CLOEXEC
    other = "write" if reads else "read"
    try:
        probe = os.open(f"/proc/{pid}/fd/{fd}", flags)
    except OSError as exc:
        why = f"pid {pid}'s descriptor {fd} cannot be opened ({os.strerror(exc.errno or 0)})"
        return PipeEnd(link=link, access=access, released=None, why=why)
    try:
        if os.fstat(probe).st_ino != inode:
            # The descriptor was closed and reused between the link and the open.
            why = f"pid {pid}'s descriptor {fd} changed while it was probed"
            return PipeEnd(link=link, access=access, released=None, why=why)
        poller = select.poll()
        poller.register(probe, select.POLLIN if reads else select.POLLOUT)
        events = 0
        for _, got in poller.poll(0):
            events |= got
    except OSError as exc:
        why = f"{link} could not be polled ({os.strerror(exc.errno or 0)})"
        return PipeEnd(link=link, access=access, released=None, why=why)
    finally:
        os.close(probe)
    gone = bool(events & (select.POLLHUP if reads else select.POLLERR))
    if gone:
        return PipeEnd(link=link, access=access, released=True, why=f"no {other} end is open")
    why = f"a process still holds its {other} end"
    return PipeEnd(link=link, access=access, released=False, why=why)
