"""What discovery keeps of one server between sweeps, first seen or restored from its row."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from actors.census.sighting import Wire, stdio_wire
from supervisor.policy.identity.exec_marker import parse_marker
from supervisor.policy.servers.census import (
    PROVENANCE_OBSERVED,
    PROVENANCE_WRAPPED,
    OwnerClient,
    ProcessRef,
    ServerRecord,
    Usage,
)
from supervisor.policy.servers.discovery import UNKNOWN_OWNER, Judgement, plain_argv
from supervisor.system.proc_reads import (
    NULL_DEVICE,
    FullRead,
    clock_ticks,
    fd_ends,
    read_argv,
    read_full,
    stdio_link,
)
from supervisor.system.unix_diag import UnixPeers

__all__ = [
    "NO_USAGE",
    "SURVIVED_LEADER",
    "Tracked",
    "first_record",
    "judged_server",
    "owner_client",
    "reread",
    "restored",
    "started_seconds",
    "survivor",
    "wire_now",
    "wrapped_owner",
]

#: Evidence of a survivor: the server it was a member of had this leader, now gone.
SURVIVED_LEADER = "survived_server_leader"

NO_USAGE = Usage(rss_bytes=None, pss_bytes=None, cpu_seconds=None, cpu_percent=None, open_fds=None)


@dataclass(slots=True, kw_only=True)
class Tracked:
    """One server leader as discovery keeps it between sweeps: the census record as of the
    latest read, and what the next read and the next write need."""

    server: ServerRecord
    #: The descriptors that carry its stdio (fd 0 and fd 1, or a moved stdio's wire).
    stdio: Wire
    started_at: float | None = None
    cpu_ticks: int | None = None
    read_at: float | None = None
    #: The tree's PSS at ``pss_at`` (read in a worker thread, at most every so often).
    pss: int | None = None
    pss_at: float | None = None
    owner_gone_at: str | None = None
    #: Monotonic time of the last row written for it (observed servers only).
    written_at: float | None = None
    #: Its row has ``owner_gone_at``.
    owner_gone_written: bool = False
    #: The tree's I/O counters at the latest read, and the monotonic time since which
    #: they have not moved (the read that saw them move, or the first read); None
    #: while they cannot be read.
    io_bytes: int | None = None
    quiet_since: float | None = None
    #: ``quiet_since`` in seconds after boot (None when the boot clock was not read).
    quiet_since_boot: float | None = None
    #: The tree's members by the parent links discovery saw, taken when its leader went:
    #: a child the first-sight pass saw, whose leader exited before any tree was read.
    members_seen: tuple[ProcessRef, ...] = ()
    #: A survivor's: the stdio its server's first leader had (empty: not seen).
    leader_wire: Wire = ()

    def saw_io(self, io_bytes: int | None, now: float, uptime: float | None = None) -> None:
        """Take one read of the tree's counters (``now``: the read's monotonic time,
        ``uptime``: the same moment in seconds after boot)."""
        if io_bytes is None:
            # Unknown again: never carried over a gap.
            self.quiet_since = self.quiet_since_boot = None
        elif self.io_bytes is None or io_bytes != self.io_bytes or self.quiet_since is None:
            self.quiet_since, self.quiet_since_boot = now, uptime
        self.io_bytes = io_bytes

    @property
    def process(self) -> ProcessRef:
        return self.server.process

    @property
    def provenance(self) -> str:
        return self.server.provenance

    def record(self, uptime: float | None, now: float | None = None) -> ServerRecord:
        age = idle = None
        if uptime is not None and self.started_at is not None:
            age = round(max(0.0, uptime - self.started_at), 1)
        if now is not None and self.quiet_since is not None:
            # Down to a tenth, never up: an idle time is a lower bound, decisions use it.
            idle = math.floor(max(0.0, now - self.quiet_since) * 10) / 10
        return replace(
            self.server,
            age_seconds=age,
            idle_seconds=idle,
            started_since_boot=self.started_at,
            quiet_since_boot=self.quiet_since_boot if idle is not None else None,
        )


def wrapped_owner(full: FullRead) -> tuple[ProcessRef | None, str | None]:
    """The client a wrapped server's exec marker names (pid and start), and its name."""
    marker = parse_marker(full.marker) if full.marker is not None else None
    if marker is None or not marker.client_start.isdigit():
        return None, None
    owner = ProcessRef(pid=marker.client_pid, start=f"ticks-{int(marker.client_start)}")
    return owner, marker.client or UNKNOWN_OWNER


def started_seconds(start: str) -> float | None:
    """When a process started, in seconds after boot, from its start token."""
    raw = start.removeprefix("ticks-").partition("@")[0]
    return int(raw) / clock_ticks() if raw.isdigit() else None


def owner_client(owner: ProcessRef | None, name: str | None) -> OwnerClient | None:
    if owner is None:
        return None
    return OwnerClient(process=owner, name=name or UNKNOWN_OWNER, alive=None)


