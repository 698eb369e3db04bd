"""The reap actor's inbox: a plan, an apply against a plan token, the periodic rounds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actors.calls import Call
from actors.mailbox import Reply

__all__ = ["ReapInbox", "ReapTick", "SupersededTick"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapTick:
    """Run one periodic plan-then-apply round now (the timer sends it; tests too)."""

    reply: Reply[Mapping[str, Any]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SupersededTick:
    """Stop the superseded servers idle past ``stop_superseded_after_seconds`` now (the
    opt-in's timer sends it; tests too)."""

    reply: Reply[Mapping[str, Any]] | None = None


#: A plan, and an apply against a plan token, come as the ops' requests (``Call``): the
#: apply reaps the targets of the plan whose token it names if the plan of a census taken
#: now still has that token (compare-and-swap), and reads the grant again by the
#: profile's name just before the first signal.
ReapInbox = Call | ReapTick | SupersededTick
