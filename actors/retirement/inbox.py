"""The retirement actor's inbox: snapshot, plan, apply, the automatic round and fleet counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actors.mailbox import Reply
from actors.replies import (
    FleetCounts,
)
from supervisor.policy.control.permissions import Profile
from supervisor.policy.fleet.snapshot import ManifestEntry
from supervisor.wire import PlanQuery

__all__ = [
    "ApplyRequest",
    "AutoRetireTick",
    "FleetCountsQuery",
    "PlanRequest",
    "RetirementInbox",
    "SnapshotRequest",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotRequest:
    profile: Profile | None
    canonical_repository: str | None = None
    expected_manifest: tuple[ManifestEntry, ...] = ()
    expected_live_revision: str | None = None
    #: List every released, superseded and retired row too (reads all of history).
    include_history: bool = False
    reply: Reply[Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    profile: Profile | None
    canonical_repository: str | None = None
    #: What to list; ``None`` is the compact default.
    query: PlanQuery | None = None
    reply: Reply[Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyRequest:
    """Exactly one of ``registry_fingerprint`` (strict) or ``scope_fingerprint`` (scoped)."""

    profile: Profile | None
    registry_fingerprint: str | None
    scope_fingerprint: str | None
    candidate_fingerprint: str
    worker_identities: tuple[str, ...]
    canonical_repository: str | None = None
    #: Retire even past the mass guard, this once (the operator's audited decision).
    override_mass_guard: bool = False
    reply: Reply[Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoRetireTick:
    """Run one automatic plan-then-apply cycle now (tests drive it; the timer sends it too)."""

    reply: Reply[Mapping[str, Any]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetCountsQuery:
    """The fleet classified for the metrics gauges; needs no profile (counts only)."""

    reply: Reply[FleetCounts]


RetirementInbox = SnapshotRequest | PlanRequest | ApplyRequest | AutoRetireTick | FleetCountsQuery
