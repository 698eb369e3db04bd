"""The server guard: watches wrapped MCP servers and their clients, stops orphaned trees."""

from actors.server_guard.actor import ServerGuard, ServerGuardSettings
from actors.server_guard.inbox import AdoptServer, ServerGuardInbox

__all__ = ["AdoptServer", "ServerGuard", "ServerGuardInbox", "ServerGuardSettings"]
