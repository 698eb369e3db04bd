"""Retiring stale rows: the plain planner and its conjunction, tokens, apply rules, pages."""

from __future__ import annotations

__all__: list[str] = []
