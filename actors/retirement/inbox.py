"""The retirement actor's inbox: snapshot, plan, apply, the automatic round and fleet counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actors.calls import Call
from actors.mailbox import Reply
from actors.replies import (
    FleetCounts,
)

__all__ = ["AutoRetireTick", "FleetCountsQuery", "RetirementInbox"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoRetireTick:
    """Run one automatic plan-then-apply cycle now (tests drive it; the timer sends it too)."""

    reply: Reply[Mapping[str, Any]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetCountsQuery:
    """The fleet classified for the metrics gauges; needs no profile (counts only)."""

    reply: Reply[FleetCounts]


#: Snapshot, plan and apply come as the ops' requests (``Call``).
RetirementInbox = Call | AutoRetireTick | FleetCountsQuery
