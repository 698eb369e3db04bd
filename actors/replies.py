"""Every actor's answers: one frozen dataclass each, sent back through a ``Reply``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.fast_init import fast_init
from supervisor.policy.retirement.plan import ProtectedOwners

__all__ = [
    "AdoptResult",
    "ApplyOutcome",
    "DeadChanges",
    "FleetCounts",
    "HeartbeatResult",
    "HostLeaseStatus",
    "LeaseOwners",
    "LivenessCounts",
    "LivenessStatus",
    "LivenessVerdict",
    "RegisterResult",
    "WriteAck",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteAck:
    """The writer's answer: ``ok`` only after the transaction committed."""

    ok: bool
    code: str = "ok"
    detail: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterResult:
    ok: bool
    code: str
    detail: str
    registration: Mapping[str, Any] = field(default_factory=dict)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResult:
    """``registration_not_active`` tells a worker to register again under a new identity."""

    ok: bool
    code: str
    detail: str
    worker_identity: str
    last_heartbeat_at: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessVerdict:
    """The liveness actor's standing opinion on one registration."""

    worker_identity: str
    pid: int
    state: str  # alive | dead | unknown
    evidence: PidEvidence
    observed_at: float  # monotonic seconds
    source: str  # sweep | pidfd | probe


@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessStatus:
    sweeps_completed: int
    watched_pids: int
    verdicts: tuple[LivenessVerdict, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessCounts:
    """``LivenessStatus`` without the verdicts: kept counts, cheap at any fleet size."""

    sweeps_completed: int
    watched_pids: int
    #: Standing verdicts by state (alive, dead, unknown).
    states: Mapping[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadChanges:
    """Which identities became (True) or stopped being (False) known dead since the take
    that returned the caller's cursor; ``complete``: every identity known dead now."""

    cursor: int
    changes: Mapping[str, bool]
    complete: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseOwners:
    """Active lease owners; ``readable`` False means nobody may rely on the empty set."""

    readable: bool
    owners: ProtectedOwners
    fingerprint: str
    active_lease_count: int
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyOutcome:
    """The writer's structured apply result (the retirement actor decorates it)."""

    result: Mapping[str, Any]
    #: The audit event was committed with the apply's transaction. False when no
    #: transaction committed (rolled back, or nothing was requested): the retirement
    #: actor then records the outcome in the trail itself.
    audited: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetCounts:
    """Registrations by (status, ownership_state, namespace), and how many are orphaned."""

    workers: Mapping[tuple[str, str, str], int]
    orphaned: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLeaseStatus:
    """What this supervisor knows of its own host lease."""

    host_id: str | None
    supervisor_id: str
    enabled: bool
    epoch: int = 0
    renewals: int = 0
    last_code: str = ""
    last_detail: str = ""
    #: How often another host declared this one dead (each time, workers re-register).
    declared_dead_count: int = 0
    declared_dead_by: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdoptResult:
    """``registered`` with the row's identity, or a refusal code and why."""

    ok: bool
    code: str
    detail: str = ""
    worker_identity: str | None = None
