"""Every operation declared once; the socket, MCP tools, CLI and permissions are built from it."""

from __future__ import annotations

__all__: list[str] = []
