"""PostgreSQL backend: the store, its connection, transactions and history."""

from __future__ import annotations

__all__: list[str] = []
