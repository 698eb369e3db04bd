"""The request type of every fleet op, made from its declaration (generated; do not
edit): what every surface parses into, what the handle's one ``call`` takes and what the
actor reads."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/fleet.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from supervisor.operations.spec import Request
from supervisor.policy.fast_init import fast_init

__all__ = [
    "ApplyRequest",
    "HeartbeatRequest",
    "PlanRequest",
    "RegisterRequest",
    "ReleaseRequest",
    "SnapshotRequest",
    "StatusRequest",
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
