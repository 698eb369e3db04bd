"""The MCP tools and their transports: stdio bridged to the daemon, and HTTP in the daemon."""

from __future__ import annotations

__all__: list[str] = []
