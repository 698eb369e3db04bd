"""The writer's control-plane messages: sessions, items, leases, locks, links, allocation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actors.mailbox import Reply
from actors.replies import WriteAck
from supervisor.policy.control.allocation import Candidate
from supervisor.policy.control.incident_links import IncidentLinkSpec
from supervisor.policy.control.plane import WorkRef

__all__ = [
    "AllocateWork",
    "Assign",
    "AssignTerms",
    "CheckAssignment",
    "ControlOp",
    "ControlWrite",
    "GetIncidentLinks",
    "GetTerminalLock",
    "HeartbeatLease",
    "ItemFacts",
    "LeaseClaim",
    "LinkOp",
    "NamespaceHealthGate",
    "RecordNamespaceHealth",
    "ReleaseLease",
    "RepoScope",
    "SetTerminalLock",
    "UpsertIncidentLink",
    "UpsertSession",
    "UpsertWorkItem",
]

# Every field arrives validated: the handle turns caller input into these types with the
# policy's checks (WorkRef, Candidate, check_role, ...) and refuses before sending. Every
# reply is a WriteAck whose ``data`` holds the structured result (see policy/control_render).


@dataclass(frozen=True, slots=True, kw_only=True)
class UpsertSession:
    """Create or update a session; None fields keep what is stored."""

    session_id: str
    role: str | None = None
    profile: str | None = None
    namespace: str | None = None
    worker_identity: str | None = None
    pid: int | None = None
    status: str = "active"
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemFacts:
    """What Gitea says about an item now; None fields keep what is stored."""

    ref: WorkRef
    state: str | None = None
    current_head_sha: str | None = None
    title: str | None = None
    priority: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpsertWorkItem(ItemFacts):
    """Record what Gitea says about an item (the facts are the message's own fields)."""

    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignTerms:
    """Who takes which item, on what terms: asked for (Assign) or the allocator's pick."""

    session_id: str
    role: str
    ref: WorkRef
    expected_head_sha: str | None
    #: None means the role's default action matrix.
    allowed_actions: tuple[str, ...] | None = None
    forbidden_actions: tuple[str, ...] | None = None
    phase: str = "assigned"
    owner_pid: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Assign(AssignTerms):
    """One transaction: decide, then write the lease and the assignment together (or nothing)."""

    ttl_seconds: float | None = None
    profile: str | None = None
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckAssignment:
    """The mutation gate (require_valid_assignment): read-only, serialized with every write."""

    session_id: str
    ref: WorkRef
    action: str
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseClaim:
    """A lease as a session names it: refused unless that session owns it."""

    session_id: str
    lease_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatLease(LeaseClaim):
    ttl_seconds: float | None = None
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseLease(LeaseClaim):
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoScope:
    """The repository a terminal-review lock or an allocation is about."""

    remote: str
    org: str
    repo: str

    def where(self) -> dict[str, str]:
        """The repository as keyword arguments (the store's lock lookup, the views)."""
        return {"remote": self.remote, "org": self.org, "repo": self.repo}


@dataclass(frozen=True, slots=True, kw_only=True)
class SetTerminalLock(RepoScope):
    """Make ``terminal_pr`` the repository's active terminal-review lock; None clears it."""

    terminal_pr: int | None
    review_id: str | None = None
    decision: str | None = None
    set_by: str | None = None
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTerminalLock(RepoScope):
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocateWork(RepoScope):
    """Route the candidates and, with ``apply``, reserve the pick in the same transaction."""

    session_id: str
    role: str
    candidates: tuple[Candidate, ...]
    apply: bool
    ttl_seconds: float | None = None
    owner_pid: int | None = None
    profile: str | None = None
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordNamespaceHealth:
    """Store a classified probe as the session's latest verdict for its namespace."""

    session_id: str
    #: The classifier's result (policy.namespace_health.classify_namespace_probe).
    assessment: Mapping[str, Any]
    profile: str | None = None
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceHealthGate:
    """Read-only: would the session's recorded verdicts let ``task`` run now?"""

    session_id: str
    task: str
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpsertIncidentLink:
    """Create or update the link for one provider key; never touches work items."""

    spec: IncidentLinkSpec
    reply: Reply[WriteAck]


@dataclass(frozen=True, slots=True, kw_only=True)
class GetIncidentLinks:
    gitea_org: str
    gitea_repo: str
    gitea_issue_number: int
    reply: Reply[WriteAck]


#: Namespace health and incident links (handled in links.py).
LinkOp = RecordNamespaceHealth | NamespaceHealthGate | UpsertIncidentLink | GetIncidentLinks

#: What ``dispatch.handle_control`` carries out; the allocator has a module of its own.
ControlOp = (
    UpsertSession
    | UpsertWorkItem
    | Assign
    | CheckAssignment
    | HeartbeatLease
    | ReleaseLease
    | SetTerminalLock
    | GetTerminalLock
    | LinkOp
)
ControlWrite = ControlOp | AllocateWork
