"""Every MCP server on the host, wrapped or observed: the census, its duplicates, the reap plan."""
