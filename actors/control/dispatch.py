"""Control-plane writes inside the writer's transaction: one message to the step that does it."""

from __future__ import annotations

from typing import assert_never

from actors.control.assign import assign, check_gate
from actors.control.context import ControlContext, event, refusal
from actors.control.inbox import (
    Assign,
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
)
from actors.control.lifecycle import heartbeat, release, set_lock
from actors.control.links import handle_link_op
from actors.control.steps import put_item
from actors.replies import WriteAck
from supervisor.policy.control.plane import ControlPlaneRefusal
from supervisor.store.base import ControlTx, Row, WriteTx

__all__ = ["handle_control"]


async def handle_control(ctx: ControlContext, tx: WriteTx, message: ControlOp) -> WriteAck:
    """Carry out one control-plane message in the transaction the writer opened.

    Decisions come from ``supervisor.policy``; the steps only read rows, write what was
    decided and append one control event per state transition. A refusal found before
    any write returns a refusal ack; anything raised rolls the message's savepoint back.
    """
    control = tx.control()
    try:
        match message:
            case UpsertSession():
                return await _upsert_session(ctx, control, message)
            case UpsertWorkItem():
                return await _upsert_work_item(ctx, control, message)
            case Assign():
                return await assign(ctx, control, message)
            case CheckAssignment():
                return await check_gate(ctx, control, message)
            case HeartbeatLease():
                return await heartbeat(ctx, control, message)
            case ReleaseLease():
                return await release(ctx, control, message)
            case SetTerminalLock():
                return await set_lock(ctx, control, message)
            case GetTerminalLock():
                lock = await control.active_terminal_lock(**message.where())
                return WriteAck(ok=True, data={"success": True, "terminal_lock": lock})
            case (
                RecordNamespaceHealth()
                | NamespaceHealthGate()
                | UpsertIncidentLink()
                | GetIncidentLinks()
            ):
                return await handle_link_op(ctx, control, message)
            case _:
                assert_never(message)
    except ControlPlaneRefusal as refused:
        return refusal(refused.code, refused.detail)


async def _upsert_session(
    ctx: ControlContext, control: ControlTx, message: UpsertSession
) -> WriteAck:
    _, stamp = ctx.now()
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
        await event(control, stamp, kind, session_id=message.session_id, **detail)
    session = {**(found or {}), **row}
    return WriteAck(ok=True, data={"success": True, "session": session})


async def _upsert_work_item(
    ctx: ControlContext, control: ControlTx, message: UpsertWorkItem
) -> WriteAck:
    _, stamp = ctx.now()
    return await put_item(control, message, stamp=stamp)
