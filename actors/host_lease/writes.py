"""Host lease messages to the writer and their writes: renewal, and a dead host's retirement."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from actors.mailbox import Reply
from actors.replies import WriteAck
from supervisor.errors import PermissionDenied
from supervisor.observe.logs import get_logger
from supervisor.policy.canonical import canon
from supervisor.policy.retirement.host_leases import (
    REASON_HOST_LEASE_EXPIRED,
    host_refusal,
    host_token,
    lease_owner_keys,
    plan_host_retirement,
    renew,
)
from supervisor.policy.retirement.reasons import (
    OUTCOME_CANDIDATES_MOVED,
    OUTCOME_NOTHING_REQUESTED,
    REASON_ROW_CHANGED,
)
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import Row, WriteTx

__all__ = [
    "HOST_LEASE_MOVED",
    "HOST_NOT_IN_PLAN",
    "HostWrite",
    "RenewHostLease",
    "RetireHostRows",
    "handle_host_write",
]

HOST_LEASE_MOVED = "host_lease_moved"
HOST_NOT_IN_PLAN = "not_in_plan"

_log = get_logger()


@dataclass(frozen=True, slots=True, kw_only=True)
class RenewHostLease:
    """Register or renew this host's lease until now + ``lease_seconds``.

    The ack's ``data`` says ``declared_dead`` (and by whom, how many rows) when another
    host had retired this host's rows in the meantime; ``code`` is ``host_id_in_use``
    when another live supervisor holds the host id.
    """

    host_id: str
    boot_id: str | None
    supervisor_id: str
    lease_seconds: float
    reply: Reply[WriteAck] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RetireHostRows:
    """Compare-and-swap retirement of a silent host's rows (from ``plan_host_retirement``).

    Refused unless the host's lease still has ``host_token`` and the fresh plan still
    has ``candidate_fingerprint``; every requested identity must be a candidate.
    """

    host_id: str
    host_token: str
    candidate_fingerprint: str
    worker_identities: tuple[str, ...]
    retired_by: str
    local_host_id: str | None
    retire_after_seconds: float
    #: The caller's grant, re-read inside the transaction immediately before the first
    #: write (None = still granted, else why not), so revoking it takes effect at once.
    recheck_grant: Callable[[], str | None]
    reply: Reply[WriteAck] | None = None


HostWrite = RenewHostLease | RetireHostRows


class _Moved(Exception):
    """A guarded write matched nothing: undo this message's writes (its savepoint)."""


async def handle_host_write(tx: WriteTx, message: HostWrite, now: datetime) -> WriteAck:
    if isinstance(message, RenewHostLease):
        return await _renew(tx, message, now)
    return await _retire(tx, message, now)


async def _renew(tx: WriteTx, message: RenewHostLease, now: datetime) -> WriteAck:
    hosts = tx.hosts()
    existing = await hosts.lease(message.host_id)
    decision = renew(
        existing,
        host_id=message.host_id,
        boot_id=message.boot_id,
        supervisor_id=message.supervisor_id,
        now=now,
        lease_seconds=message.lease_seconds,
    )
    if decision.refused:
        return WriteAck(ok=False, code=decision.refused, detail=decision.detail)
    if decision.insert is not None:
        await hosts.insert(decision.insert)
    elif decision.changes is not None and not await hosts.update(
        message.host_id,
        expected_epoch=decision.expected_epoch,
        expected_status=decision.expected_status,
        changes=decision.changes,
    ):
        # Read under this transaction's lock, so only a store without row locks gets here.
        return WriteAck(ok=False, code=HOST_LEASE_MOVED, detail="host lease changed while renewing")
    data = {
        "epoch": decision.epoch,
        "declared_dead": decision.declared_dead,
        "declared_dead_by": decision.declared_dead_by,
        "retired_rows": decision.retired_rows,
    }
    return WriteAck(ok=True, data=data)


