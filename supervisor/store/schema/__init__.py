"""Registry schema: tables, columns and the versioned migrations of both backends."""

from __future__ import annotations

__all__: list[str] = []
