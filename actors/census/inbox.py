"""The census actor's inbox: ask for the latest census of the host's MCP servers."""

from __future__ import annotations

from dataclasses import dataclass

from actors.mailbox import Reply
from supervisor.policy.servers.census import Census
from supervisor.policy.servers.view import CensusView

__all__ = ["CensusInbox", "ReportCensus", "TakeCensus"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TakeCensus:
    """Answer the census as of the latest sweep; ``fresh`` asks for a sweep first (the reap
    plan and apply want facts read now, not at the last sweep)."""

    fresh: bool = False
    reply: Reply[Census]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportCensus:
    """Answer the latest census with its counts, duplicates, rollups and history (what
    ``status``, ``snapshot``, the fleet page and ``/metrics`` show)."""

    fresh: bool = False
    reply: Reply[CensusView]


CensusInbox = TakeCensus | ReportCensus
