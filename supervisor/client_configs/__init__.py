"""MCP clients' own configuration files: find them, wrap their servers in ``exec``, undo it."""

from __future__ import annotations

__all__: list[str] = []
