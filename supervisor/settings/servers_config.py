"""The ``[servers]`` table: what the daemon may do on its own to the servers live clients
hold (off by default: such servers are only reported), and the budgets of wrapped ones."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.policy.servers.budgets import Budget
from supervisor.settings.config_checks import NON_NEGATIVE, Invalid, setting

__all__ = ["ServersConfig", "budgets_check"]

_KEYS = ("memory_mb", "memory_hold_seconds", "idle_seconds")


def _number(pattern: str, key: str, value: Any, *, zero_ok: bool) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not zero_ok):
        bound = ">= 0" if zero_ok else "> 0"
        raise Invalid(f'tables of budgets whose "{pattern}".{key} is a number {bound}')
    return float(value)


def budgets_check(value: Any, _base: Path) -> tuple[Budget, ...]:
    """``[servers.budgets."NAME-OR-GLOB"]`` tables, each with ``memory_mb`` (and
    ``memory_hold_seconds``, 60 by default) or ``idle_seconds``, or both."""
    if not isinstance(value, dict):
        raise Invalid('tables of budgets, [servers.budgets."NAME-OR-GLOB"]')
    budgets = []
    for pattern, table in value.items():
        if not pattern or not isinstance(table, dict):
            raise Invalid(f'tables of budgets; "{pattern}" is not a table')
        unknown = sorted(set(table) - set(_KEYS))
        if unknown:
            raise Invalid(f'tables of budgets with only {", ".join(_KEYS)}; "{pattern}" has '
                          f"{', '.join(unknown)}")  # fmt: skip
        if "memory_mb" not in table and "idle_seconds" not in table:
            raise Invalid(f'tables of budgets; "{pattern}" sets neither memory_mb nor idle_seconds')
        memory = table.get("memory_mb")
        idle = table.get("idle_seconds")
        budgets.append(
            Budget(
                pattern=pattern,
                memory_bytes=None
                if memory is None
                else int(_number(pattern, "memory_mb", memory, zero_ok=False) * (1 << 20)),
                memory_hold_seconds=_number(
                    pattern, "memory_hold_seconds", table.get("memory_hold_seconds", 60.0),
                    zero_ok=True,
                ),
                idle_seconds=None if idle is None else _number(pattern, "idle_seconds", idle,
                                                                zero_ok=False),
            )
        )  # fmt: skip
    return tuple(budgets)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServersConfig:
    #: Stop a superseded copy (policy.servers.superseded) once it has been idle this long
    #: since its client started the newer copy; 0 turns it off.
    stop_superseded_after_seconds: float = setting(0.0, NON_NEGATIVE)
    #: Memory caps and idle limits of wrapped servers, per name or glob (none by default).
    budgets: tuple[Budget, ...] = setting((), budgets_check)
