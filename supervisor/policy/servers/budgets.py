"""Budgets of wrapped servers: a memory cap held for a while, an idle limit, per name or glob.

Opt-in (``[servers.budgets."NAME-OR-GLOB"]``). A wrapped server is judged against the
budget its name label matches (an exact name before any glob, then globs in the order
written). It is due for a stop when its tree's RSS has stayed above the cap for the hold
time, or its tree has been idle at least the idle limit. Evidence that cannot be read (an
RSS or an idle time the kernel would not give) never makes a server due, and a gap in
the memory reads starts the hold again.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from supervisor.policy.servers.census import PROVENANCE_WRAPPED, ProcessRef, ServerRecord

__all__ = [
    "IDLE_BUDGET",
    "MEMORY_BUDGET",
    "Budget",
    "BudgetState",
    "budget_for",
    "judge_budgets",
]

#: The stop reasons (the audit's outcome of the server's exit).
MEMORY_BUDGET = "memory_budget"
IDLE_BUDGET = "idle_budget"


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """One ``[servers.budgets."PATTERN"]`` table."""

    pattern: str
    memory_bytes: int | None = None
    memory_hold_seconds: float = 60.0
    idle_seconds: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetState:
    """One wrapped server against its budget: how close it is, and whether it is due."""

    process: ProcessRef
    name: str
    budget: Budget
    memory_bytes: int | None
    #: Since when (the caller's clock) its RSS has been above the cap; None: it is not.
    over_since: float | None
    over_seconds: float | None
    idle_seconds: float | None
    #: ``MEMORY_BUDGET`` or ``IDLE_BUDGET`` when it is due for a stop, else None.
    due: str | None
    detail: str


def budget_for(name: str | None, budgets: Sequence[Budget]) -> Budget | None:
    """The budget a server named ``name`` falls under: its exact name first, then the
    first glob that matches, in the order written."""
    if name is None:
        return None
    for budget in budgets:
        if budget.pattern == name:
            return budget
    return next((b for b in budgets if fnmatch.fnmatchcase(name, b.pattern)), None)


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def judge_budgets(
    servers: Sequence[ServerRecord],
    budgets: Sequence[Budget],
    over_since: Mapping[ProcessRef, float],
    now: float,
) -> tuple[tuple[BudgetState, ...], dict[ProcessRef, float]]:
    """Each wrapped server under a budget, judged at ``now``; and the new over-the-cap
    times to keep for the next call (``over_since`` is the previous call's)."""
    states: list[BudgetState] = []
    kept: dict[ProcessRef, float] = {}
    for server in servers:
        if server.provenance != PROVENANCE_WRAPPED or not budgets:
            continue
        budget = budget_for(server.label, budgets)
        if budget is None or server.label is None:
            continue
        rss = server.usage.rss_bytes
        since: float | None = None
        if budget.memory_bytes is not None and rss is not None and rss > budget.memory_bytes:
            since = over_since.get(server.process, now)
            kept[server.process] = since
        over = None if since is None else now - since
        idle = server.idle_seconds
        due, detail = None, "within its budget"
        if budget.memory_bytes is not None and over is not None:
            detail = (
                f"RSS {_mib(rss or 0)} over the cap of {_mib(budget.memory_bytes)} for "
                f"{over:.0f} s (hold {budget.memory_hold_seconds:.0f} s)"
            )
            if over >= budget.memory_hold_seconds:
                due = MEMORY_BUDGET
        limit = budget.idle_seconds
        if due is None and limit is not None and idle is not None and idle >= limit:
            due = IDLE_BUDGET
            detail = f"idle {idle:.0f} s, at least the limit of {limit:.0f} s"
        states.append(
            BudgetState(
                process=server.process,
                name=server.label,
                budget=budget,
                memory_bytes=rss,
                over_since=since,
                over_seconds=over,
                idle_seconds=idle,
                due=due,
                detail=detail,
            )
        )
    return tuple(states), kept
