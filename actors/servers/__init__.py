"""The server guard: watches wrapped MCP servers and their clients, stops orphaned trees."""

from actors.servers.guard import ServerGuard, ServerGuardSettings
from actors.servers.inbox import AdoptServer, ServerGuardInbox

__all__ = ["AdoptServer", "ServerGuard", "ServerGuardInbox", "ServerGuardSettings"]