def wire_now(pid: int, owner: ProcessRef | None, peers: UnixPeers) -> Wire:
    """A restored server's stdio as it is now (``stdio_wire`` with its recorded owner's
    descriptors; a moved stdio none of whose ends it holds: unknown, so kept)."""
    stdin = stdio_link(pid, 0)
    # The owner's descriptors are read only for a moved stdio: fd 0 and fd 1 need none.
    ends = fd_ends(owner.pid) if owner is not None and stdin == NULL_DEVICE else None
    return stdio_wire(pid, stdin, stdio_link(pid, 1), ends, peers)


def restored(pid: int, start: str, row: Mapping[str, Any], peers: UnixPeers) -> Tracked:
    """A server an earlier run recorded, as it recorded it (its owner: the parent then)."""
    owner = None
    if row.get("owner_pid") is not None and row.get("owner_start_time"):
        owner = ProcessRef(pid=int(row["owner_pid"]), start=str(row["owner_start_time"]))
    server = ServerRecord(
        process=ProcessRef(pid=pid, start=start),
        provenance=str(row["provenance"]),
        command=tuple(row["command"]),
        cwd=row.get("cwd"),
        env_keys=tuple(row["env_keys"]),
        uid=row.get("uid"),
        owner=owner_client(owner, row.get("owner_name")),
        evidence=tuple(row["evidence"]),
        first_seen=str(row["first_seen"]),
        age_seconds=None,
        usage=NO_USAGE,
    )
    return Tracked(
        server=server,
        stdio=wire_now(pid, owner, peers),
        started_at=started_seconds(start),
        owner_gone_at=row.get("owner_gone_at"),
    )


def first_record(
    process: ProcessRef,
    full: FullRead,
    *,
    provenance: str,
    owner: OwnerClient | None,
    evidence: tuple[str, ...],
    stamp: str,
) -> ServerRecord:
    """The census record of a server at its first sight: what its full read says, before
    any usage is measured."""
    return ServerRecord(
        process=process,
        provenance=provenance,
        command=plain_argv(full.argv),
        cwd=full.cwd,
        env_keys=full.env_keys,
        uid=full.uid,
        owner=owner,
        evidence=evidence,
        first_seen=stamp,
        age_seconds=None,
        usage=NO_USAGE,
        label=_label(full) if provenance == PROVENANCE_WRAPPED else None,
    )


def _label(full: FullRead) -> str | None:
    marker = parse_marker(full.marker) if full.marker is not None else None
    return marker.name if marker is not None and marker.name else None


def reread(server: Tracked, *, if_command_moved: bool = False) -> None:
    """What a server runs now, after an exec since its first sight (``sh -c`` exec'ing
    ``node``): its command, directory and environment names, which duplicates and
    replaced copies are told by. Its judgement stands; a change is written again.

    ``if_command_moved``: only when its command line is not the recorded one. Every sweep
    asks this of every server (one read each), so an exec that no kernel event reported
    (no process events without ``CAP_NET_ADMIN``, nor outside the first network
    namespace) is seen at the next sweep."""
    if if_command_moved:
        argv = read_argv(server.process.pid)
        if not argv or plain_argv(argv) == server.server.command:
            return  # as recorded, or unreadable (gone, a zombie): nothing to take
    full = read_full(server.process.pid)
    if full is None or full.stat.start != server.process.start or not full.argv:
        return  # gone (a zombie has no command line), or another process under its pid
    label = _label(full) if server.provenance == PROVENANCE_WRAPPED else None
    record = replace(
        server.server,
        command=plain_argv(full.argv),
        cwd=full.cwd,
        env_keys=full.env_keys,
        label=label or server.server.label,
    )
    if record != server.server:
        server.server, server.written_at = record, None


def judged_server(
    process: ProcessRef, full: FullRead, judged: Judgement, stamp: str, wire: Wire
) -> Tracked:
    """A server as discovery's verdict took it (a wrapped one owned by its marker's client)."""
    owner, name = judged.owner, judged.owner_name
    if judged.provenance == PROVENANCE_WRAPPED:
        owner, name = wrapped_owner(full)
    server = first_record(
        process,
        full,
        provenance=judged.provenance,
        owner=owner_client(owner, name),
        evidence=judged.evidence,
        stamp=stamp,
    )
    return Tracked(server=server, stdio=wire, started_at=started_seconds(process.start))


def survivor(
    process: ProcessRef, full: FullRead, gone: Tracked, stamp: str, peers: UnixPeers
) -> Tracked:
    """What is left of an observed server whose leader is gone: one topmost member of its
    tree, owned by the server's owner, on the server's evidence and the leader's exit."""
    owner = gone.server.owner
    server = first_record(
        process,
        full,
        provenance=PROVENANCE_OBSERVED,
        owner=owner,
        evidence=(*gone.server.evidence, f"{SURVIVED_LEADER}:{gone.process.pid}"),
        stamp=stamp,
    )
    return Tracked(
        server=server,
        stdio=wire_now(process.pid, owner.process if owner is not None else None, peers),
        started_at=started_seconds(process.start),
        owner_gone_at=gone.owner_gone_at,
        leader_wire=gone.leader_wire or gone.stdio,
    )
