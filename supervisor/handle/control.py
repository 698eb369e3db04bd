"""The control plane's steps: each op's request checked by the policy's validators and
turned into the one op the writer carries out (sessions, work items, leases, terminal locks,
the allocator)."""

from __future__ import annotations

from typing import Any

from actors.control.allocate import AllocateWork
from actors.control.assign import Assign, CheckAssignment
from actors.control.inbox import ControlOp
from actors.control.lifecycle import GetTerminalLock, HeartbeatLease, ReleaseLease, SetTerminalLock
from actors.control.sessions import UpsertSession, UpsertWorkItem
from supervisor.handle.checks import (
    ControlStep,
    actions_arg,
    ineligible,
    optional_text,
    pid_arg,
    ttl_arg,
)
from supervisor.operations.declared import (
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
from supervisor.policy.control.candidates import candidates_from_mappings
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import (
    ControlPlaneRefusal,
    WorkRef,
    check_actions,
    check_head_sha,
    check_repository,
    check_role,
    check_session_id,
    check_state,
    work_ref,
)
from supervisor.policy.refusal import refused

__all__ = ["CONTROL_STEPS"]

# Every step reads its op's request (``operations.declared``): ``r`` has exactly
# the fields the op declares, None where the caller gave nothing.


def _ref(r: WorkItemUpsertRequest | AssignRequest | AssignmentCheckRequest) -> WorkRef:
    return work_ref(r.remote, r.org, r.repo, r.kind, r.number)


def _name(profile: Profile | None) -> str | None:
    return profile.name if profile else None


def session_upsert(r: SessionUpsertRequest, profile: Profile | None) -> ControlOp:
    sid = check_session_id(r.session_id)
    role = check_role(r.role) if r.role is not None else None
    pid = pid_arg(r.pid)
    namespace = optional_text(r.namespace, "namespace")
    worker = optional_text(r.worker_identity, "worker_identity")
    status = r.status if r.status is not None else "active"
    if status not in ("active", "ended"):
        raise ControlPlaneRefusal("invalid_argument", "status must be active or ended")
    return UpsertSession(
        session_id=sid,
        role=role,
        profile=_name(profile),
        namespace=namespace,
        worker_identity=worker,
        pid=pid,
        status=status,
    )


def work_item_upsert(r: WorkItemUpsertRequest, profile: Profile | None) -> ControlOp:
    ref = _ref(r)
    state = check_state(r.state) if r.state is not None else None
    head = check_head_sha(r.current_head_sha)
    title = optional_text(r.title, "title")
    priority = r.priority
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > 2**30
    ):
        raise ControlPlaneRefusal("invalid_argument", "priority must be an integer")
    return UpsertWorkItem(
        ref=ref, state=state, current_head_sha=head, title=title, priority=priority
    )


def assign(r: AssignRequest, profile: Profile | None) -> ControlOp:
    # The kind first, so an incident is refused as such before anything else.
    ref = _ref(r)
    sid, role = check_session_id(r.session_id), check_role(r.role)
    head = check_head_sha(r.expected_head_sha)
    allowed = actions_arg(r.allowed_actions, "allowed_actions")
    forbidden = actions_arg(r.forbidden_actions, "forbidden_actions")
    phase = optional_text(r.phase, "phase")
    pid, ttl = pid_arg(r.owner_pid), ttl_arg(r.lease_ttl_seconds)
    return Assign(
        session_id=sid,
        role=role,
        ref=ref,
        expected_head_sha=head,
        allowed_actions=allowed,
        forbidden_actions=forbidden,
        phase=phase or "assigned",
        ttl_seconds=ttl,
        owner_pid=pid,
        profile=_name(profile),
    )


def assignment_check(r: AssignmentCheckRequest, profile: Profile | None) -> ControlOp:
    """The mutation gate: ``success`` only for a live lease covering ``action`` now."""
    ref = _ref(r)
    sid = check_session_id(r.session_id)
    [action] = check_actions([r.action], "action")
    return CheckAssignment(session_id=sid, ref=ref, action=action)


