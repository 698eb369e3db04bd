"""The reap actor: plans and applies the reap of orphaned MCP server trees found by the census."""

from actors.reap.actor import ReapActor, ReapSettings
from actors.reap.inbox import ReapInbox, ReapTick

__all__ = ["ReapActor", "ReapInbox", "ReapSettings", "ReapTick"]
