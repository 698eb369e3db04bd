"""Lease heartbeats and releases, and terminal-review locks: each op checked from its request,
and written in the writer's transaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from actors.control.context import ControlContext, event, refusal
from actors.control.inbox import LeaseClaim, RepoScope
from actors.control.steps import expire_one
from actors.replies import WriteAck
from supervisor.errors import StoreError
from supervisor.operations.declared import (
    LeaseHeartbeatRequest,
    LeaseReleaseRequest,
    TerminalLockGetRequest,
    TerminalLockSetRequest,
)
from supervisor.policy.canonical import canon
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import (
    ControlPlaneRefusal,
    check_repository,
    check_session_id,
    optional_text,
    ttl_arg,
    work_ref,
)
from supervisor.policy.control.render import lease_view
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import ControlTx, Row

__all__ = ["GetTerminalLock", "HeartbeatLease", "ReleaseLease", "SetTerminalLock"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatLease(LeaseClaim):
    ttl_seconds: float | None = None

    @classmethod
    def check(cls, r: LeaseHeartbeatRequest, profile: Profile | None) -> HeartbeatLease:
        sid, lid = check_session_id(r.session_id), check_session_id(r.lease_id)
        return cls(session_id=sid, lease_id=lid, ttl_seconds=ttl_arg(r.lease_ttl_seconds))

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        return await _heartbeat(ctx, control, self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseLease(LeaseClaim):
    @classmethod
    def check(cls, r: LeaseReleaseRequest, profile: Profile | None) -> ReleaseLease:
        sid, lid = check_session_id(r.session_id), check_session_id(r.lease_id)
        return cls(session_id=sid, lease_id=lid)

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        return await _release(ctx, control, self)


@dataclass(frozen=True, slots=True, kw_only=True)
class SetTerminalLock(RepoScope):
    """Make ``terminal_pr`` the repository's active terminal-review lock; None clears it."""

    terminal_pr: int | None
    review_id: str | None = None
    decision: str | None = None
    set_by: str | None = None

    @classmethod
    def check(cls, r: TerminalLockSetRequest, profile: Profile | None) -> SetTerminalLock:
        remote, org, repo = check_repository(r.remote, r.org, r.repo)
        if r.terminal_pr is not None:
            work_ref(remote, org, repo, "pr", r.terminal_pr)
        review = optional_text(r.review_id, "review_id")
        verdict = optional_text(r.decision, "decision")
        return cls(
            remote=remote,
            org=org,
            repo=repo,
            terminal_pr=r.terminal_pr,
            review_id=review,
            decision=verdict,
            set_by=profile.name if profile else None,
        )

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        return await _set_lock(ctx, control, self)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTerminalLock(RepoScope):
    @classmethod
    def check(cls, r: TerminalLockGetRequest, profile: Profile | None) -> GetTerminalLock:
        remote, org, repo = check_repository(r.remote, r.org, r.repo)
        return cls(remote=remote, org=org, repo=repo)

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        lock = await control.active_terminal_lock(**self.where())
        return WriteAck(ok=True, data={"success": True, "terminal_lock": lock})


async def _owned(control: ControlTx, message: LeaseClaim) -> tuple[Row, str]:
    """The caller's own lease and its status; refused when it is unknown or another's."""
    lease = await control.lease(message.lease_id)
    if lease is None:
        raise ControlPlaneRefusal("unknown_lease", f"no lease {message.lease_id!r}")
    if canon(lease.get("session_id")) != message.session_id:
        raise ControlPlaneRefusal(
            "lease_not_owned", f"lease {message.lease_id} belongs to another session"
        )
    return lease, canon(lease.get("status"))


async def _lease_event(
    control: ControlTx,
    stamp: str,
    kind: str,
    lease: Row,
    message: LeaseClaim,
    **detail: object,
) -> None:
    await event(
        control,
        stamp,
        kind,
        work_item_key=canon(lease.get("work_item_key")) or None,
        session_id=message.session_id,
        lease_id=message.lease_id,
        **detail,
    )


