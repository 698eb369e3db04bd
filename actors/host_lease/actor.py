"""Host lease keeper: renews this host's lease through the writer, plans and applies dead hosts."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, assert_never

from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from actors.calls import Call
from actors.host_lease.writes import RenewHostLease, RetireHostRows
from actors.mailbox import Actor, Inbox, Reply, ask
from actors.replies import HostLeaseStatus, WriteAck
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.observe.logs import get_logger
from supervisor.operations.declared import HostApplyRequest
from supervisor.operations.grants import ProfileLookup, regrant_later
from supervisor.policy.canonical import canon
from supervisor.policy.retirement.host_leases import (
    HostRetirementPlan,
    lease_owner_keys,
    plan_host_retirement,
)
from supervisor.store.base import Store

__all__ = [
    "HostLeaseInbox",
    "HostLeaseKeeper",
    "HostLeaseSettings",
    "HostLeaseStatusQuery",
]

_log = get_logger()


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLeaseStatusQuery:
    reply: Reply[HostLeaseStatus]


#: A host plan (read-only) and a host apply (the writer runs its compare-and-swap) come as
#: the ops' requests (``Call``).
HostLeaseInbox = HostLeaseStatusQuery | Call


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLeaseSettings:
    #: Off for a private SQLite registry (no other host can read it); on for a shared one.
    enabled: bool = False
    lease_seconds: float = 30.0
    renew_interval_seconds: float = 10.0
    #: How long a host's lease must have been expired before another host may retire
    #: its rows: long enough to outlast a network partition or a slow reboot.
    retire_after_seconds: float = 600.0


@dataclass(kw_only=True, eq=False, repr=False)
class HostLeaseKeeper(Actor[HostLeaseInbox]):
    """Keeps this host's lease row alive and answers host-retirement plans and applies.

    A renewal is a writer message like any other write, at ``renew_interval_seconds``
    of the injected clock. When a renewal learns that another host declared this one
    dead, it says so loudly: those rows are retired, so each worker's next heartbeat is
    refused with ``registration_not_active`` and the worker registers again.
    """

    inbox: Inbox[HostLeaseInbox]
    writer: MemoryObjectSendStream[WriterInbox]
    store: Store
    clock: Clock
    profiles: ProfileLookup
    host_id: str | None
    boot_id: str | None
    supervisor_id: str
    settings: HostLeaseSettings

    def __post_init__(self) -> None:
        self.status = HostLeaseStatus(
            host_id=self.host_id, supervisor_id=self.supervisor_id, enabled=self.settings.enabled
        )

    async def on_start(self, tg: TaskGroup) -> None:
        if self.settings.enabled and self.host_id is not None:
            # The first renewal happens before ready: a supervisor that starts is
            # registered as this host's (or knows why not) before it serves.
            await self.renew()
            tg.start_soon(self._renewer)

    async def on_receive(self, message: HostLeaseInbox, tg: TaskGroup) -> None:
        with message.reply:
            match message:
                case HostLeaseStatusQuery():
                    message.reply.send(self.status)
                # The caller's grant was decided at entry (``grant``, in the handle).
                case Call(op="host_plan"):
                    host: Any = message.request
                    message.reply.send(await self.plan(host.host_id))
                case Call():
                    message.reply.send(await self._apply(message))
                case _:
                    assert_never(message)

    async def _renewer(self) -> None:
        interval = self.settings.renew_interval_seconds
        deadline = self.clock.monotonic() + interval
        while True:
            await self.clock.sleep_until(deadline)
            deadline += interval
            await self.renew()

    async def renew(self) -> WriteAck | None:
        """One renewal through the writer; the outcome lands in ``status``."""
        host_id = self.host_id
        if host_id is None:
            return None
        try:
            ack: WriteAck = await ask(
                self.writer,
                lambda reply: RenewHostLease(
                    host_id=host_id,
                    boot_id=self.boot_id,
                    supervisor_id=self.status.supervisor_id,
                    lease_seconds=self.settings.lease_seconds,
                    reply=reply,
                ),
                actor="registry_writer",
            )
        except Exception as exc:
            _log.error("host_lease_renew_failed", host_id=host_id, error=repr(exc))
            self.status = replace(self.status, last_code="renew_failed", last_detail=repr(exc))
            return None
        self._observe(ack)
        return ack

    def _observe(self, ack: WriteAck) -> None:
        status = self.status
        if not ack.ok:
            _log.error("host_lease_refused", host_id=self.host_id, code=ack.code, detail=ack.detail)
            self.status = replace(status, last_code=ack.code, last_detail=ack.detail)
            return
        declared = bool(ack.data.get("declared_dead"))
        if declared:
            by = canon(ack.data.get("declared_dead_by"))
            _log.warning(
                "host_declared_dead",
                host_id=self.host_id,
                declared_by=by,
                retired_rows=ack.data.get("retired_rows"),
                action="workers re-register: their rows were retired",
            )
            status = replace(
                status, declared_dead_count=status.declared_dead_count + 1, declared_dead_by=by
            )
        self.status = replace(
            status,
            epoch=int(ack.data.get("epoch") or 0),
            renewals=status.renewals + 1,
            last_code="declared_dead" if declared else "ok",
            last_detail="",
        )

    async def plan(self, host_id: str) -> HostRetirementPlan:
        """Read-only plan over committed rows (the apply recomputes it under lock)."""
        rows = await self.store.read_registrations(status="active")
        sessions, pids = lease_owner_keys(await self.store.read_leases(status="active"))
        hosts = {str(r["host_id"]): r for r in await self.store.read_host_leases()}
        return plan_host_retirement(
            rows,
            host_id=host_id,
            lease=hosts.get(host_id),
            local_host_id=self.host_id,
            now=self.clock.now(),
            retire_after_seconds=self.settings.retire_after_seconds,
            owner_sessions=sessions,
            owner_pids=pids,
        )

    async def _apply(self, call: Call) -> WriteAck:
        request = call.request_as(HostApplyRequest)
        caller = call.profile.name if call.profile is not None else None
        name = caller or "unknown"
        try:
            ack: WriteAck = await ask(
                self.writer,
                lambda reply: RetireHostRows(
                    host_id=request.host_id,
                    host_token=request.host_token,
                    candidate_fingerprint=request.candidate_fingerprint,
                    worker_identities=tuple(request.worker_identities),
                    # Who, from where: the row history names the profile and the host.
                    retired_by=f"{name}@{self.host_id}",
                    local_host_id=self.host_id,
                    retire_after_seconds=self.settings.retire_after_seconds,
                    recheck_grant=regrant_later(self.profiles, caller, "host_apply"),
                    reply=reply,
                ),
                actor="registry_writer",
            )
        except Exception as exc:
            return WriteAck(ok=False, code="transaction_failed", detail=repr(exc))
        return ack
