"""The reap actor: plans and applies the reap of orphaned MCP server trees found by the census."""

from actors.reap.actor import ReapActor, ReapSettings
from actors.reap.inbox import ReapApplyRequest, ReapInbox, ReapPlanRequest, ReapTick

__all__ = [
    "ReapActor",
    "ReapApplyRequest",
    "ReapInbox",
    "ReapPlanRequest",
    "ReapSettings",
    "ReapTick",
]
