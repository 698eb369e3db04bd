"""SQLite backend: the store, its connections, transactions and caches."""

from __future__ import annotations

__all__: list[str] = []