async def _heartbeat(ctx: ControlContext, control: ControlTx, message: HeartbeatLease) -> WriteAck:
    now, stamp = ctx.now()
    requested = ctx.ttl(message.ttl_seconds) if message.ttl_seconds is not None else None
    lease, status = await _owned(control, message)
    if status != "active":
        return refusal("lease_not_active", f"lease {message.lease_id} is {status}")
    deadline = lease.get("expires_at")
    if isinstance(deadline, str) and deadline <= stamp:
        # Past its deadline but not yet swept: it is over, and saying so now is a
        # transition like any other.
        await expire_one(control, lease, stamp)
        return refusal(
            "lease_expired", f"lease {message.lease_id} expired at {lease['expires_at']}"
        )
    assignment = await control.assignment_by_lease(message.lease_id)
    stored_ttl = assignment.get("ttl_seconds") if assignment else None
    ttl = requested or (float(stored_ttl) if stored_ttl else ctx.ttl(None))
    refresh = {"expires_at": format_stamp(now + timedelta(seconds=ttl)), "heartbeat_at": stamp}
    if not await control.update_lease(message.lease_id, expected_status="active", changes=refresh):
        raise StoreError(f"lease {message.lease_id} changed during its heartbeat")
    session = await control.session(message.session_id)
    if session is not None:
        await control.put_session(
            {
                "session_id": message.session_id,
                "status": session["status"],
                "last_heartbeat_at": stamp,
            }
        )
    await _lease_event(
        control, stamp, "lease_heartbeat", lease, message, expires_at=refresh["expires_at"]
    )
    return WriteAck(ok=True, data={"success": True, **lease_view({**lease, **refresh})})


async def _release(ctx: ControlContext, control: ControlTx, message: ReleaseLease) -> WriteAck:
    _, stamp = ctx.now()
    lease, status = await _owned(control, message)
    if status != "active":
        # Releasing twice is not an error: the lease is not held either way.
        return WriteAck(
            ok=True, code=f"already_{status}", data={"success": True, **lease_view(lease)}
        )
    changes = {"status": "released", "released_at": stamp}
    if not await control.update_lease(message.lease_id, expected_status="active", changes=changes):
        raise StoreError(f"lease {message.lease_id} changed during its release")
    await control.update_assignments(
        [message.lease_id],
        expected_status="active",
        changes={"status": "released", "updated_at": stamp},
    )
    await _lease_event(control, stamp, "lease_released", lease, message)
    return WriteAck(ok=True, data={"success": True, **lease_view({**lease, **changes})})


async def _set_lock(ctx: ControlContext, control: ControlTx, message: SetTerminalLock) -> WriteAck:
    _, stamp = ctx.now()
    where = message.where()
    active = await control.active_terminal_lock(**where)
    repo_key = f"{message.remote}/{message.org}/{message.repo}"
    same = active is not None and (
        active.get("terminal_pr"),
        active.get("decision"),
        active.get("review_id"),
    ) == (message.terminal_pr, message.decision, message.review_id)
    if same or (active is None and message.terminal_pr is None):
        return WriteAck(ok=True, code="unchanged", data={"success": True, "terminal_lock": active})
    if active is not None:
        ended = "cleared" if message.terminal_pr is None else "superseded"
        await control.update_terminal_lock(
            str(active["lock_id"]),
            expected_status="active",
            changes={"status": ended, "updated_at": stamp},
        )
        await event(
            control,
            stamp,
            f"terminal_lock_{ended}",
            repository=repo_key,
            lock_id=active["lock_id"],
            terminal_pr=active["terminal_pr"],
            by=message.set_by,
        )
    if message.terminal_pr is None:
        return WriteAck(ok=True, data={"success": True, "terminal_lock": None})
    lock: Row = {
        "lock_id": ctx.make_id("tlock"),
        **where,
        "terminal_pr": message.terminal_pr,
        "review_id": message.review_id,
        "decision": message.decision,
        "status": "active",
        "set_by": message.set_by,
        "created_at": stamp,
        "updated_at": stamp,
    }
    await control.insert_terminal_lock(lock)
    await event(
        control,
        stamp,
        "terminal_lock_set",
        repository=repo_key,
        lock_id=lock["lock_id"],
        terminal_pr=message.terminal_pr,
        decision=message.decision,
        by=message.set_by,
    )
    return WriteAck(ok=True, data={"success": True, "terminal_lock": lock})
