"""Each operation's request type, made from its declaration (generated; do not edit):
what every surface parses into, what the handle's one ``call`` takes and what the actor
reads."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from supervisor.operations.spec import Request
from supervisor.policy.fast_init import fast_init

__all__ = [
    "REQUEST_TYPES",
    "AllocateRequest",
    "ApplyRequest",
    "AssignRequest",
    "AssignmentCheckRequest",
    "HeartbeatRequest",
    "HostApplyRequest",
    "HostPlanRequest",
    "HostStatusRequest",
    "IncidentLinkGetRequest",
    "IncidentLinkUpsertRequest",
    "LeaseHeartbeatRequest",
    "LeaseReleaseRequest",
    "NamespaceHealthAssessRequest",
    "NamespaceHealthGateRequest",
    "PlanRequest",
    "ReapApplyRequest",
    "ReapPlanRequest",
    "RegisterRequest",
    "ReleaseRequest",
    "SessionUpsertRequest",
    "SnapshotRequest",
    "StatusRequest",
    "TerminalLockGetRequest",
    "TerminalLockSetRequest",
    "WorkItemUpsertRequest",
]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterRequest(Request):
    """The arguments of ``register`` (``register``)."""

    op: ClassVar[str] = "register"
    alias: ClassVar[str] = "register"
    pid: int | None = None
    claims: Mapping[str, Any] | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest(Request):
    """The arguments of ``heartbeat`` (``heartbeat``)."""

    op: ClassVar[str] = "heartbeat"
    alias: ClassVar[str] = "heartbeat"
    fencing_epoch: int
    worker_identity: str
    pid: int
    generation_id: str


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseRequest(Request):
    """The arguments of ``release`` (``release``)."""

    op: ClassVar[str] = "release"
    alias: ClassVar[str] = "release"
    fencing_epoch: int
    worker_identity: str
    pid: int
    generation_id: str


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class StatusRequest(Request):
    """The arguments of ``status`` (``status_report``)."""

    op: ClassVar[str] = "status"
    alias: ClassVar[str] = "status"


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotRequest(Request):
    """The arguments of ``snapshot`` (``snapshot``)."""

    op: ClassVar[str] = "snapshot"
    alias: ClassVar[str] = "gitea_snapshot_instance_fleet"
    canonical_repository: str | None = None
    expected_manifest: Sequence[Any] | None = None
    expected_live_revision: str | None = None
    include_history: bool | None = False


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest(Request):
    """The arguments of ``plan`` (``plan``)."""

    op: ClassVar[str] = "plan"
    alias: ClassVar[str] = "gitea_plan_stale_worker_retirement"
    canonical_repository: str | None = None
    full: bool | None = False
    reason: str | None = None
    namespace: str | None = None
    instance: str | None = None
    limit: int | None = None
    cursor: str | None = None
    examples: int | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyRequest(Request):
    """The arguments of ``apply`` (``apply``)."""

    op: ClassVar[str] = "apply"
    alias: ClassVar[str] = "gitea_apply_stale_worker_retirement"
    registry_fingerprint: str | None = None
    scope_fingerprint: str | None = None
    candidate_fingerprint: str
    worker_identities: Sequence[str] | None = None
    canonical_repository: str | None = None
    override_mass_guard: bool | None = False


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class SessionUpsertRequest(Request):
    """The arguments of ``session_upsert`` (``upsert_session``)."""

    op: ClassVar[str] = "session_upsert"
    alias: ClassVar[str] = "session_upsert"
    session_id: str
    role: str | None = None
    namespace: str | None = None
    worker_identity: str | None = None
    pid: int | None = None
    status: str | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AllocateRequest(Request):
    """The arguments of ``allocate`` (``allocate_next_work``)."""

    op: ClassVar[str] = "allocate"
    alias: ClassVar[str] = "gitea_allocate_next_work"
    remote: str
    org: str
    repo: str
    session_id: str
    candidates: Sequence[Any]
    role: str | None = None
    apply: bool | None = False
    lease_ttl_seconds: float | None = None
    owner_pid: int | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AssignRequest(Request):
    """The arguments of ``assign`` (``assign_and_lease``)."""

    op: ClassVar[str] = "assign"
    alias: ClassVar[str] = "assign"
    remote: str
    org: str
    repo: str
    kind: str
    number: int
    session_id: str
    role: str
    expected_head_sha: str | None = None
    allowed_actions: Sequence[str] | None = None
    forbidden_actions: Sequence[str] | None = None
    phase: str | None = None
    lease_ttl_seconds: float | None = None
    owner_pid: int | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseHeartbeatRequest(Request):
    """The arguments of ``lease_heartbeat`` (``heartbeat_lease``)."""

    op: ClassVar[str] = "lease_heartbeat"
    alias: ClassVar[str] = "gitea_heartbeat_work_lease"
    session_id: str
    lease_id: str
    lease_ttl_seconds: float | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseReleaseRequest(Request):
    """The arguments of ``lease_release`` (``release_lease``)."""

    op: ClassVar[str] = "lease_release"
    alias: ClassVar[str] = "gitea_release_work_lease"
    session_id: str
    lease_id: str


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AssignmentCheckRequest(Request):
    """The arguments of ``assignment_check`` (``require_valid_assignment``)."""

    op: ClassVar[str] = "assignment_check"
    alias: ClassVar[str] = "gitea_require_valid_assignment"
    remote: str
    org: str
    repo: str
    kind: str
    number: int
    session_id: str
    action: str


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class WorkItemUpsertRequest(Request):
    """The arguments of ``work_item_upsert`` (``upsert_work_item``)."""

    op: ClassVar[str] = "work_item_upsert"
    alias: ClassVar[str] = "work_item_upsert"
    remote: str
    org: str
    repo: str
    kind: str
    number: int
    state: str | None = None
    current_head_sha: str | None = None
    title: str | None = None
    priority: int | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalLockSetRequest(Request):
    """The arguments of ``terminal_lock_set`` (``set_terminal_lock``)."""

    op: ClassVar[str] = "terminal_lock_set"
    alias: ClassVar[str] = "terminal_lock_set"
    remote: str
    org: str
    repo: str
    terminal_pr: int | None
    review_id: str | None = None
    decision: str | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalLockGetRequest(Request):
    """The arguments of ``terminal_lock_get`` (``get_terminal_lock``)."""

    op: ClassVar[str] = "terminal_lock_get"
    alias: ClassVar[str] = "terminal_lock_get"
    remote: str
    org: str
    repo: str


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceHealthAssessRequest(Request):
    """The arguments of ``namespace_health_assess`` (``assess_namespace_health``)."""

    op: ClassVar[str] = "namespace_health_assess"
    alias: ClassVar[str] = "gitea_assess_mcp_namespace_health"
    session_id: str
    namespace: str
    required_tool: str | None = None
    registered_tools: Sequence[str] | str | None = None
    probe_result: Mapping[str, Any] | None = None
    process: Mapping[str, Any] | None = None
    config_path: str | None = None
    configured: bool | None = True
    probe_source: str | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceHealthGateRequest(Request):
    """The arguments of ``namespace_health_gate`` (``namespace_health_gate``)."""

    op: ClassVar[str] = "namespace_health_gate"
    alias: ClassVar[str] = "gitea_namespace_health_gate"
    session_id: str
    task: str


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentLinkUpsertRequest(Request):
    """The arguments of ``incident_link_upsert`` (``upsert_incident_link``)."""

    op: ClassVar[str] = "incident_link_upsert"
    alias: ClassVar[str] = "gitea_upsert_incident_link"
    gitea_org: str
    gitea_repo: str
    gitea_issue_number: int
    provider: str
    provider_issue_id: str
    provider_base_url: str | None = None
    provider_org: str | None = None
    provider_project: str | None = None
    provider_short_id: str | None = None
    provider_permalink: str | None = None
    fingerprint: str | None = None
    first_seen: str | None = None
    last_seen: str | None = None
    status: str | None = None
    release_resolved_at: str | None = None
    last_sync_at: str | None = None
    linked_pr_numbers: Sequence[int] | None = None
    event_count: int | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentLinkGetRequest(Request):
    """The arguments of ``incident_link_get`` (``get_incident_link_for_gitea_issue``)."""

    op: ClassVar[str] = "incident_link_get"
    alias: ClassVar[str] = "gitea_get_incident_link_for_gitea_issue"
    gitea_org: str
    gitea_repo: str
    gitea_issue_number: int


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HostStatusRequest(Request):
    """The arguments of ``host_status`` (``status``)."""

    op: ClassVar[str] = "host_status"
    alias: ClassVar[str] = "host_status"


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HostPlanRequest(Request):
    """The arguments of ``host_plan`` (``plan_retirement``)."""

    op: ClassVar[str] = "host_plan"
    alias: ClassVar[str] = "host_plan"
    host_id: str


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HostApplyRequest(Request):
    """The arguments of ``host_apply`` (``apply_retirement``)."""

    op: ClassVar[str] = "host_apply"
    alias: ClassVar[str] = "host_apply"
    host_id: str
    host_token: str
    candidate_fingerprint: str
    worker_identities: Sequence[str]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ReapPlanRequest(Request):
    """The arguments of ``reap_plan`` (``reap_plan``)."""

    op: ClassVar[str] = "reap_plan"
    alias: ClassVar[str] = "fleet_plan_server_reap"
    include: Sequence[str] | None = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ReapApplyRequest(Request):
    """The arguments of ``reap_apply`` (``reap_apply``)."""

    op: ClassVar[str] = "reap_apply"
    alias: ClassVar[str] = "fleet_apply_server_reap"
    plan_token: str
    override_mass_guard: bool | None = False


#: Every declared op's request type, in declaration order.
REQUEST_TYPES: tuple[type[Request], ...] = (
    RegisterRequest,
    HeartbeatRequest,
    ReleaseRequest,
    StatusRequest,
    SnapshotRequest,
    PlanRequest,
    ApplyRequest,
    SessionUpsertRequest,
    AllocateRequest,
    AssignRequest,
    LeaseHeartbeatRequest,
    LeaseReleaseRequest,
    AssignmentCheckRequest,
    WorkItemUpsertRequest,
    TerminalLockSetRequest,
    TerminalLockGetRequest,
    NamespaceHealthAssessRequest,
    NamespaceHealthGateRequest,
    IncidentLinkUpsertRequest,
    IncidentLinkGetRequest,
    HostStatusRequest,
    HostPlanRequest,
    HostApplyRequest,
    ReapPlanRequest,
    ReapApplyRequest,
)
