"""What the census adds up to: per client launch, per command, orphans, duplicates, memory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from supervisor.policy.servers.budgets import BudgetState
from supervisor.policy.servers.census import (
    PROVENANCE_OBSERVED,
    PROVENANCE_WRAPPED,
    Census,
    ServerRecord,
)
from supervisor.policy.servers.duplicates import DuplicateGroup, duplicate_groups, memory_of

__all__ = [
    "NO_OWNER",
    "CensusSummary",
    "HistoryPoint",
    "IdleServer",
    "Rollup",
    "by_client_launch",
    "by_command",
    "command_label",
    "cpu_percent",
    "history_point",
    "idle_servers",
    "is_orphaned",
    "summarize",
]

#: The client name of servers whose owner is not known.
NO_OWNER = "none"
_LABEL_LIMIT = 120


@dataclass(frozen=True, slots=True, kw_only=True)
class Rollup:
    """Servers that share one key (a client launch, a command), and what they hold."""

    key: str
    servers: int
    memory_bytes: int
    cpu_seconds: float
    #: Sum of the servers' recent CPU% (those with a figure yet).
    cpu_percent: float


@dataclass(frozen=True, slots=True, kw_only=True)
class CensusSummary:
    """The census in counts: what ``status``, ``/metrics`` and the history ring keep."""

    servers: int
    by_provenance: dict[str, int]
    orphaned: int
    duplicate_groups: int
    repeated_bytes: int
    memory_bytes: int
    memory_by_client: dict[str, int] = field(default_factory=dict)
    #: Every server's idle time, longest first; those whose counters cannot be read last.
    idle: tuple[IdleServer, ...] = ()
    #: Older copies a live client replaced and no longer uses (policy.servers.superseded).
    superseded: int = 0
    #: Each wrapped server under a ``[servers.budgets]`` budget, and how close it is.
    budgets: tuple[BudgetState, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleServer:
    """How long one server's tree has done no I/O, at least (None: cannot be told)."""

    pid: int
    client: str
    command: str
    idle_seconds: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryPoint:
    """One sweep's counts, for the page's chart over time."""

    at: str
    servers: int
    orphaned: int
    duplicate_groups: int
    memory_bytes: int


def is_orphaned(server: ServerRecord) -> bool:
    """Its owner client is known to be gone (by pid and start, never by its parent pid),
    or nobody can talk to it: with no owner recorded, the other ends of its stdio are
    released (a leak from before the supervisor ran), or, what survived a server's
    leader, it is out of its running owner's reach."""
    owner = server.owner
    if owner is None:
        return server.stdio_abandoned is True
    unreachable = owner.alive is True and owner.stdio_open is None
    return owner.alive is False or (unreachable and server.stdio_abandoned is True)


def cpu_percent(before: float | None, after: float | None, elapsed: float) -> float | None:
    """CPU use between two reads of one incarnation, in percent of one core."""
    if before is None or after is None or elapsed <= 0 or after < before:
        return None
    return round(100.0 * (after - before) / elapsed, 1)


def command_label(command: Sequence[str]) -> str:
    """A command line as one short line (charts and tables)."""
    text = " ".join(command)
    return text if len(text) <= _LABEL_LIMIT else text[: _LABEL_LIMIT - 1] + "…"


def _client_name(server: ServerRecord) -> str:
    return server.owner.name if server.owner is not None else NO_OWNER


def _rollups(servers: Sequence[ServerRecord], key: Callable[[ServerRecord], str]) -> list[Rollup]:
    grouped: dict[str, list[ServerRecord]] = {}
    for server in servers:
        grouped.setdefault(key(server), []).append(server)
    rollups = [
        Rollup(
            key=name,
            servers=len(members),
            memory_bytes=sum(memory_of(s) for s in members),
            cpu_seconds=round(sum(s.usage.cpu_seconds or 0.0 for s in members), 2),
            cpu_percent=round(sum(s.usage.cpu_percent or 0.0 for s in members), 1),
        )
        for name, members in grouped.items()
    ]
    rollups.sort(key=lambda r: (-r.memory_bytes, r.key))
    return rollups


def by_client_launch(servers: Sequence[ServerRecord]) -> list[Rollup]:
    """One rollup per client launch (name, pid and start), largest memory first."""

    def launch(server: ServerRecord) -> str:
        owner = server.owner
        if owner is None:
            return NO_OWNER
        return f"{owner.name} pid {owner.process.pid} ({owner.process.start})"

    return _rollups(servers, launch)


def by_command(servers: Sequence[ServerRecord]) -> list[Rollup]:
    """One rollup per server command line, largest memory first."""
    return _rollups(servers, lambda s: command_label(s.command))


def summarize(census: Census, groups: Sequence[DuplicateGroup] | None = None) -> CensusSummary:
    """Counts and memory of one census (``groups``: its duplicates, if already grouped)."""
    servers = census.servers
    groups = duplicate_groups(servers) if groups is None else groups
    by_provenance = {PROVENANCE_WRAPPED: 0, PROVENANCE_OBSERVED: 0}
    memory_by_client: dict[str, int] = {}
    for server in servers:
        by_provenance[server.provenance] = by_provenance.get(server.provenance, 0) + 1
        name = _client_name(server)
        memory_by_client[name] = memory_by_client.get(name, 0) + memory_of(server)
    return CensusSummary(
        servers=len(servers),
        by_provenance=by_provenance,
        orphaned=sum(1 for s in servers if is_orphaned(s)),
        duplicate_groups=len(groups),
        repeated_bytes=sum(g.repeated_bytes for g in groups),
        memory_bytes=sum(memory_of(s) for s in servers),
        memory_by_client=dict(sorted(memory_by_client.items())),
        idle=idle_servers(servers),
    )


def idle_servers(servers: Sequence[ServerRecord]) -> tuple[IdleServer, ...]:
    """Each server's idle time, longest first, then the unknown ones by pid."""
    rows = [
        IdleServer(
            pid=s.process.pid,
            client=_client_name(s),
            command=command_label(s.command[:2]),
            idle_seconds=s.idle_seconds,
        )
        for s in servers
    ]
    known = sorted((r for r in rows if r.idle_seconds is not None),
                   key=lambda r: (-(r.idle_seconds or 0.0), r.pid))  # fmt: skip
    return (*known, *sorted((r for r in rows if r.idle_seconds is None), key=lambda r: r.pid))


def history_point(summary: CensusSummary, at: str) -> HistoryPoint:
    return HistoryPoint(
        at=at,
        servers=summary.servers,
        orphaned=summary.orphaned,
        duplicate_groups=summary.duplicate_groups,
        memory_bytes=summary.memory_bytes,
    )
