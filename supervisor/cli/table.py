"""A plain aligned table, the one every CLI rendering uses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["table"]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain aligned table, kubectl style: no borders, two spaces between columns."""
    cells = [
        [str(h).upper() for h in headers],
        *[["" if v is None else str(v) for v in r] for r in rows],
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )
