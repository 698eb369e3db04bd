"""Registrations in the writer's transaction: insert (superseding a re-registration), release."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.replies import WriteAck
from actors.writer.beats import NOT_ACTIVE, Fencing, check_beat, fencing_of
from actors.writer.inbox import ReleaseRegistration
from supervisor.policy.canonical import canon
from supervisor.policy.fleet.liveness import STATUS_ACTIVE, STATUS_RELEASED, STATUS_SUPERSEDED
from supervisor.policy.incarnation import same_incarnation
from supervisor.store.base import Row, WriteTx

__all__ = ["register", "release"]

# ``fencing`` is what the writer remembers of each active row (see ``RegistryWriter``):
# both functions keep it current as rows are inserted, superseded and released.


async def register(tx: WriteTx, row: Mapping[str, Any], fencing: dict[str, Fencing]) -> WriteAck:
    """Insert a registration, superseding the same process's earlier rows."""
    record = dict(row)
    # Each new registration of a slot fences out every earlier one, also
    # released and retired ones: an epoch never goes backwards.
    record["fencing_epoch"] = (
        await tx.max_fencing_epoch(
            client_instance_id=canon(row.get("client_instance_id")),
            namespace=canon(row.get("namespace")),
        )
        + 1
    )
    pid = row.get("pid")
    earlier = await tx.active_by_pid(int(pid)) if isinstance(pid, int) else []
    superseded = [r for r in earlier if _same_incarnation(r, record)]
    for old in superseded:
        await tx.set_status(
            str(old["worker_identity"]),
            expected_status=STATUS_ACTIVE,
            new_status=STATUS_SUPERSEDED,
            stamp_column=None,
            stamp=None,
        )
    await tx.insert_registration(record)
    # Remembered before commit on purpose: should the batch roll back, a
    # beat for this identity updates no row and is judged from the table.
    fencing[str(record["worker_identity"])] = fencing_of(record)
    for old in superseded:
        fencing.pop(str(old["worker_identity"]), None)
    return WriteAck(
        ok=True,
        data={
            "registration": record,
            "superseded": [str(r["worker_identity"]) for r in superseded],
        },
    )


async def release(
    tx: WriteTx, message: ReleaseRegistration, fencing: dict[str, Fencing]
) -> WriteAck:
    """Release a registration whose claim still matches it."""
    rows = await tx.registrations(worker_identities=[message.worker_identity])
    code, detail = check_beat(rows[0] if rows else None, message)
    if code != "ok":
        return WriteAck(ok=False, code=code, detail=detail)
    changed = await tx.set_status(
        message.worker_identity,
        expected_status=STATUS_ACTIVE,
        new_status=STATUS_RELEASED,
        stamp_column="released_at",
        stamp=message.stamp,
    )
    if not changed:
        return WriteAck(ok=False, code=NOT_ACTIVE, detail="registration is no longer active")
    if message.audit is not None:
        await tx.append_audit(message.audit)
    fencing.pop(message.worker_identity, None)
    return WriteAck(ok=True, data={"released_at": message.stamp})


def _same_incarnation(old: Row, new: Mapping[str, Any]) -> bool:
    """The same process registering again replaces its earlier row."""
    keys = ("host_id", "pid")
    if not all(canon(old.get(k)) and canon(old.get(k)) == canon(new.get(k)) for k in keys):
        return False
    # A row recorded before pidfd inodes were is the same process by its start alone: one
    # pid names one live process, so the older one of that start has gone either way.
    started, starts = canon(old.get("process_start_time")), canon(new.get("process_start_time"))
    return bool(started) and bool(starts) and same_incarnation(started, starts)
