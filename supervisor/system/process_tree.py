"""Linux facts about a wrapped server's process tree: members, markers, verified signals."""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from supervisor.policy.identity.exec_marker import MARKER_ENV, ExecMarker, parse_marker
from supervisor.policy.incarnation import start_of
from supervisor.system.pidfd import close_pidfd, incarnation, pidfd_open
from supervisor.system.probes import start_token, stat_fields
from supervisor.system.proc_reads import read_argv
from supervisor.system.proc_stat import EXITED_STATES

__all__ = [
    "Member",
    "StatFacts",
    "boot_time_epoch",
    "cgroup_of",
    "client_argv",
    "dedicated_cgroup",
    "duplicate_fd",
    "find_members",
    "marker_of",
    "owner_uid",
    "scan_markers",
    "signal_verified",
    "start_epoch",
    "stat_facts",
    "ticks",
]

_MARKER_PREFIX = (MARKER_ENV + "=").encode()
#: /proc/<pid>/environ can be large (a big environment); the marker is read from its start
#: up to this many bytes, which covers any environment a client gives a server in practice.
_ENVIRON_LIMIT = 1 << 20
_SIGNALLABLE = (signal.SIGTERM, signal.SIGKILL)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatFacts:
    """What ``/proc/<pid>/stat`` says of one process at one read."""

    pid: int
    state: str
    ppid: int
    pgid: int
    start: str  # "ticks-<n>", the incarnation token probes.py uses

    @property
    def running(self) -> bool:
        """Not a zombie (Z) or dead (X, or x before Linux 3.14): a process in those states
        never runs again."""
        return self.state not in EXITED_STATES


@dataclass(frozen=True, slots=True, kw_only=True)
class Member:
    """A live process of a server's tree, named by its incarnation token."""

    pid: int
    start: str


def ticks(raw: str) -> str:
    """The incarnation token of a raw start-ticks number."""
    return f"ticks-{int(raw)}"


def stat_facts(pid: int) -> StatFacts | None:
    """State, parent, group and start of ``pid``, or None when it cannot be read."""
    fields = stat_fields(pid)
    start = start_token(fields)
    # After comm: state(0) ppid(1) pgrp(2) ... starttime(19).
    if fields is None or start is None or not all(f.isdigit() for f in fields[1:3]):
        return None
    return StatFacts(
        pid=pid, state=fields[0], ppid=int(fields[1]), pgid=int(fields[2]), start=start
    )