def lease_heartbeat(r: LeaseHeartbeatRequest, profile: Profile | None) -> ControlOp:
    sid, lid = check_session_id(r.session_id), check_session_id(r.lease_id)
    ttl = ttl_arg(r.lease_ttl_seconds)
    return HeartbeatLease(session_id=sid, lease_id=lid, ttl_seconds=ttl)


def lease_release(r: LeaseReleaseRequest, profile: Profile | None) -> ControlOp:
    sid, lid = check_session_id(r.session_id), check_session_id(r.lease_id)
    return ReleaseLease(session_id=sid, lease_id=lid)


def terminal_lock_set(r: TerminalLockSetRequest, profile: Profile | None) -> ControlOp:
    """Make ``terminal_pr`` the repository's terminal-review lock; None clears it."""
    remote, org, repo = check_repository(r.remote, r.org, r.repo)
    if r.terminal_pr is not None:
        work_ref(remote, org, repo, "pr", r.terminal_pr)
    review = optional_text(r.review_id, "review_id")
    verdict = optional_text(r.decision, "decision")
    return SetTerminalLock(
        remote=remote,
        org=org,
        repo=repo,
        terminal_pr=r.terminal_pr,
        review_id=review,
        decision=verdict,
        set_by=_name(profile),
    )


def terminal_lock_get(r: TerminalLockGetRequest, profile: Profile | None) -> ControlOp:
    remote, org, repo = check_repository(r.remote, r.org, r.repo)
    return GetTerminalLock(remote=remote, org=org, repo=repo)


def allocate(r: AllocateRequest, profile: Profile | None) -> ControlOp | dict[str, Any]:
    """The next item for the caller's role: a preview, or with ``apply`` a leased assignment;
    an ineligible role is refused before anything else is checked.

    The role is the caller's profile role; asking for another is ``role_ineligible``, so an
    author profile can never be handed a merge.
    """
    assert profile is not None  # grant() refuses a missing profile
    try:
        wanted = check_role(r.role if r.role is not None else profile.role_kind)
    except ControlPlaneRefusal as exc:
        return ineligible(exc.detail, r.role)
    if wanted != profile.role_kind:
        reason = (
            f"profile {profile.name!r} has role {profile.role_kind!r}; it cannot take "
            f"{wanted!r} work"
        )
        return ineligible(reason, r.role)
    apply = bool(r.apply)
    try:
        sid = check_session_id(r.session_id)
        remote, org, repo = check_repository(r.remote, r.org, r.repo)
        parsed = candidates_from_mappings(list(r.candidates or ()))
        pid, ttl = pid_arg(r.owner_pid), ttl_arg(r.lease_ttl_seconds)
    except ControlPlaneRefusal as exc:
        # Its refusals say whether the caller asked for a lease (``apply``).
        return refused(exc.code, exc.detail, apply=apply)
    return AllocateWork(
        session_id=sid,
        role=wanted,
        remote=remote,
        org=org,
        repo=repo,
        candidates=parsed,
        apply=apply,
        ttl_seconds=ttl,
        owner_pid=pid,
        profile=profile.name,
    )


#: Control op -> its step (and what its refusals say besides the code and reasons).
CONTROL_STEPS: dict[str, ControlStep] = {
    "session_upsert": ControlStep(session_upsert),
    "allocate": ControlStep(allocate),
    "work_item_upsert": ControlStep(work_item_upsert),
    "assign": ControlStep(assign),
    "assignment_check": ControlStep(assignment_check, refusal=(("allowed", False),)),
    "lease_heartbeat": ControlStep(lease_heartbeat),
    "lease_release": ControlStep(lease_release),
    "terminal_lock_set": ControlStep(terminal_lock_set),
    "terminal_lock_get": ControlStep(terminal_lock_get),
}
