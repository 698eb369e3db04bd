"""What the census reads in /proc: a process in full once, then its incarnation and usage."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from supervisor.policy.identity.exec_marker import MARKER_ENV, parse_marker
from supervisor.policy.incarnation import start_of
from supervisor.system.proc_stat import EXITED_STATES, fields_after_comm, read_stat

__all__ = [
    "NULL_DEVICE",
    "FullRead",
    "StatRead",
    "UsageRead",
    "clock_ticks",
    "fd_ends",
    "fd_links",
    "marker_names_self",
    "netlink_sockets",
    "page_size",
    "proc_entries",
    "proc_names",
    "pss_bytes",
    "read_argv",
    "read_cwd",
    "read_full",
    "read_stat_facts",
    "read_usage",
    "stdio_link",
    "uptime_seconds",
]

# Offsets into the fields after comm (state is field 3): ppid 4, utime 14, stime 15,
# starttime 22, rss 24.
_PPID, _UTIME, _STIME, _START, _RSS = 1, 11, 12, 19, 21
_ENVIRON_LIMIT = 1 << 20
_CMDLINE_LIMIT = 65536
#: Where a descriptor that carries nothing points.
NULL_DEVICE = "/dev/null"


@cache
def clock_ticks() -> int:
    """Clock ticks per second of /proc's times (``SC_CLK_TCK``)."""
    return int(os.sysconf("SC_CLK_TCK"))


@cache
def page_size() -> int:
    return int(os.sysconf("SC_PAGE_SIZE"))


@dataclass(frozen=True, slots=True, kw_only=True)
class StatRead:
    """One read of ``/proc/<pid>/stat``: state, parent, incarnation, CPU and resident pages."""

    state: str
    ppid: int
    start: str
    cpu_ticks: int
    rss_pages: int
    comm: str

    @property
    def running(self) -> bool:
        return self.state not in EXITED_STATES


@dataclass(frozen=True, slots=True, kw_only=True)
class FullRead:
    """A first sight: everything discovery judges by, read once per incarnation."""

    stat: StatRead
    argv: tuple[str, ...]
    env_keys: tuple[str, ...]
    #: Raw text of the exec marker in the environment, if there is one.
    marker: str | None
    cwd: str | None
    uid: int | None
    stdin: str | None
    stdout: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRead:
    """The cheap reads of one process at one sweep."""

    stat: StatRead
    open_fds: int | None


def proc_entries() -> Iterator[tuple[int, int]]:
    """(pid, inode of ``/proc/<pid>``) of every listed process. The inode comes with the
    directory listing for free and names the process's /proc entry: a new process under
    an old pid gets a new one, so an unchanged inode spares a read of the process."""
    try:
        with os.scandir("/proc") as entries:
            for entry in entries:
                name = entry.name
                if name.isdigit():
                    yield int(name), entry.inode()
    except OSError:
        return


def proc_names() -> frozenset[str]:
    """The names in ``/proc`` (one ``listdir``: the cheapest look at which pids exist)."""
    try:
        return frozenset(os.listdir("/proc"))
    except OSError:
        return frozenset()


def read_stat_facts(pid: int) -> StatRead | None:
    """``/proc/<pid>/stat`` parsed, or None when gone or unreadable."""
    try:
        text = read_stat(pid)
    except OSError:
        return None
    fields = fields_after_comm(text)
    if fields is None or len(fields) <= _START:
        return None
    rest = fields[-1].split()
    fields = fields[:-1] + rest
    try:
        return StatRead(
            state=fields[0],
            ppid=int(fields[_PPID]),
            start=f"ticks-{int(fields[_START])}",
            cpu_ticks=int(fields[_UTIME]) + int(fields[_STIME]),
            rss_pages=int(fields[_RSS]) if len(fields) > _RSS else 0,
            comm=text[text.find("(") + 1 : text.rfind(")")],
        )
    except (ValueError, IndexError):
        return None


def _read_bytes(path: str, limit: int) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return None


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def stdio_link(pid: int, fd: int) -> str | None:
    """Where a descriptor points (``pipe:[123]``, ``socket:[45]``, ``/dev/null``, …)."""
    return _readlink(f"/proc/{pid}/fd/{fd}")


