"""The request type of every control op, made from its declaration (generated; do not
edit): what every surface parses into, what the handle's one ``call`` takes and what the
actor reads."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/control.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from supervisor.operations.spec import Request
from supervisor.policy.fast_init import fast_init

__all__ = [
    "AllocateRequest",
    "AssignRequest",
    "AssignmentCheckRequest",
    "LeaseHeartbeatRequest",
    "LeaseReleaseRequest",
    "SessionUpsertRequest",
    "TerminalLockGetRequest",
    "TerminalLockSetRequest",
    "WorkItemUpsertRequest",
]


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
