"""The server guard: watches wrapped MCP servers and their clients, stops orphaned trees."""

from actors.servers.guard import ServerGuard, ServerGuardSettings
from actors.servers.messages import AdoptResult, AdoptServer, ServerGuardInbox

__all__ = ["AdoptResult", "AdoptServer", "ServerGuard", "ServerGuardInbox", "ServerGuardSettings"]
