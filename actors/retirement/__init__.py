"""The retirement actor: snapshot, plan and apply, with their reads, gates and records."""

from __future__ import annotations

__all__: list[str] = []
