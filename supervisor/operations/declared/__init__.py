"""Each operation's request type, generated from the declarations (do not edit)."""

# Written by ``python -m tools.gen_declared``; tests/unit/test_declared_current.py fails
# when this is not what it writes.

from __future__ import annotations

from supervisor.operations.declared.control import (
    AllocateRequest,
    AssignmentCheckRequest,
    AssignRequest,
    LeaseHeartbeatRequest,
    LeaseReleaseRequest,
    SessionUpsertRequest,
    TerminalLockGetRequest,
    TerminalLockSetRequest,
    WorkItemUpsertRequest,
)
from supervisor.operations.declared.fleet import (
    ApplyRequest,
    HeartbeatRequest,
    PlanRequest,
    RegisterRequest,
    ReleaseRequest,
    SnapshotRequest,
    StatusRequest,
)
from supervisor.operations.declared.hosts import (
    HostApplyRequest,
    HostPlanRequest,
    HostStatusRequest,
)
from supervisor.operations.declared.links import (
    IncidentLinkGetRequest,
    IncidentLinkUpsertRequest,
    NamespaceHealthAssessRequest,
    NamespaceHealthGateRequest,
)
from supervisor.operations.declared.reap import (
    ReapApplyRequest,
    ReapPlanRequest,
)
from supervisor.operations.spec import Request

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

#: Every declared op's request type.
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
    ReapPlanRequest,
    ReapApplyRequest,
    HostStatusRequest,
    HostPlanRequest,
    HostApplyRequest,
)
