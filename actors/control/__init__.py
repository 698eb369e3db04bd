"""Control-plane writes (sessions, items, leases, locks, links) inside the writer's transaction."""

from __future__ import annotations

__all__: list[str] = []
