"""Every message the actors exchange: one frozen dataclass each, one union per inbox."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from actors.mailbox import Reply
from actors.messages_control import (
    AllocateWork,
    AssignAndLease,
    CheckAssignment,
    ControlOp,
    ControlWrite,
    GetIncidentLinks,
    GetTerminalLock,
    HeartbeatLease,
    LinkOp,
    NamespaceHealthGate,
    RecordNamespaceHealth,
    ReleaseLease,
    SetTerminalLock,
    UpsertIncidentLink,
    UpsertSession,
    UpsertWorkItem,
)
from actors.messages_hosts import HostWrite, RenewHostLease, RetireHostRows
from supervisor.policy.control.permissions import Profile
from supervisor.policy.evidence import PidEvidence
from supervisor.policy.fast_init import fast_init
from supervisor.policy.fleet.snapshot import ManifestEntry
from supervisor.policy.retirement.apply_rules import TokenMode
from supervisor.policy.retirement.plan import ProtectedOwners
from supervisor.wire import PlanQuery

__all__ = [
    "AllocateWork",
    "AppendAudit",
    "ApplyOutcome",
    "ApplyRequest",
    "ApplyRetirement",
    "AssignAndLease",
    "AutoRetireTick",
    "BeatClaim",
    "CheckAssignment",
    "ControlOp",
    "ControlWrite",
    "ExpireLeases",
    "FleetCounts",
    "FleetCountsQuery",
    "GetIncidentLinks",
    "GetTerminalLock",
    "Heartbeat",
    "HeartbeatGroup",
    "HeartbeatInbox",
    "HeartbeatLease",
    "HeartbeatResult",
    "HeartbeatWrite",
    "HostWrite",
    "InsertRegistration",
    "LeaseOwners",
    "LeaseOwnersQuery",
    "LeaseWatchInbox",
    "LinkOp",
    "LivenessInbox",
    "LivenessStatus",
    "LivenessStatusQuery",
    "NamespaceHealthGate",
    "PlanRequest",
    "ProbeNow",
    "RecordNamespaceHealth",
    "Register",
    "RegisterResult",
    "Release",
    "ReleaseLease",
    "ReleaseRegistration",
    "RenewHostLease",
    "RetireHostRows",
    "RetirementInbox",
    "SetTerminalLock",
    "SnapshotRequest",
    "TouchHeartbeats",
    "UpsertIncidentLink",
    "UpsertLease",
    "UpsertSession",
    "UpsertWorkItem",
    "Verdict",
    "Watch",
    "WriteAck",
    "WriterInbox",
]

# --- results -----------------------------------------------------------------


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
class Verdict:
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
    verdicts: tuple[Verdict, ...]


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


# --- registry writer ------------------------------------------------------------


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatWrite:
    """One coalesced beat: the identity it claims and the stamp to record."""

    worker_identity: str
    pid: int
    generation_id: str
    fencing_epoch: int
    stamp: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InsertRegistration:
    row: Mapping[str, Any]
    reply: Reply[WriteAck]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TouchHeartbeats:
    beats: tuple[HeartbeatWrite, ...]
    #: One result per beat, in the order of ``beats``.
    reply: Reply[tuple[HeartbeatResult, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseRegistration:
    worker_identity: str
    pid: int
    generation_id: str
    fencing_epoch: int
    stamp: str
    reply: Reply[WriteAck]
    #: Written in the release's own transaction (the server guard's exit record), so the
    #: row never leaves ``active`` without the reason being on file.
    audit: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireLeases:
    now_stamp: str
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpsertLease:
    lease: Mapping[str, Any]
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendAudit:
    event: Mapping[str, Any]
    reply: Reply[WriteAck] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyRetirement:
    """Run the whole compare-and-swap apply in one writer transaction."""

    mode: TokenMode
    expected_token: str
    expected_candidate_fingerprint: str
    worker_identities: tuple[str, ...]
    canonical_repository: str | None
    retired_by: str
    #: Re-reads the caller's grant; returns a denial reason or ``None``. Called
    #: inside the transaction immediately before the first write, so revoking
    #: the grant mid-call still denies.
    recheck_grant: Callable[[], str | None]
    #: Builds the apply's audit event from its result. The writer appends it inside the
    #: apply's own transaction, so the trail records the retirements exactly when they
    #: commit, and an audit write that fails rolls them back.
    audit: Callable[[Mapping[str, Any]], Mapping[str, Any]]
    reply: Reply[ApplyOutcome]


#: Control-plane messages (messages_control.py) are part of the writer's inbox: every
#: lease grant is serialized with every other write, retirement applies included.
WriterInbox = (
    InsertRegistration
    | TouchHeartbeats
    | ReleaseRegistration
    | ExpireLeases
    | UpsertLease
    | AppendAudit
    | ApplyRetirement
    | ControlWrite
    | HostWrite
)

# --- heartbeat ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Register:
    """A worker asks to join; the supervisor fills identity and fencing itself."""

    pid: int
    claims: Mapping[str, Any]
    reply: Reply[RegisterResult]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    worker_identity: str
    pid: int
    generation_id: str
    fencing_epoch: int
    reply: Reply[HeartbeatResult]


class BeatClaim(Protocol):
    """What one heartbeat claims: the registration it names and its fencing."""

    @property
    def worker_identity(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def generation_id(self) -> str: ...
    @property
    def fencing_epoch(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatGroup:
    """Several beats with one answer slot (a pipelining peer's): each beat is still judged
    on its own claim, and the answer holds one result per claim, in order."""

    claims: tuple[BeatClaim, ...]
    reply: Reply[tuple[HeartbeatResult, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    worker_identity: str
    pid: int
    generation_id: str
    fencing_epoch: int
    reply: Reply[WriteAck]


HeartbeatInbox = Register | Heartbeat | HeartbeatGroup | Release

# --- liveness -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Watch:
    """Start watching a freshly registered process (pidfd where available)."""

    worker_identity: str
    pid: int
    start_time: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeNow:
    """Evidence for every distinct pid, as a probe of each made on receipt would give it.

    Fresh: never an old sweep's result. A pid whose exit watch (a pidfd opened on a
    verified start time) has not fired is answered from the watch, since a pidfd that is
    not readable names a process that has not exited, so still holds its pid, and the
    probe would find it running; the watch is checked when the request is handled. A pid
    missing from a complete /proc listing is dead. Anything unsure is probed, and what
    the probe cannot tell stays unknown. An exit a watch observed overrules a probe that
    still finds that same incarnation.

    Identity: where a pid's evidence equals the previous ProbeNow answer's for it, it is
    that same object, so ``is`` tells unchanged evidence from changed; a pid the previous
    answer lacked gets no promise. Receivers must not mutate the Mapping.
    """

    pids: tuple[int, ...]
    reply: Reply[Mapping[int, PidEvidence]]


@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessStatusQuery:
    reply: Reply[LivenessStatus]


LivenessInbox = Watch | ProbeNow | LivenessStatusQuery

# --- lease watch ----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseOwnersQuery:
    reply: Reply[LeaseOwners]


LeaseWatchInbox = LeaseOwnersQuery

# --- retirement -------------------------------------------------------------------


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
    reply: Reply[Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoRetireTick:
    """Run one automatic plan-then-apply cycle now (tests drive it; the timer sends it too)."""

    reply: Reply[Mapping[str, Any]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetCounts:
    """Registrations by (status, ownership_state, namespace), and how many are orphaned."""

    workers: Mapping[tuple[str, str, str], int]
    orphaned: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetCountsQuery:
    """The fleet classified for the metrics gauges; needs no profile (counts only)."""

    reply: Reply[FleetCounts]


RetirementInbox = SnapshotRequest | PlanRequest | ApplyRequest | AutoRetireTick | FleetCountsQuery