def _environ_marker(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            data = handle.read(_ENVIRON_LIMIT)
    except OSError:
        return None
    if _MARKER_PREFIX not in data:
        return None
    for entry in data.split(b"\0"):
        if entry.startswith(_MARKER_PREFIX):
            return entry[len(_MARKER_PREFIX) :].decode("ascii", "replace")
    return None


def marker_of(pid: int) -> ExecMarker | None:
    """The exec marker in ``pid``'s environment (as it was at its last exec), if any."""
    text = _environ_marker(pid)
    return parse_marker(text) if text is not None else None


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def scan_markers() -> dict[int, ExecMarker]:
    """Every readable process carrying an exec marker, by pid (zombies left out)."""
    found: dict[int, ExecMarker] = {}
    for pid in _pids():
        marker = marker_of(pid)
        if marker is None:
            continue
        facts = stat_facts(pid)
        if facts is not None and facts.running:
            found[pid] = marker
    return found


def cgroup_of(pid: int) -> str | None:
    """The process's cgroup v2 path (``0::<path>`` in ``/proc/<pid>/cgroup``), or None."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("0::"):
                    return line[3:].rstrip("\n") or None
    except OSError:
        return None
    return None


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def dedicated_cgroup(server_pid: int, client_pid: int) -> str | None:
    """The server's cgroup v2 when it was given one of its own (``systemd-run --scope``, a
    delegated subtree): not the root, not its client's, and not one its client is in.
    Its processes are then part of the tree even after a setsid and a scrubbed environment.
    """
    mine, theirs = cgroup_of(server_pid), cgroup_of(client_pid)
    if mine is None or theirs is None or mine == "/" or _within(theirs, mine):
        return None
    return mine


def owner_uid(pid: int) -> int | None:
    """The uid that owns ``pid`` (its ``/proc`` directory), or None when it is gone."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def find_members(
    leader_pid: int,
    leader_start: str,
    *,
    uid: int | None = None,
    cgroup: str | None = None,
    markers: Mapping[int, ExecMarker] | None = None,
) -> list[Member]:
    """Live processes of the tree a wrapped server leads, the leader included while it lives.

    A member is in the leader's process group (its pgid can only name this tree while any
    process of the group exists, and it started no earlier than the leader), or carries
    the leader's exec marker (a child that moved to a group or session of its own), or
    lives in the server's ``cgroup`` (``dedicated_cgroup``) or below it. With ``uid``, only
    processes of that user count: a root daemon never stops another user's process on a
    wrapped server's behalf. Each member is still signalled on its own, through a verified
    pidfd (never ``cgroup.kill``, which would signal processes nobody checked).
    """
    leader_ticks = int(start_of(leader_start).removeprefix("ticks-"))
    members: list[Member] = []
    for pid in _pids() if markers is None else sorted(set(_pids()) | set(markers)):
        facts = stat_facts(pid)
        if facts is None or not facts.running:
            continue
        started = int(facts.start.removeprefix("ticks-"))
        if started < leader_ticks:
            continue
        ours = facts.pgid == leader_pid
        if not ours:
            marker = markers.get(pid) if markers is not None else marker_of(pid)
            ours = (
                marker is not None
                and marker.leader_pid == leader_pid
                and ticks(marker.leader_start) == start_of(leader_start)
            )
        if not ours and cgroup is not None:
            found = cgroup_of(pid)
            ours = found is not None and _within(found, cgroup)
        if ours and (uid is None or owner_uid(pid) == uid):
            # Named with its pidfd inode where the kernel has them, so a signal meant for
            # it can never reach a process that took its pid within the same clock tick.
            members.append(Member(pid=pid, start=incarnation(pid, facts.start)))
    return members


def signal_verified(member: Member, signum: int) -> bool:
    """Send ``signum`` to exactly the incarnation ``member`` names, through a pidfd opened
    and checked against its start time (and pidfd inode, where its token carries one) just
    now; False when it is gone or not that one."""
    if signum not in _SIGNALLABLE:
        raise ValueError(f"refusing to send signal {signum}")
    fd = pidfd_open(member.pid, expected_start_time=member.start)
    if fd is None:
        return False
    try:
        signal.pidfd_send_signal(fd, signum)
    except ProcessLookupError:
        return False
    except OSError:
        return False
    finally:
        close_pidfd(fd)
    return True


def duplicate_fd(pidfd: int, target_fd: int) -> int | None:
    """A duplicate of another process's descriptor (``pidfd_getfd``), or None when the
    kernel, the permissions (ptrace access) or the descriptor say no."""
    # Python has no os.pidfd_getfd; the syscall number is 438 on every architecture that
    # has it (it was added after the syscall tables were unified).
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = int(libc.syscall(438, pidfd, target_fd, 0))
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    os.set_inheritable(fd, False)
    return fd


@lru_cache(maxsize=4)
def _boot_time(boot_id: str) -> float | None:
    try:
        with open("/proc/stat", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def boot_time_epoch(boot_id: str) -> float | None:
    """When this boot began, in epoch seconds; read once per boot id, so a wall-clock step
    later in the daemon's life does not move the stamps derived from it."""
    return _boot_time(boot_id)


def start_epoch(start: str, boot_id: str) -> float | None:
    """A process's start in epoch seconds, from its start ticks and the boot time."""
    booted = boot_time_epoch(boot_id)
    if booted is None:
        return None
    try:
        per_second = os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return None
    return booted + int(start_of(start).removeprefix("ticks-")) / per_second


def client_argv(pid: int) -> list[str]:
    """A process's command line (empty when unreadable)."""
    return list(read_argv(pid) or ())
