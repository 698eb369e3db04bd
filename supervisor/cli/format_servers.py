"""The host's MCP servers as the CLI shows them: one status line, the snapshot's tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.cli.table import table

__all__ = ["server_lines", "status_line"]

_MIB = 1 << 20
#: Servers named on the status line's idle list (``snapshot`` shows every one).
_IDLE_SHOWN = 8


def _mib(value: object) -> str:
    return f"{int(value) / _MIB:.1f} MiB" if isinstance(value, int) else "-"


def status_line(servers: Mapping[str, Any]) -> str | None:
    """``servers: 12 (wrapped 2, observed 10)  orphaned 3  duplicate groups 2 …``."""
    if not servers:
        return None
    if not servers.get("available", True):
        return f"mcp servers: unavailable ({servers.get('detail')})"
    kinds = servers.get("by_provenance") or {}
    spread = ", ".join(f"{k} {v}" for k, v in kinds.items())
    line = (
        f"mcp servers: {servers.get('servers', 0)} ({spread})  "
        f"orphaned {servers.get('orphaned', 0)}  "
        f"duplicate groups {servers.get('duplicate_groups', 0)} "
        f"(repeating {_mib(servers.get('repeated_bytes'))})  "
        f"memory {_mib(servers.get('memory_bytes'))}"
    )
    if servers.get("superseded"):
        line += f"  superseded {servers['superseded']} (reap plan --include superseded)"
    if not servers.get("enabled", True):
        line += "  (discovery sweeps off)"
    for state in (servers.get("budgets") or [])[:_IDLE_SHOWN]:
        line += "\n" + _budget_line(state)
    idle = servers.get("idle") or []
    if idle:
        shown = ", ".join(
            f"{s.get('pid')} {s.get('command', '').split(' ')[0].rsplit('/', 1)[-1]} "
            f"{_seconds(s.get('idle_seconds'))}"
            for s in idle[:_IDLE_SHOWN]
        )
        more = f" (+{len(idle) - _IDLE_SHOWN} more)" if len(idle) > _IDLE_SHOWN else ""
        line += f"\nidle, longest first: {shown}{more}"
    return line


def _budget_line(state: Mapping[str, Any]) -> str:
    """``budget mcp-*: pid 12 time 120.0 MiB of 500.0 MiB, idle 30s of 1.0h``."""
    budget = state.get("budget") or {}
    parts = []
    if budget.get("memory_bytes") is not None:
        over = state.get("over_seconds")
        held = f" (over for {_seconds(over)} of {_seconds(budget.get('memory_hold_seconds'))})"
        parts.append(f"{_mib(state.get('memory_bytes'))} of {_mib(budget['memory_bytes'])}"
                     + (held if over is not None else ""))  # fmt: skip
    if budget.get("idle_seconds") is not None:
        limit = _seconds(budget["idle_seconds"])
        parts.append(f"idle {_seconds(state.get('idle_seconds'))} of {limit}")
    due = f"  DUE: {state['due']}" if state.get("due") else ""
    pid = (state.get("process") or {}).get("pid")
    head = f"budget {budget.get('pattern')}: pid {pid} {state.get('name')}"
    return f"{head} " + ", ".join(parts) + due


def _seconds(value: object) -> str:
    """An idle time: ``?`` when the kernel's counters could not be read."""
    if not isinstance(value, int | float):
        return "?"
    if value >= 3600:
        return f"{value / 3600:.1f}h"
    return f"{value / 60:.1f}m" if value >= 60 else f"{value:.0f}s"


def _owner(server: Mapping[str, Any]) -> str:
    owner = server.get("owner")
    if not owner:
        return "-"
    alive = {True: "live", False: "gone", None: "?"}[owner.get("alive")]
    return f"{owner.get('name')} {owner.get('process', {}).get('pid')} ({alive})"


def server_lines(result: Mapping[str, Any]) -> list[str]:
    """The snapshot's servers and duplicate groups (nothing when it has none)."""
    servers: Sequence[Mapping[str, Any]] = result.get("mcp_servers") or []
    summary = result.get("mcp_server_summary")
    if not servers and (summary or {}).get("available", True):
        return []
    lines = []
    head = status_line(summary) if summary else None
    if head:
        lines += ["", head]
    if servers:
        rows = [
            (
                s.get("process", {}).get("pid"),
                s.get("provenance"),
                _owner(s),
                _mib(s.get("memory_bytes")),
                (s.get("usage") or {}).get("cpu_percent"),
                _seconds(s.get("idle_seconds")),
                len((s.get("usage") or {}).get("children") or ()),
                " ".join(s.get("command") or ())[:60],
            )
            for s in servers
        ]
        lines.append(
            table(["pid", "provenance", "owner", "memory", "cpu%", "idle", "kids", "command"], rows)
        )
    for item in result.get("mcp_server_superseded") or []:
        newer = item.get("newer") or {}
        lines.append(
            f"superseded: pid {item.get('pid')} {' '.join(item.get('command') or ())[:60]} "
            f"idle {_seconds(item.get('idle_seconds'))}, {_mib(item.get('memory_bytes'))}; "
            f"its owner runs a newer copy, pid {newer.get('pid')} ({newer.get('start')})"
        )
    for group in result.get("mcp_server_duplicates") or []:
        pids = ", ".join(str(ref.get("pid")) for ref in group.get("servers") or [])
        command = " ".join(group.get("command") or ())[:60]
        lines.append(
            f"duplicate: {command} in {group.get('cwd')} x{len(group.get('servers') or [])} "
            f"(pids {pids}) repeats {_mib(group.get('repeated_bytes'))}"
        )
    return lines
