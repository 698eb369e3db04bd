"""Session and work-item upserts: each op checked from its request, and written in the
writer's transaction."""

from __future__ import annotations

from dataclasses import dataclass

from actors.control.context import ControlContext, event
from actors.control.inbox import ItemFacts
from actors.control.steps import put_item
from actors.replies import WriteAck
from supervisor.operations.declared import SessionUpsertRequest, WorkItemUpsertRequest
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import (
    ControlPlaneRefusal,
    check_head_sha,
    check_role,
    check_session_id,
    check_state,
    optional_text,
    pid_arg,
    work_ref,
)
from supervisor.store.base import ControlTx, Row

__all__ = ["UpsertSession", "UpsertWorkItem"]


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

    @classmethod
    def check(cls, r: SessionUpsertRequest, profile: Profile | None) -> UpsertSession:
        # In this order: the first bad argument is the one refused.
        sid = check_session_id(r.session_id)
        role = check_role(r.role) if r.role is not None else None
        pid = pid_arg(r.pid)
        namespace = optional_text(r.namespace, "namespace")
        worker = optional_text(r.worker_identity, "worker_identity")
        status = r.status if r.status is not None else "active"
        if status not in ("active", "ended"):
            raise ControlPlaneRefusal("invalid_argument", "status must be active or ended")
        return cls(
            session_id=sid,
            role=role,
            profile=profile.name if profile else None,
            namespace=namespace,
            worker_identity=worker,
            pid=pid,
            status=status,
        )

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        _, stamp = ctx.now()
        found = await control.session(self.session_id)
        given = {
            "role": self.role,
            "profile": self.profile,
            "namespace": self.namespace,
            "worker_identity": self.worker_identity,
            "pid": self.pid,
        }
        row: Row = {k: v for k, v in given.items() if v is not None}
        row.update(session_id=self.session_id, status=self.status, updated_at=stamp)
        row["last_heartbeat_at"] = stamp
        if found is None:
            row["started_at"] = stamp
            kind = "session_started"
        else:
            tracked = {*given, "status"}
            changed = {k: v for k, v in row.items() if k in tracked and found[k] != v}
            kind = "session_changed" if changed else ""
        await control.put_session(row)
        if kind:
            detail = {k: row[k] for k in row if k in {*given, "status"}}
            await event(control, stamp, kind, session_id=self.session_id, **detail)
        session = {**(found or {}), **row}
        return WriteAck(ok=True, data={"success": True, "session": session})


@dataclass(frozen=True, slots=True, kw_only=True)
class UpsertWorkItem(ItemFacts):
    """Record what Gitea says about an item (the facts are the op's own fields)."""

    @classmethod
    def check(cls, r: WorkItemUpsertRequest, profile: Profile | None) -> UpsertWorkItem:
        ref = work_ref(r.remote, r.org, r.repo, r.kind, r.number)
        state = check_state(r.state) if r.state is not None else None
        head = check_head_sha(r.current_head_sha)
        title = optional_text(r.title, "title")
        priority = r.priority
        if priority is not None and (
            isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > 2**30
        ):
            raise ControlPlaneRefusal("invalid_argument", "priority must be an integer")
        return cls(ref=ref, state=state, current_head_sha=head, title=title, priority=priority)

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        _, stamp = ctx.now()
        return await put_item(control, self, stamp=stamp)
