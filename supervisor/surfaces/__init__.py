"""Request surfaces (local socket, MCP tools) that turn requests into actor messages."""
