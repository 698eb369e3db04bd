"""A stdio MCP server standing in for a Gitea namespace; FAKE_GITEA_MODE picks how it behaves."""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

MODE = os.environ.get("FAKE_GITEA_MODE", "ok")

server = MCPServer("fake-gitea", log_level="WARNING")

if MODE != "missing":

    @server.tool()
    def gitea_whoami() -> dict[str, str]:
        """Who the namespace is authenticated as."""
        if MODE == "error":
            raise ToolError("authentication failed")
        return {"login": os.environ.get("GITEA_MCP_PROFILE", "nobody")}


@server.tool()
def gitea_list_repos() -> list[str]:
    """Another tool, so a missing required tool is not an empty list."""
    return []


if __name__ == "__main__":
    if MODE == "eof":
        # Exit before answering anything: the client reads end of file.
        sys.exit(0)
    anyio.run(server.run_stdio_async)
