"""Fleet supervisor: registry, liveness, leases and fail-closed retirement for MCP workers."""
