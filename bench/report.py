"""Benchmark figures: one record per measured value, printed as a table and written as JSON."""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "Figure",
    "Op",
    "format_table",
    "machine_info",
    "percentile",
    "to_json",
    "write_json",
]

Op = Literal["<=", ">="]


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (``pct`` in 0..100) of a non-empty sequence."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """One measured value, its goal (if the issue sets one) and how it was obtained."""

    name: str
    label: str
    value: float
    unit: str
    goal: float | None = None
    op: Op | None = None
    #: Quick (smoke) runs use small sizes, so their values are never judged against goals.
    judged: bool = True
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def met(self) -> bool | None:
        if self.goal is None or self.op is None or not self.judged:
            return None
        if not math.isfinite(self.value):
            return False
        return self.value <= self.goal if self.op == "<=" else self.value >= self.goal

    def goal_text(self) -> str:
        if self.goal is None or self.op is None:
            return "-"
        return f"{self.op} {_number(self.goal)}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "value": self.value,
            "unit": self.unit,
            "goal": self.goal,
            "op": self.op,
            "judged": self.judged,
            "met": self.met,
            "detail": dict(self.detail),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Figure:
        """The inverse of ``as_dict`` (``met`` is derived, so it is not read back)."""
        op = data.get("op")
        if op not in (None, "<=", ">="):
            raise ValueError(f"figure {data.get('name')!r}: unknown op {op!r}")
        return cls(
            name=str(data["name"]),
            label=str(data["label"]),
            value=float(data["value"]),
            unit=str(data["unit"]),
            goal=None if data.get("goal") is None else float(data["goal"]),
            op=op,
            judged=bool(data.get("judged", True)),
            detail=dict(data.get("detail") or {}),
        )


def _number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def format_table(figures: Sequence[Figure]) -> str:
    """A fixed-width table: figure, value with unit, goal, met?."""
    header = ("figure", "value", "goal", "met?")
    rows = [
        (
            f.label,
            f"{_number(f.value)} {f.unit}",
            f.goal_text(),
            {True: "yes", False: "NO", None: "-"}[f.met],
        )
        for f in figures
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(4)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def machine_info() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def to_json(
    figures: Sequence[Figure], *, meta: Mapping[str, Any], errors: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "meta": dict(meta),
        "figures": [f.as_dict() for f in figures],
        "errors": dict(errors),
    }


def write_json(path: Path, document: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # allow_nan=False: a non-finite figure is a bug in the benchmark, not a value to ship.
    path.write_text(json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n")
