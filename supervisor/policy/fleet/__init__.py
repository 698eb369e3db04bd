"""The fleet as it is: per-row liveness and views, findings, the snapshot, orphaned workers."""

from __future__ import annotations

__all__: list[str] = []
