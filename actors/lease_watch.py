"""Lease watch: expires leases on the clock via the writer; knows who holds active leases."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import assert_never

from anyio.abc import TaskGroup

from actors.mailbox import Actor, Inbox, Outbox, Reply, ask, reply_with
from actors.replies import LeaseOwners, WriteAck
from actors.writer.inbox import ExpireLeases, WriterInbox
from supervisor.clock import Clock
from supervisor.observe.logs import get_logger
from supervisor.policy.retirement.fingerprints import lease_fingerprint
from supervisor.policy.retirement.plan import ProtectedOwners, protected_from_leases
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import Store

__all__ = ["LeaseOwnersQuery", "LeaseWatch", "LeaseWatchInbox", "LeaseWatchSettings"]

_log = get_logger()


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseOwnersQuery:
    reply: Reply[LeaseOwners]


LeaseWatchInbox = LeaseOwnersQuery


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseWatchSettings:
    expiry_interval_seconds: float = 5.0


_UNREADABLE = LeaseOwners(
    readable=False,
    owners=ProtectedOwners(),
    fingerprint="",
    active_lease_count=0,
    detail="leases have not been read yet",
)


@dataclass(kw_only=True, eq=False, repr=False)
class LeaseWatch(Actor[LeaseWatchInbox]):
    """Answers "who owns an active lease" from a fresh read; unreadable is never "nobody"."""

    inbox: Inbox[LeaseWatchInbox]
    writer: Outbox[WriterInbox]
    store: Store
    clock: Clock
    settings: LeaseWatchSettings = field(default_factory=LeaseWatchSettings)
    #: The owners as last read (unreadable until the first read).
    last: LeaseOwners = field(default=_UNREADABLE, init=False)
    expired_total: int = field(default=0, init=False)

    async def on_start(self, tg: TaskGroup) -> None:
        tg.start_soon(self._expirer)

    async def on_receive(self, message: LeaseWatchInbox, tg: TaskGroup) -> None:
        match message:
            case LeaseOwnersQuery():
                await reply_with(message.reply, self.refresh())
            case _:
                assert_never(message)

    async def _expirer(self) -> None:
        while True:
            await self.expire_due()
            await self.clock.sleep(self.settings.expiry_interval_seconds)

    async def expire_due(self) -> list[str]:
        """Ask the writer to expire every active lease whose deadline has passed."""
        stamp = format_stamp(self.clock.now())
        try:
            ack: WriteAck = await ask(
                self.writer,
                lambda reply: ExpireLeases(now_stamp=stamp, reply=reply),
                actor="registry_writer",
            )
        except Exception as exc:
            _log.error("lease_expiry_failed", error=repr(exc))
            return []
        expired = [str(lease_id) for lease_id in ack.data.get("expired", [])] if ack.ok else []
        if expired:
            self.expired_total += len(expired)
            _log.info("leases_expired", lease_ids=expired)
        await self.refresh()
        return expired

    async def refresh(self) -> LeaseOwners:
        try:
            leases = await self.store.read_leases(status="active")
        except Exception as exc:
            self.last = replace(_UNREADABLE, detail=f"lease store unreadable: {exc}")
            return self.last
        self.last = LeaseOwners(
            readable=True,
            owners=protected_from_leases(leases),
            fingerprint=lease_fingerprint(leases),
            active_lease_count=len(leases),
        )
        return self.last
