"""Assign-and-lease and the mutation gate: each op checked from its request, then decided and
written in the writer's transaction (grant, owner-resume)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, assert_never

from actors.control.context import ControlContext, event
from actors.control.inbox import AssignTerms, ItemFacts
from actors.control.links import namespace_gate
from actors.control.steps import ensure_session, expire_one, item_row, put_item
from actors.replies import WriteAck
from supervisor.errors import StoreError
from supervisor.operations.declared import AssignmentCheckRequest, AssignRequest
from supervisor.policy.canonical import canon
from supervisor.policy.control.decisions import GateVerdict, check_mutation, decide_assign
from supervisor.policy.control.namespace_health import GATE_NAMESPACE_UNHEALTHY
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import (
    WorkRef,
    actions_arg,
    check_actions,
    check_head_sha,
    check_role,
    check_session_id,
    optional_text,
    pid_arg,
    role_actions,
    ttl_arg,
    work_ref,
)
from supervisor.policy.control.render import (
    ASSIGN_OUTCOME_ASSIGNED,
    ASSIGN_OUTCOME_NO_SAFE_WORK,
    ASSIGN_OUTCOME_REFUSED,
    ASSIGN_OUTCOME_WAIT,
    assignment_view,
    gate_view,
)
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import ControlTx, Row

__all__ = ["Assign", "CheckAssignment", "actions_for", "assign_in"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Assign(AssignTerms):
    """One transaction: decide, then write the lease and the assignment together (or nothing)."""

    ttl_seconds: float | None = None
    profile: str | None = None

    @classmethod
    def check(cls, r: AssignRequest, profile: Profile | None) -> Assign:
        # The kind first, so an incident is refused as such before anything else.
        ref = work_ref(r.remote, r.org, r.repo, r.kind, r.number)
        sid, role = check_session_id(r.session_id), check_role(r.role)
        head = check_head_sha(r.expected_head_sha)
        allowed = actions_arg(r.allowed_actions, "allowed_actions")
        forbidden = actions_arg(r.forbidden_actions, "forbidden_actions")
        phase = optional_text(r.phase, "phase")
        pid, ttl = pid_arg(r.owner_pid), ttl_arg(r.lease_ttl_seconds)
        return cls(
            session_id=sid,
            role=role,
            ref=ref,
            expected_head_sha=head,
            allowed_actions=allowed,
            forbidden_actions=forbidden,
            phase=phase or "assigned",
            ttl_seconds=ttl,
            owner_pid=pid,
            profile=profile.name if profile else None,
        )

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        return await _assign(ctx, control, self)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckAssignment:
    """The mutation gate (require_valid_assignment): read-only, serialized with every write."""

    session_id: str
    ref: WorkRef
    action: str

    @classmethod
    def check(cls, r: AssignmentCheckRequest, profile: Profile | None) -> CheckAssignment:
        """``success`` only for a live lease covering ``action`` now."""
        ref = work_ref(r.remote, r.org, r.repo, r.kind, r.number)
        sid = check_session_id(r.session_id)
        [action] = check_actions([r.action], "action")
        return cls(session_id=sid, ref=ref, action=action)

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        return await _check_gate(ctx, control, self)


async def assign_in(
    ctx: ControlContext,
    control: ControlTx,
    terms: AssignTerms,
    *,
    ttl: float,
    session: Row,
    now: datetime,
    stamp: str,
) -> dict[str, Any]:
    """Decide and write one assignment for ``ttl`` seconds (already checked); the allocator
    calls this too."""
    ref = terms.ref
    item = await item_row(control, ref.key)
    leases = await control.item_leases([ref.key])
    decision = decide_assign(
        session_id=terms.session_id,
        role=terms.role,
        ref=ref,
        expected_head_sha=terms.expected_head_sha,
        item=item,
        leases=leases,
        now_stamp=stamp,
    )
    by_id = {str(lease["lease_id"]): lease for lease in leases}
    for lease_id in decision.expire_lease_ids:
        await expire_one(control, by_id[lease_id], stamp)

    def view(outcome: str, **extra: Any) -> dict[str, Any]:
        return assignment_view(
            outcome=outcome,
            code=decision.code,
            reason=decision.reason,
            ref=ref,
            session_id=terms.session_id,
            role=terms.role,
            **extra,
        )

    match decision.kind:
        case "refused":
            return view(ASSIGN_OUTCOME_REFUSED)
        case "no_safe_work":
            return view(ASSIGN_OUTCOME_NO_SAFE_WORK)
        case "wait":
            return view(ASSIGN_OUTCOME_WAIT, owner_session_id=decision.owner_session_id)
        case "resume":
            assert decision.lease is not None
            lease, assignment = await _resume(
                ctx, control, terms, dict(decision.lease), ttl=ttl, now=now, stamp=stamp
            )
            return view(ASSIGN_OUTCOME_ASSIGNED, lease=lease, assignment=assignment, resumed=True)
        case "grant":
            lease, assignment = await _grant(
                ctx, control, terms, ttl=ttl, item=item, session=session, now=now, stamp=stamp
            )
            return view(ASSIGN_OUTCOME_ASSIGNED, lease=lease, assignment=assignment)
        case _:
            assert_never(decision.kind)


def actions_for(terms: AssignTerms) -> tuple[tuple[str, ...], tuple[str, ...]]:
    default_allowed, default_forbidden = role_actions(terms.role)
    allowed = terms.allowed_actions if terms.allowed_actions is not None else default_allowed
    forbidden = (
        terms.forbidden_actions if terms.forbidden_actions is not None else default_forbidden
    )
    # Forbidden wins, as for operation grants: an action named in both is not allowed.
    return tuple(a for a in allowed if a not in forbidden), forbidden


def _assignment_row(
    ctx: ControlContext, terms: AssignTerms, ttl: float, lease_id: str, stamp: str
) -> Row:
    allowed, forbidden = actions_for(terms)
    return {
        "assignment_id": ctx.make_id("asn"),
        "lease_id": lease_id,
        "work_item_key": terms.ref.key,
        "session_id": terms.session_id,
        "role": terms.role,
        "phase": terms.phase,
        "expected_head_sha": terms.expected_head_sha,
        "allowed_actions": allowed,
        "forbidden_actions": forbidden,
        "ttl_seconds": ttl,
        "status": "active",
        "created_at": stamp,
        "updated_at": stamp,
    }


async def _grant(
    ctx: ControlContext,
    control: ControlTx,
    terms: AssignTerms,
    *,
    ttl: float,
    item: Row | None,
    session: Row,
    now: datetime,
    stamp: str,
) -> tuple[Row, Row]:
    ref = terms.ref
    if item is None or (terms.expected_head_sha and not item.get("current_head_sha")):
        # First sight of the item, or its first pin: the caller read this head.
        first = ItemFacts(ref=ref, current_head_sha=terms.expected_head_sha)
        await put_item(control, first, stamp=stamp)
    deadline = format_stamp(now + timedelta(seconds=ttl))
    pid = terms.owner_pid if terms.owner_pid is not None else session.get("pid")
    lease: Row = {
        "lease_id": ctx.make_id("lease"),
        "work_item_key": ref.key,
        "session_id": terms.session_id,
        # The retirement planner protects the registration owning this pid and session.
        "owner_pid": pid if isinstance(pid, int) else None,
        "role": terms.role,
        "phase": terms.phase,
        "status": "active",
        "acquired_at": stamp,
        "heartbeat_at": stamp,
        "expires_at": deadline,
    }
    assignment = _assignment_row(ctx, terms, ttl, str(lease["lease_id"]), stamp)
    await control.insert_lease(lease)
    await control.insert_assignment(assignment)
    await event(
        control,
        stamp,
        "lease_granted",
        work_item_key=ref.key,
        session_id=terms.session_id,
        lease_id=str(lease["lease_id"]),
        assignment_id=assignment["assignment_id"],
        role=terms.role,
        expires_at=deadline,
        expected_head_sha=terms.expected_head_sha,
    )
    return lease, assignment


async def _resume(
    ctx: ControlContext,
    control: ControlTx,
    terms: AssignTerms,
    held: Row,
    *,
    ttl: float,
    now: datetime,
    stamp: str,
) -> tuple[Row, Row]:
    lease_id = str(held["lease_id"])
    refresh = {
        "expires_at": format_stamp(now + timedelta(seconds=ttl)),
        "heartbeat_at": stamp,
    }
    if not await control.update_lease(lease_id, expected_status="active", changes=refresh):
        raise StoreError(f"lease {lease_id} changed during owner-resume")
    lease = {**held, **refresh}
    assignment = await control.assignment_by_lease(lease_id)
    changes: Row = {"updated_at": stamp, "ttl_seconds": ttl}
    if terms.expected_head_sha is not None:
        changes["expected_head_sha"] = terms.expected_head_sha
    if terms.allowed_actions is not None or terms.forbidden_actions is not None:
        changes["allowed_actions"], changes["forbidden_actions"] = actions_for(terms)
    if assignment is None or canon(assignment.get("status")) != "active":
        # A lease written without one (UpsertLease): give it its assignment now.
        assignment = _assignment_row(ctx, terms, ttl, lease_id, stamp)
        await control.insert_assignment(assignment)
    else:
        await control.update_assignments([lease_id], expected_status="active", changes=changes)
        assignment = {**assignment, **changes}
    await event(
        control,
        stamp,
        "lease_resumed",
        work_item_key=terms.ref.key,
        session_id=terms.session_id,
        lease_id=lease_id,
        expires_at=lease["expires_at"],
    )
    return lease, assignment


async def _check_gate(
    ctx: ControlContext, control: ControlTx, message: CheckAssignment
) -> WriteAck:
    """require_valid_assignment: reads only, so a refusal leaves no trace but its answer."""
    _, stamp = ctx.now()
    ref = message.ref
    item = await item_row(control, ref.key)
    assignment = await control.assignment(work_item_key=ref.key, session_id=message.session_id)
    lease = await control.lease(str(assignment["lease_id"])) if assignment else None
    verdict = check_mutation(
        session_id=message.session_id,
        action=message.action,
        ref=ref,
        item=item,
        assignment=assignment,
        lease=lease,
        now_stamp=stamp,
    )
    gated: dict[str, Any] = {}
    if verdict.allowed:
        # Review and merge also need the namespace they go through to be proven healthy
        # for this session; read in the same serialized step as the lease.
        task, reasons = await namespace_gate(control, message.session_id, message.action)
        if reasons:
            verdict = GateVerdict(allowed=False, code=GATE_NAMESPACE_UNHEALTHY, reason=reasons[0])
            gated = {"reasons": reasons, "gate_task": task}
    data = gate_view(
        verdict,
        ref=ref,
        session_id=message.session_id,
        action=message.action,
        assignment=assignment,
        lease=lease,
        item=item,
    )
    return WriteAck(
        ok=verdict.allowed, code=verdict.code, detail=verdict.reason, data={**data, **gated}
    )


async def _assign(ctx: ControlContext, control: ControlTx, message: Assign) -> WriteAck:
    now, stamp = ctx.now()
    # The message is its own terms; its lease length is checked before anything is written.
    ttl = ctx.ttl(message.ttl_seconds)
    session = await ensure_session(control, message, profile=message.profile, stamp=stamp)
    view = await assign_in(ctx, control, message, ttl=ttl, session=session, now=now, stamp=stamp)
    ok = view["outcome"] != ASSIGN_OUTCOME_REFUSED
    return WriteAck(ok=ok, code=str(view["code"]), detail=str(view["reason"]), data=view)