def _lease_refusal(lease: Row | None, message: RetireHostRows, now: datetime) -> WriteAck | None:
    """The plan's refusal from the lease alone, when the lease is still the planned one."""
    if lease is None or host_token(lease) != message.host_token:
        return None  # the locked path below answers (host_lease_moved and the rest)
    code, detail = host_refusal(
        lease,
        host_id=message.host_id,
        local_host_id=message.local_host_id,
        now=now,
        after=message.retire_after_seconds,
    )
    return WriteAck(ok=False, code=code, detail=detail) if code else None


async def _retire(tx: WriteTx, message: RetireHostRows, now: datetime) -> WriteAck:
    requested = dict.fromkeys(message.worker_identities)
    if not requested:
        return WriteAck(ok=False, code=OUTCOME_NOTHING_REQUESTED, detail="no identities requested")
    # A lease that is live (or this host's own) refuses before any row is locked: the
    # unlocked read can only refuse, and a host's heartbeat UPDATE does not lock its rows
    # in identity order, so locking a live host's rows here could deadlock with its own
    # group commit. Everything below re-reads under lock.
    early = _lease_refusal(await tx.hosts().lease(message.host_id, lock=False), message, now)
    if early is not None:
        return early
    # Lock order: the requested rows, then the host's lease, the same order as a group
    # commit of that host's own beats followed by its renewal, so the two never deadlock.
    await tx.registrations(worker_identities=list(requested))
    lease = await tx.hosts().lease(message.host_id)
    if host_token(lease) != message.host_token:
        # The host renewed (it is back), rebooted, or was declared dead by someone else.
        return WriteAck(
            ok=False, code=HOST_LEASE_MOVED, detail="the host lease changed since the plan"
        )
    rows = await tx.registrations(status="active")
    sessions, pids = lease_owner_keys(await tx.leases(status="active"))
    plan = plan_host_retirement(
        rows,
        host_id=message.host_id,
        lease=lease,
        local_host_id=message.local_host_id,
        now=now,
        retire_after_seconds=message.retire_after_seconds,
        owner_sessions=sessions,
        owner_pids=pids,
    )
    if plan.refused:
        return WriteAck(ok=False, code=plan.refused, detail=plan.detail)
    if plan.candidate_fingerprint != message.candidate_fingerprint:
        return WriteAck(
            ok=False, code=OUTCOME_CANDIDATES_MOVED, detail="the host's candidate rows changed"
        )
    by_identity = {canon(r.get("worker_identity")): r for r in plan.candidate_rows}
    missing = [i for i in requested if i not in by_identity]
    if missing:
        return WriteAck(
            ok=False, code=HOST_NOT_IN_PLAN, detail=f"not candidates: {', '.join(missing)}"
        )
    assert lease is not None  # a plan without a lease is refused above
    denial = message.recheck_grant()
    if denial is not None:
        return WriteAck(
            ok=False,
            code=PermissionDenied.code,
            detail=denial,
        )
    stamp = format_stamp(now)
    try:
        async with tx.savepoint():
            matched = await tx.retire_guarded_many(
                [by_identity[i] for i in requested],
                retired_at=stamp,
                retired_by=message.retired_by,
                reason=REASON_HOST_LEASE_EXPIRED,
            )
            if not all(matched):
                raise _Moved
            declared = await tx.hosts().update(
                message.host_id,
                expected_epoch=int(lease["epoch"]),
                expected_status=str(lease["status"]),
                changes={
                    "status": "declared_dead",
                    "declared_dead_at": stamp,
                    "declared_dead_by": message.retired_by,
                    "retired_rows": int(lease.get("retired_rows") or 0) + len(requested),
                },
            )
            if not declared:
                raise _Moved
            await tx.append_audit(
                {
                    "at": stamp,
                    "actor": message.retired_by,
                    "action": "retire_host_rows",
                    "outcome": "applied",
                    "detail": {"host_id": message.host_id, "retired": list(requested)},
                }
            )
    except _Moved:
        return WriteAck(ok=False, code=REASON_ROW_CHANGED, detail="a row changed since the plan")
    _log.warning("host_rows_retired", host_id=message.host_id, retired=len(requested))
    return WriteAck(ok=True, code="applied", data={"retired": list(requested)})
