"""The reap actor's inbox: a plan, an apply against a plan token, the periodic round."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actors.mailbox import Reply
from supervisor.policy.control.permissions import Profile

__all__ = ["ReapApplyRequest", "ReapInbox", "ReapPlanRequest", "ReapTick", "SupersededTick"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapPlanRequest:
    """The reap plan of a census taken now; signals nothing, writes nothing."""

    profile: Profile | None
    #: Also target the copies a live owner replaced (the user's word, never a default).
    include_superseded: bool = False
    reply: Reply[Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapApplyRequest:
    """Reap the targets of the plan whose token is ``plan_token``, if the plan of a census
    taken now still has that token (compare-and-swap); the grant is checked again by the
    profile's name just before the first signal."""

    profile: Profile | None
    plan_token: str
    #: Reap even past the mass guard, this once (the operator's audited decision).
    override_mass_guard: bool = False
    reply: Reply[Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapTick:
    """Run one periodic plan-then-apply round now (the timer sends it; tests too)."""

    reply: Reply[Mapping[str, Any]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SupersededTick:
    """Stop the superseded servers idle past ``stop_superseded_after_seconds`` now (the
    opt-in's timer sends it; tests too)."""

    reply: Reply[Mapping[str, Any]] | None = None


ReapInbox = ReapPlanRequest | ReapApplyRequest | ReapTick | SupersededTick
