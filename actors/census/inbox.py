"""The census actor's inbox: ask for the latest census of the host's MCP servers."""

from __future__ import annotations

from dataclasses import dataclass

from actors.mailbox import Reply
from supervisor.policy.servers.census import Census

__all__ = ["CensusInbox", "TakeCensus"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TakeCensus:
    """Answer the census as of the latest sweep; ``fresh`` asks for a sweep first (the reap
    plan and apply want facts read now, not at the last sweep)."""

    fresh: bool = False
    reply: Reply[Census]


CensusInbox = TakeCensus