def read_argv(pid: int) -> tuple[str, ...] | None:
    """``/proc/<pid>/cmdline`` as words, or None when it cannot be read."""
    raw = _read_bytes(f"/proc/{pid}/cmdline", _CMDLINE_LIMIT)
    if raw is None:
        return None
    return tuple(p.decode("utf-8", "replace") for p in raw.split(b"\0") if p)


def read_cwd(pid: int) -> str | None:
    return _readlink(f"/proc/{pid}/cwd")


def read_full(pid: int) -> FullRead | None:
    """A process in full, or None when it is gone, a zombie or not readable by us."""
    stat = read_stat_facts(pid)
    if stat is None or not stat.running:
        return None
    argv = read_argv(pid)
    environ = _read_bytes(f"/proc/{pid}/environ", _ENVIRON_LIMIT)
    if argv is None:
        return None
    keys: set[str] = set()
    marker = None
    for entry in (environ or b"").split(b"\0"):
        key, equals, value = entry.partition(b"=")
        if equals and key:
            name = key.decode("utf-8", "replace")
            keys.add(name)
            if name == MARKER_ENV:
                marker = value.decode("ascii", "replace")
    try:
        uid: int | None = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        uid = None
    full = FullRead(
        stat=stat,
        argv=argv,
        env_keys=tuple(sorted(keys)),
        marker=marker,
        cwd=read_cwd(pid),
        uid=uid,
        stdin=stdio_link(pid, 0),
        stdout=stdio_link(pid, 1),
    )
    # Re-read: a pid that changed hands while it was being read describes no one process.
    again = read_stat_facts(pid)
    if again is None or again.start != stat.start:
        return None
    return full


def marker_names_self(marker: str | None, pid: int, start: str) -> bool:
    """The exec marker names this very incarnation as the leader of a wrapped server."""
    parsed = parse_marker(marker) if marker is not None else None
    if parsed is None or parsed.leader_pid != pid or not parsed.leader_start.isdigit():
        return False
    return f"ticks-{int(parsed.leader_start)}" == start_of(start)


def fd_links(pid: int) -> dict[int, str] | None:
    """The pipes and sockets a process holds, by descriptor (``{6: "pipe:[n]"}``), or None
    when its descriptors cannot be read."""
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return None
    links = {}
    for name in names:
        link = _readlink(f"{base}/{name}")
        if link is not None and link.startswith(("pipe:", "socket:")) and name.isdigit():
            links[int(name)] = link
    return links


def fd_ends(pid: int) -> frozenset[str] | None:
    """The pipes and sockets a process holds (``pipe:[n]``, ``socket:[n]``), or None when
    its descriptors cannot be read."""
    links = fd_links(pid)
    return None if links is None else frozenset(links.values())


def netlink_sockets() -> frozenset[str] | None:
    """The netlink sockets of this network namespace (``socket:[n]``), from
    ``/proc/net/netlink``: a process's line to the kernel, never to another process.
    None when it cannot be read."""
    data = _read_bytes("/proc/net/netlink", 1 << 20)
    if data is None:
        return None
    found = set()
    for line in data.splitlines()[1:]:
        fields = line.split()
        if fields and fields[-1].isdigit():
            found.add(f"socket:[{int(fields[-1])}]")
    return frozenset(found)


def pss_bytes(pid: int) -> int | None:
    """Proportional set size (``smaps_rollup``), or None where unreadable. The kernel walks
    the process's page tables for it: about a millisecond per 100 MB mapped."""
    data = _read_bytes(f"/proc/{pid}/smaps_rollup", 4096)
    if not data:
        return None
    for line in data.split(b"\n"):
        if line.startswith(b"Pss:"):
            parts = line.split()
            try:
                return int(parts[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None


def read_usage(pid: int) -> UsageRead | None:
    """Stat and the open descriptors of a process (PSS is read apart: ``pss_bytes``)."""
    stat = read_stat_facts(pid)
    if stat is None or not stat.running:
        return None
    try:
        fds: int | None = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = None
    return UsageRead(stat=stat, open_fds=fds)


def uptime_seconds() -> float | None:
    """Seconds since boot (the clock /proc's start ticks count in), to tell a process's
    age; a clock read, where /proc/uptime is a file read costing a hundred times more."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return None
