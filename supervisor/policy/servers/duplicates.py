"""Duplicate servers: the same command, arguments, directory and environment names run twice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from supervisor.policy.servers.census import ProcessRef, ServerRecord

__all__ = ["DuplicateGroup", "duplicate_groups", "memory_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DuplicateGroup:
    """Servers that run one thing, across clients and launches, and the memory they repeat."""

    command: tuple[str, ...]
    cwd: str | None
    env_keys: tuple[str, ...]
    servers: tuple[ProcessRef, ...]
    #: The owning clients' names, one per server in ``servers`` order (None: no owner known).
    clients: tuple[str | None, ...]
    memory_bytes: int
    #: What running one copy instead would free: the group's memory less its largest
    #: member's (servers whose memory is unknown count as nothing).
    repeated_bytes: int


def memory_of(server: ServerRecord) -> int:
    """A server tree's memory: PSS where the kernel gave it (shared pages split fairly
    between their users), else RSS, else 0."""
    usage = server.usage
    if usage.pss_bytes is not None:
        return usage.pss_bytes
    return usage.rss_bytes or 0


def duplicate_groups(servers: Sequence[ServerRecord]) -> tuple[DuplicateGroup, ...]:
    """Every key shared by two servers or more, largest repeated memory first (then by
    command), each group's servers by pid."""
    by_key: dict[tuple[tuple[str, ...], str | None, tuple[str, ...]], list[ServerRecord]] = {}
    for server in servers:
        by_key.setdefault(server.duplicate_key, []).append(server)
    groups = []
    for (command, cwd, env_keys), members in by_key.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda s: (s.process.pid, s.process.start))
        sizes = [memory_of(s) for s in members]
        groups.append(
            DuplicateGroup(
                command=command,
                cwd=cwd,
                env_keys=env_keys,
                servers=tuple(s.process for s in members),
                clients=tuple(s.owner.name if s.owner is not None else None for s in members),
                memory_bytes=sum(sizes),
                repeated_bytes=sum(sizes) - max(sizes),
            )
        )
    groups.sort(key=lambda g: (-g.repeated_bytes, g.command, g.cwd or "", g.env_keys))
    return tuple(groups)
