"""Steps shared by the control-plane writes: sessions on first use, items, lease expiry."""

from __future__ import annotations

from collections.abc import Sequence

from actors.control.context import event, refusal
from actors.control.inbox import AssignTerms, ItemFacts
from actors.replies import WriteAck
from supervisor.policy.canonical import canon
from supervisor.policy.control.plane import STATE_MERGED, STATE_OPEN, ControlPlaneRefusal
from supervisor.store.base import ControlTx, Row, WriteTx

__all__ = ["after_expiry", "ensure_session", "expire_one", "item_row", "put_item"]


async def item_row(control: ControlTx, key: str) -> Row | None:
    found = await control.work_items([key])
    return found[0] if found else None


async def after_expiry(tx: WriteTx, expired: Sequence[Row], now_stamp: str) -> None:
    """Follow the lease watch's expiry: assignments expire with their leases, one event each."""
    if not expired:
        return
    control = tx.control()
    ids = [str(lease["lease_id"]) for lease in expired]
    await control.update_assignments(
        ids, expected_status="active", changes={"status": "expired", "updated_at": now_stamp}
    )
    for lease in expired:
        await _expired_event(control, now_stamp, lease, by="lease_watch")


async def expire_one(control: ControlTx, lease: Row, stamp: str) -> bool:
    lease_id = str(lease["lease_id"])
    if not await control.update_lease(
        lease_id, expected_status="active", changes={"status": "expired"}
    ):
        return False
    await control.update_assignments(
        [lease_id], expected_status="active", changes={"status": "expired", "updated_at": stamp}
    )
    await _expired_event(control, stamp, lease, by="registry_writer")
    return True


async def _expired_event(control: ControlTx, stamp: str, lease: Row, *, by: str) -> None:
    """The one ``lease_expired`` event, whoever (``by``) noticed the lease was due."""
    await event(
        control,
        stamp,
        "lease_expired",
        work_item_key=canon(lease.get("work_item_key")) or None,
        session_id=canon(lease.get("session_id")) or None,
        lease_id=str(lease["lease_id"]),
        expires_at=lease.get("expires_at"),
        by=by,
    )


async def ensure_session(
    control: ControlTx, terms: AssignTerms, *, profile: str | None, stamp: str
) -> Row:
    """The session of ``terms``, created on first use; refused (``session_ended``) when it
    has ended.

    Raised before any write, so the caller's refusal handler answers with nothing written.
    """
    session_id, role, pid = terms.session_id, terms.role, terms.owner_pid
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
        await event(control, stamp, "session_started", session_id=session_id, role=role)
        return row
    if canon(found.get("status")) != "active":
        raise ControlPlaneRefusal("session_ended", f"session {session_id} has ended")
    if pid is not None and found.get("pid") != pid:
        await control.put_session(
            {"session_id": session_id, "status": "active", "pid": pid, "updated_at": stamp}
        )
        await event(control, stamp, "session_changed", session_id=session_id, pid=pid)
        found = {**found, "pid": pid}
    return found


async def put_item(control: ControlTx, facts: ItemFacts, *, stamp: str) -> WriteAck:
    """Create or update a work item; one event when something actually changed."""
    ref, state = facts.ref, facts.state
    found = await item_row(control, ref.key)
    old_state = canon(found.get("state")) if found is not None else None
    if old_state == STATE_MERGED and state not in (None, STATE_MERGED):
        return refusal("work_item_merged", f"{ref.label} is merged; a merged item never reopens")
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
        ("current_head_sha", facts.current_head_sha),
        ("title", facts.title),
        ("priority", facts.priority),
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
        await event(control, stamp, kind, work_item_key=ref.key, **changed)
    return WriteAck(ok=True, data={"success": True, "work_item": {**(found or {}), **row}})
