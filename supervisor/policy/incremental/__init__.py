"""Plan speed only: memo and plan state wrapping the plain planner, held equal to it."""

from __future__ import annotations

__all__: list[str] = []
