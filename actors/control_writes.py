"""Control-plane writes inside the writer's transaction: the I/O around the pure decisions."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, assert_never

from actors.control_assign import AssignSpec, assign_in, check_gate, item_row, refusal
from actors.control_lifecycle import heartbeat, release, set_lock
from actors.control_links import handle_link_op
from actors.messages import (
    AssignAndLease,
    CheckAssignment,
    ControlOp,
    GetIncidentLinks,
    GetTerminalLock,
    HeartbeatLease,
    NamespaceHealthGate,
    RecordNamespaceHealth,
    ReleaseLease,
    SetTerminalLock,
    UpsertIncidentLink,
    UpsertSession,
    UpsertWorkItem,
    WriteAck,
)
from supervisor.clock import Clock
from supervisor.policy.canonical import canon
from supervisor.policy.control.plane import (
    DEFAULT_LEASE_TTL_SECONDS,
    MAX_LEASE_TTL_SECONDS,
    STATE_MERGED,
    STATE_OPEN,
    ControlPlaneRefusal,
    WorkRef,
    check_ttl,
)
from supervisor.policy.control.render import ASSIGN_OUTCOME_REFUSED
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import ControlTx, Row, WriteTx

__all__ = ["ControlSettings", "ControlWrites", "new_id"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlSettings:
    default_lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS
    max_lease_ttl_seconds: float = MAX_LEASE_TTL_SECONDS


def new_id(prefix: str) -> str:
    """A fresh, never reused id: leases and assignments are history, not slots."""
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


class ControlWrites:
    """Carries out control-plane messages in the transaction the writer opened.

    Decisions come from ``supervisor.policy``; this class only reads rows, writes
    what was decided and appends one control event per state transition. A
    refusal found before any write returns a refusal ack; anything raised rolls
    the message's savepoint back.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        settings: ControlSettings | None = None,
        make_id: Callable[[str], str] = new_id,
    ) -> None:
        self._clock = clock
        self.settings = settings or ControlSettings()
        self.make_id = make_id

    def now(self) -> tuple[datetime, str]:
        moment = self._clock.now()
        return moment, format_stamp(moment)

    def ttl(self, value: float | None) -> float:
        return check_ttl(
            value,
            default=self.settings.default_lease_ttl_seconds,
            maximum=self.settings.max_lease_ttl_seconds,
        )

    async def handle(self, tx: WriteTx, message: ControlOp) -> WriteAck:
        control = tx.control()
        try:
            match message:
                case UpsertSession():
                    return await self._upsert_session(control, message)
                case UpsertWorkItem():
                    return await self._upsert_work_item(control, message)
                case AssignAndLease():
                    return await self._assign(control, message)
                case CheckAssignment():
                    return await check_gate(self, control, message)
                case HeartbeatLease():
                    return await heartbeat(self, control, message)
                case ReleaseLease():
                    return await release(self, control, message)
                case SetTerminalLock():
                    return await set_lock(self, control, message)
                case GetTerminalLock():
                    lock = await control.active_terminal_lock(
                        remote=message.remote, org=message.org, repo=message.repo
                    )
                    return WriteAck(ok=True, data={"success": True, "terminal_lock": lock})
                case (
                    RecordNamespaceHealth()
                    | NamespaceHealthGate()
                    | UpsertIncidentLink()
                    | GetIncidentLinks()
                ):
                    return await handle_link_op(self, control, message)
                case _:
                    assert_never(message)
        except ControlPlaneRefusal as refused:
            return refusal(refused.code, refused.detail)

    # --- events and shared steps ----------------------------------------------------------

    @staticmethod
    async def event(
        control: ControlTx,
        stamp: str,
        kind: str,
        *,
        work_item_key: str | None = None,
        session_id: str | None = None,
        lease_id: str | None = None,
        **detail: Any,
    ) -> None:
        await control.append_event(
            {
                "at": stamp,
                "kind": kind,
                "work_item_key": work_item_key,
                "session_id": session_id,
                "lease_id": lease_id,
                "detail": detail or None,
            }
        )

    async def after_expiry(self, tx: WriteTx, expired: Sequence[Row], now_stamp: str) -> None:
        """Follow the lease watch's expiry: assignments expire with their leases, one event each."""
        if not expired:
            return
        control = tx.control()
        ids = [str(lease["lease_id"]) for lease in expired]
        await control.update_assignments(
            ids, expected_status="active", changes={"status": "expired", "updated_at": now_stamp}
        )
        for lease in expired:
            await self.event(
                control,
                now_stamp,
                "lease_expired",
                work_item_key=canon(lease.get("work_item_key")) or None,
                session_id=canon(lease.get("session_id")) or None,
                lease_id=str(lease["lease_id"]),
                expires_at=lease.get("expires_at"),
                by="lease_watch",
            )

    async def expire_one(self, control: ControlTx, lease: Row, stamp: str) -> bool:
        lease_id = str(lease["lease_id"])
        if not await control.update_lease(
            lease_id, expected_status="active", changes={"status": "expired"}
        ):
            return False
        await control.update_assignments(
            [lease_id], expected_status="active", changes={"status": "expired", "updated_at": stamp}
        )
        await self.event(
            control,
            stamp,
            "lease_expired",
            work_item_key=canon(lease.get("work_item_key")) or None,
            session_id=canon(lease.get("session_id")) or None,
            lease_id=lease_id,
            expires_at=lease.get("expires_at"),
            by="registry_writer",
        )
        return True

    async def ensure_session(
        self,
        control: ControlTx,
        *,
        session_id: str,
        role: str,
        profile: str | None,
        pid: int | None,
        stamp: str,
    ) -> Row | None:
        """The caller's session, created on first use; None when it has ended."""
        found = await control.session(session_id)
        if found is None:
            row: Row = {
                "session_id": session_id,
                "role": role,
                "profile": profile,
                "pid": pid,
                "status": "active",
                "started_at": stamp,
                "last_heartbeat_at": stamp,
                "updated_at": stamp,
            }
            await control.put_session(row)
            await self.event(control, stamp, "session_started", session_id=session_id, role=role)
            return row
        if canon(found.get("status")) != "active":
            return None
        if pid is not None and found.get("pid") != pid:
            await control.put_session(
                {"session_id": session_id, "status": "active", "pid": pid, "updated_at": stamp}
            )
            await self.event(control, stamp, "session_changed", session_id=session_id, pid=pid)
            found = {**found, "pid": pid}
        return found

    # --- sessions and work items ----------------------------------------------------------

    async def _upsert_session(self, control: ControlTx, message: UpsertSession) -> WriteAck:
        _, stamp = self.now()
        found = await control.session(message.session_id)
        given = {
            "role": message.role,
            "profile": message.profile,
            "namespace": message.namespace,
            "worker_identity": message.worker_identity,
            "pid": message.pid,
        }
        row: Row = {k: v for k, v in given.items() if v is not None}
        row.update(session_id=message.session_id, status=message.status, updated_at=stamp)
        row["last_heartbeat_at"] = stamp
        if found is None:
            row["started_at"] = stamp
            kind = "session_started"
        else:
            changed = {k: v for k, v in row.items() if k in {*given, "status"} and found[k] != v}
            kind = "session_changed" if changed else ""
        await control.put_session(row)
        if kind:
            detail = {k: row[k] for k in row if k in {*given, "status"}}
            await self.event(control, stamp, kind, session_id=message.session_id, **detail)
        session = {**(found or {}), **row}
        return WriteAck(ok=True, data={"success": True, "session": session})

    async def _upsert_work_item(self, control: ControlTx, message: UpsertWorkItem) -> WriteAck:
        _, stamp = self.now()
        return await self.put_item(
            control,
            message.ref,
            stamp=stamp,
            state=message.state,
            current_head_sha=message.current_head_sha,
            title=message.title,
            priority=message.priority,
        )

    async def put_item(
        self,
        control: ControlTx,
        ref: WorkRef,
        *,
        stamp: str,
        state: str | None = None,
        current_head_sha: str | None = None,
        title: str | None = None,
        priority: int | None = None,
    ) -> WriteAck:
        """Create or update a work item; one event when something actually changed."""
        found = await item_row(control, ref.key)
        old_state = canon(found.get("state")) if found is not None else None
        if old_state == STATE_MERGED and state not in (None, STATE_MERGED):
            return refusal(
                "work_item_merged", f"{ref.label} is merged; a merged item never reopens"
            )
        row: Row = {
            "work_item_key": ref.key,
            "remote": ref.remote,
            "org": ref.org,
            "repo": ref.repo,
            "kind": ref.kind,
            "number": ref.number,
            "state": state or old_state or STATE_OPEN,
            "updated_at": stamp,
        }
        for column, value in (
            ("current_head_sha", current_head_sha),
            ("title", title),
            ("priority", priority),
        ):
            if value is not None:
                row[column] = value
        tracked = ("state", "current_head_sha", "title", "priority")
        if found is None:
            row["created_at"] = stamp
            changed = {k: row[k] for k in tracked if k in row}
            kind = "work_item_created"
        else:
            changed = {k: row[k] for k in tracked if k in row and found.get(k) != row[k]}
            kind = "work_item_changed"
        await control.put_work_item(row)
        if found is None or changed:
            await self.event(control, stamp, kind, work_item_key=ref.key, **changed)
        return WriteAck(ok=True, data={"success": True, "work_item": {**(found or {}), **row}})

    # --- assign and lease (the decision and writes are in control_assign) -------------------

    async def _assign(self, control: ControlTx, message: AssignAndLease) -> WriteAck:
        now, stamp = self.now()
        spec = AssignSpec(
            session_id=message.session_id,
            role=message.role,
            ref=message.ref,
            expected_head_sha=message.expected_head_sha,
            allowed_actions=message.allowed_actions,
            forbidden_actions=message.forbidden_actions,
            phase=message.phase,
            ttl_seconds=self.ttl(message.ttl_seconds),
            owner_pid=message.owner_pid,
        )
        session = await self.ensure_session(
            control,
            session_id=spec.session_id,
            role=spec.role,
            profile=message.profile,
            pid=spec.owner_pid,
            stamp=stamp,
        )
        if session is None:
            return refusal("session_ended", f"session {spec.session_id} has ended")
        view = await assign_in(self, control, spec, session=session, now=now, stamp=stamp)
        ok = view["outcome"] != ASSIGN_OUTCOME_REFUSED
        return WriteAck(ok=ok, code=str(view["code"]), detail=str(view["reason"]), data=view)
