"""OS evidence: host identity, boot identity, process incarnation, pid liveness, exit events."""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import psutil

from supervisor.system.pidfd import incarnation
from supervisor.system.proc_listing import visible_pids
from supervisor.system.proc_stat import PPID_INDEX, exited, fields_after_comm, start_ticks
from supervisor.system.proc_stat import read_stat as _read_stat
from supervisor.system.proc_stat import valid_pid as _valid_pid

__all__ = [
    "LocalProbes",
    "ProbeBackend",
    "ProcessEvidence",
    "boot_id",
    "host_id",
    "identify_process",
    "parent_pid",
    "pid_alive",
    "probe_many",
    "probe_process",
    "process_cwd",
    "process_start_time",
    "start_token",
    "stat_fields",
]

# A plain bool rather than inline sys.platform checks: tests flip it to exercise the portable
# psutil path on Linux, and mypy would otherwise prune the non-Linux branches as unreachable.
_LINUX: bool = sys.platform.startswith("linux")

_T = TypeVar("_T")

_MACHINE_ID_PATHS: tuple[str, ...] = ("/etc/machine-id", "/var/lib/dbus/machine-id")
_BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True, slots=True)
class ProcessEvidence:
    """One observation of a pid: alive (True/False/None = cannot tell) and incarnation token.

    ``alive`` False with a start time is a zombie: that incarnation exited and is not reaped.
    """

    pid: int
    alive: bool | None
    start_time: str | None


# --- machine identity -------------------------------------------------------------------


def host_id(override: str | None = None) -> str | None:
    """Stable machine identity: the override, else hashed machine id, else node name, else None."""
    if override is not None and override.strip():
        return override.strip()
    for path in _MACHINE_ID_PATHS:
        try:
            with open(path, encoding="ascii", errors="replace") as handle:
                machine_id = handle.read().strip()
        except OSError:
            continue
        # systemd writes "uninitialized" during first boot; it is not an identity yet.
        if machine_id and machine_id != "uninitialized":
            # Hashed so the raw machine id (which some software treats as a secret) never
            # lands in the registry or in logs.
            digest = hashlib.sha256(machine_id.encode("utf-8")).hexdigest()
            return f"machine-{digest[:16]}"
    try:
        node = platform.node().strip()
    except OSError:
        node = ""
    return f"node-{node}" if node else None


def boot_id() -> str | None:
    """Identity of the current boot: the kernel's boot_id on Linux, a psutil token elsewhere."""
    if _LINUX:
        # No psutil fallback on Linux: mixing two token formats on one host would make the
        # same boot look like two different boots to anything comparing stored rows.
        try:
            with open(_BOOT_ID_PATH, encoding="ascii", errors="replace") as handle:
                value = handle.read().strip()
        except OSError:
            return None
        return value or None
    try:
        return f"boot-{int(psutil.boot_time())}"
    except (psutil.Error, OSError, ValueError, OverflowError):
        return None


# --- /proc/<pid>/stat reading (parsed in proc_stat.py) -------------------------------------


def _start_ticks_from_stat(text: str) -> str | None:
    """Start time (field 22, clock ticks since boot) of a /proc/<pid>/stat line as 'ticks-<n>'."""
    return start_ticks(fields_after_comm(text))


def stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` split after comm (state first, starttime at index 19), or None
    when it cannot be read or parsed."""
    try:
        return fields_after_comm(_read_stat(pid))
    except (OSError, ValueError):
        return None


def start_token(fields: list[str] | None) -> str | None:
    """The incarnation token (``ticks-<n>``) in fields from ``stat_fields``."""
    return start_ticks(fields)


def _ppid_from_stat(text: str) -> int | None:
    fields = fields_after_comm(text)
    if fields is None or len(fields) <= PPID_INDEX:
        return None
    raw = fields[PPID_INDEX]
    return int(raw) if raw.isdigit() else None


# --- per-process probes -----------------------------------------------------------------


def _stat_or_psutil(
    pid: int, from_stat: Callable[[str], _T | None], from_psutil: Callable[[psutil.Process], _T]
) -> _T | None:
    """One fact about pid: parsed from /proc/<pid>/stat on Linux, else asked of psutil;
    None when pid is invalid or the source cannot tell."""
    if not _valid_pid(pid):
        return None
    if _LINUX:
        try:
            return from_stat(_read_stat(pid))
        except (OSError, ValueError):
            return None
    try:
        return from_psutil(psutil.Process(pid))
    except (psutil.Error, OSError, ValueError, OverflowError):
        return None


def process_start_time(pid: int) -> str | None:
    """Incarnation token of pid that wall-clock steps cannot change, or None if unreadable."""
    return _stat_or_psutil(
        pid, _start_ticks_from_stat, lambda process: f"ctime-{process.create_time()!r}"
    )


def pid_alive(pid: int) -> bool | None:
    """True if pid exists (zombies included), False if it surely does not, None if unclear.

    Existence, not liveness: ``probe_process`` is what tells a zombie from a running process.
    """
    if not _valid_pid(pid):
        return None
    if os.name == "posix":
        try:
            # Signal 0 only checks existence and permission; a zombie still exists.
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except (OSError, OverflowError):
            # EPERM says "exists, not ours" unless a sandbox denies kill() wholesale; that
            # ambiguity is reported as "cannot tell".
            return None
        return True
    # Off POSIX os.kill(pid, 0) would terminate the process, so ask psutil instead.
    try:
        psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return False
    except (psutil.Error, OSError, ValueError, OverflowError):
        return None
    return True


def _probe_linux(pid: int) -> ProcessEvidence:
    try:
        text = _read_stat(pid)
    except OSError:
        # ENOENT is not proof of death: with /proc mounted hidepid=2 other users' processes
        # are invisible, so confirm with kill(2). Only real thread-group ids matter here; a
        # thread id also has a readable /proc/<tid>/stat and would be reported alive, which
        # errs on the safe side.
        return ProcessEvidence(pid=pid, alive=pid_alive(pid), start_time=None)
    # A successful read of the stat file proves existence at that instant, and the start
    # time and state in it belong to that same incarnation: liveness and incarnation in one
    # syscall. A zombie has exited and will never run again, however long its parent leaves
    # it unreaped, so it is dead; its start time still names the incarnation that died.
    fields = fields_after_comm(text)
    return ProcessEvidence(pid=pid, alive=not exited(fields), start_time=start_ticks(fields))


def _probe_portable(pid: int) -> ProcessEvidence:
    before = process_start_time(pid)
    alive = pid_alive(pid)
    if alive is False:
        return ProcessEvidence(pid=pid, alive=False, start_time=None)
    if before is None:
        return ProcessEvidence(pid=pid, alive=alive, start_time=None)
    zombie = _psutil_zombie(pid)
    # Re-read so the token and the liveness answer describe one incarnation: a pid reused
    # between the reads would otherwise pair a new process's liveness with an old start.
    after = process_start_time(pid)
    if after != before:
        return ProcessEvidence(pid=pid, alive=alive, start_time=None)
    return ProcessEvidence(pid=pid, alive=not zombie, start_time=before)


def _psutil_zombie(pid: int) -> bool:
    """psutil's word that pid has exited and awaits reaping; any doubt is 'not proven'."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except (psutil.Error, OSError, ValueError, OverflowError):
        return False


def probe_process(pid: int) -> ProcessEvidence:
    """Liveness and start time of pid, taken together so they describe one incarnation."""
    if not _valid_pid(pid):
        return ProcessEvidence(pid=pid, alive=None, start_time=None)
    if _LINUX:
        return _probe_linux(pid)
    return _probe_portable(pid)


def identify_process(pid: int) -> ProcessEvidence:
    """``probe_process``, its token naming the running process exactly where the kernel can.

    A live process's start gets the inode of its pidfd on kernels that give each process
    its own (see ``policy.incarnation``): one pidfd open more than a probe, so this is for
    registration and for settling an ambiguity, never for every pid of a sweep.
    """
    seen = probe_process(pid)
    if not _LINUX or not seen.alive or seen.start_time is None:
        return seen
    token = incarnation(pid, seen.start_time)
    if token == seen.start_time:
        return seen
    return ProcessEvidence(pid=pid, alive=True, start_time=token)


def probe_many(pids: Sequence[int]) -> list[ProcessEvidence]:
    """Probe a chunk of pids synchronously, in order; one stat read per live pid on Linux.

    Pids missing from one ``/proc`` listing are dead without a probe each: a
    failed open plus a failed kill per dead pid dominated large sweeps.
    """
    present = visible_pids() if _LINUX and len(pids) >= _LISTING_THRESHOLD else None
    if present is None:
        return [probe_process(pid) for pid in pids]
    return [
        probe_process(pid)
        if pid in present or not _valid_pid(pid)
        else ProcessEvidence(pid=pid, alive=False, start_time=None)
        for pid in pids
    ]


#: Below this many pids, probing each is cheaper than listing /proc.
_LISTING_THRESHOLD = 16


def parent_pid(pid: int) -> int | None:
    """Parent pid of pid, or None if it cannot be read."""
    ppid = _stat_or_psutil(pid, _ppid_from_stat, lambda process: process.ppid())
    return ppid if isinstance(ppid, int) else None


def process_cwd(pid: int) -> str | None:
    """Current working directory of pid, or None if it cannot be read."""
    if not _valid_pid(pid):
        return None
    try:
        cwd = psutil.Process(pid).cwd()
    except (psutil.Error, OSError, ValueError, OverflowError):
        return None
    # psutil answers "" for zombies on some platforms; that is not a directory.
    return cwd if isinstance(cwd, str) and cwd else None


# --- backend seam for the actors --------------------------------------------------------


class ProbeBackend(Protocol):
    """The synchronous probe surface the actors depend on; tests swap in a scripted double."""

    def host_id(self) -> str | None: ...

    def boot_id(self) -> str | None: ...

    def probe(self, pid: int) -> ProcessEvidence: ...

    def identify(self, pid: int) -> ProcessEvidence: ...

    def probe_many(self, pids: Sequence[int]) -> list[ProcessEvidence]: ...

    def parent_pid(self, pid: int) -> int | None: ...

    def process_cwd(self, pid: int) -> str | None: ...


class LocalProbes:
    """ProbeBackend over this machine's OS, with an optional configured host identity."""

    __slots__ = ("_boot_id", "_host_id", "_host_override")

    def __init__(self, host_override: str | None = None) -> None:
        self._host_override = host_override
        self._host_id: str | None = None
        self._boot_id: str | None = None

    def host_id(self) -> str | None:
        # Cached once known so one supervisor run never reports two identities; a None is
        # not cached, so a transient read failure does not stick.
        if self._host_id is None:
            self._host_id = host_id(self._host_override)
        return self._host_id

    def boot_id(self) -> str | None:
        # The boot cannot change under a running process; caching also shields the portable
        # psutil token from wall-clock steps after startup.
        if self._boot_id is None:
            self._boot_id = boot_id()
        return self._boot_id

    def probe(self, pid: int) -> ProcessEvidence:
        return probe_process(pid)

    def identify(self, pid: int) -> ProcessEvidence:
        return identify_process(pid)

    def probe_many(self, pids: Sequence[int]) -> list[ProcessEvidence]:
        return probe_many(pids)

    def parent_pid(self, pid: int) -> int | None:
        return parent_pid(pid)

    def process_cwd(self, pid: int) -> str | None:
        return process_cwd(pid)
