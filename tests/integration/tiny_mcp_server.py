"""An unmodified stdio MCP server used to prove ``exec`` passes MCP traffic through untouched."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("tiny", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    anyio.run(server.run_stdio_async)
