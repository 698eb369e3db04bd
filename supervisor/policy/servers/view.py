"""The census as surfaces show it: servers, counts, duplicates, rollups and the history ring."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from supervisor.policy.servers.budgets import BudgetState
from supervisor.policy.servers.census import Census
from supervisor.policy.servers.duplicates import DuplicateGroup, duplicate_groups, memory_of
from supervisor.policy.servers.summary import (
    CensusSummary,
    HistoryPoint,
    Rollup,
    by_client_launch,
    by_command,
    is_orphaned,
    summarize,
)
from supervisor.policy.servers.superseded import Superseded, superseded

__all__ = [
    "CensusView",
    "census_view",
    "snapshot_part",
    "summary_dict",
    "superseded_dict",
    "view_dict",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CensusView:
    """Everything the surfaces show of the host's MCP servers at the latest sweep."""

    enabled: bool
    sweeps: int
    census: Census
    summary: CensusSummary
    duplicates: tuple[DuplicateGroup, ...]
    by_client: tuple[Rollup, ...]
    by_command: tuple[Rollup, ...]
    history: tuple[HistoryPoint, ...]
    #: Older copies a live client replaced and no longer uses (reported, never stopped
    #: by default).
    superseded: tuple[Superseded, ...] = ()


def census_view(
    census: Census,
    *,
    enabled: bool,
    sweeps: int,
    history: Sequence[HistoryPoint] = (),
    budgets: Sequence[BudgetState] = (),
) -> CensusView:
    groups = duplicate_groups(census.servers)
    replaced = superseded(census.servers)
    return CensusView(
        enabled=enabled,
        sweeps=sweeps,
        census=census,
        summary=replace(
            summarize(census, groups), superseded=len(replaced), budgets=tuple(budgets)
        ),
        duplicates=groups,
        by_client=tuple(by_client_launch(census.servers)),
        by_command=tuple(by_command(census.servers)),
        history=tuple(history),
        superseded=replaced,
    )


def summary_dict(view: CensusView) -> dict[str, Any]:
    """The counts (``status``, and the head of every other rendering)."""
    return {"enabled": view.enabled, "sweeps": view.sweeps, **asdict(view.summary)}


def _servers(view: CensusView) -> list[dict[str, Any]]:
    replaced = {s.server.process.pid: s for s in view.superseded}
    servers = []
    for server in view.census.servers:
        row = asdict(server)
        row["memory_bytes"] = memory_of(server)
        row["orphaned"] = is_orphaned(server)
        found = replaced.get(server.process.pid)
        row["superseded_by"] = None if found is None else _newer(found)
        servers.append(row)
    return servers


def _newer(found: Superseded) -> dict[str, Any]:
    return {**asdict(found.newer), "started_since_boot": found.newer_started_since_boot}


def superseded_dict(found: Superseded) -> dict[str, Any]:
    """One superseded server's evidence as JSON values."""
    return {
        "pid": found.server.process.pid,
        "start": found.server.process.start,
        "command": list(found.server.command),
        "owner": asdict(found.server.owner) if found.server.owner is not None else None,
        "newer": _newer(found),
        "quiet_since_boot": found.quiet_since_boot,
        "idle_seconds": found.idle_seconds,
        "memory_bytes": found.memory_bytes,
    }


def view_dict(view: CensusView) -> dict[str, Any]:
    """The whole view as plain JSON values (the fleet page)."""
    return {
        **summary_dict(view),
        "servers": _servers(view),
        "duplicates": [asdict(g) for g in view.duplicates],
        "superseded": [superseded_dict(s) for s in view.superseded],
        "by_client": [asdict(r) for r in view.by_client],
        "by_command": [asdict(r) for r in view.by_command],
        "history": [asdict(p) for p in view.history],
    }


def snapshot_part(view: CensusView) -> dict[str, Any]:
    """What a fleet snapshot adds: the counts, and the servers and duplicate groups as
    top-level lists (an MCP answer that is too long cuts those first)."""
    return {
        "mcp_server_summary": summary_dict(view),
        "mcp_servers": _servers(view),
        "mcp_server_duplicates": [asdict(g) for g in view.duplicates],
        "mcp_server_superseded": [superseded_dict(s) for s in view.superseded],
    }
