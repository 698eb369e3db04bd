"""Session and work-item upserts inside the writer's transaction: each op and its step."""

from __future__ import annotations

from dataclasses import dataclass

from actors.control.context import ControlContext, event
from actors.control.inbox import ItemFacts
from actors.control.steps import put_item
from actors.replies import WriteAck
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

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        _, stamp = ctx.now()
        return await put_item(control, self, stamp=stamp)
