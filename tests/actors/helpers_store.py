"""A delegating Store proxy for actor tests: observes commits, injects failures, gates writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel

from supervisor.policy.retirement.history import HistorySummary
from supervisor.store.base import (
    ActiveChanges,
    CommitChain,
    ControlTx,
    HostLeases,
    ObservedServers,
    RegistryView,
    Row,
    Store,
    WriteTx,
)

__all__ = ["RecordingStore", "RecordingTx"]


class RecordingTx:
    """Delegates every WriteTx operation; records heartbeat batches and registration inserts."""

    def __init__(self, inner: WriteTx, owner: RecordingStore) -> None:
        self._inner = inner
        self._owner = owner

    def savepoint(self) -> AbstractAsyncContextManager[None]:
        return self._inner.savepoint()

    async def registrations(
        self, *, status: str | None = None, worker_identities: Sequence[str] | None = None
    ) -> list[Row]:
        return await self._inner.registrations(status=status, worker_identities=worker_identities)

    async def history_summary(self) -> HistorySummary:
        return await self._inner.history_summary()

    async def history_scope(self, keys: Collection[tuple[str, str]]) -> list[Row]:
        return await self._inner.history_scope(keys)

    async def max_fencing_epoch(self, *, client_instance_id: str, namespace: str) -> int:
        return await self._inner.max_fencing_epoch(
            client_instance_id=client_instance_id, namespace=namespace
        )

    async def active_by_pid(self, pid: int) -> list[Row]:
        return await self._inner.active_by_pid(pid)

    async def insert_registration(self, row: Mapping[str, Any]) -> None:
        self._owner.events.append(f"insert:{row.get('worker_identity')}")
        await self._inner.insert_registration(row)

    async def touch_heartbeats(self, beats: Sequence[tuple[str, str]]) -> int:
        self._owner.touch_calls.append(list(beats))
        return await self._inner.touch_heartbeats(beats)

    async def set_status(
        self,
        worker_identity: str,
        *,
        expected_status: str,
        new_status: str,
        stamp_column: str | None,
        stamp: str | None,
    ) -> bool:
        return await self._inner.set_status(
            worker_identity,
            expected_status=expected_status,
            new_status=new_status,
            stamp_column=stamp_column,
            stamp=stamp,
        )

    async def retire_guarded(
        self, expected: Mapping[str, Any], *, retired_at: str, retired_by: str, reason: str
    ) -> bool:
        return await self._inner.retire_guarded(
            expected, retired_at=retired_at, retired_by=retired_by, reason=reason
        )

    async def retire_guarded_many(
        self,
        expected: Sequence[Mapping[str, Any]],
        *,
        retired_at: str,
        retired_by: str,
        reason: str,
    ) -> list[bool]:
        return await self._inner.retire_guarded_many(
            expected, retired_at=retired_at, retired_by=retired_by, reason=reason
        )

    async def leases(self, *, status: str | None = None) -> list[Row]:
        return await self._inner.leases(status=status)

    async def upsert_lease(self, lease: Mapping[str, Any]) -> None:
        await self._inner.upsert_lease(lease)

    async def expire_leases(self, *, now_stamp: str) -> list[Row]:
        return await self._inner.expire_leases(now_stamp=now_stamp)

    async def append_audit(self, event: Mapping[str, Any]) -> None:
        await self._inner.append_audit(event)

    def control(self) -> ControlTx:
        return self._inner.control()

    def hosts(self) -> HostLeases:
        return self._inner.hosts()

    def observed(self) -> ObservedServers:
        return self._inner.observed()


class RecordingStore:
    """A Store that forwards to a real one and lets a test watch and perturb the writes.

    * ``events`` records ``commit:start`` when a write body finished cleanly and
      ``commit:done`` once the real COMMIT returned (tests append their own events).
    * ``before_commit`` runs between the two, inside the open transaction.
    * ``commit_error``: raised instead of committing, so the real store rolls back.
    * ``gate``: when set to an unset Event, every write waits for it before BEGIN;
      ``write_waiting`` is set as soon as one does.
    * ``read_leases_error`` / ``read_registrations_error``: raised by those reads.
    """

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.dialect = inner.dialect
        self.events: list[str] = []
        self.touch_calls: list[list[tuple[str, str]]] = []
        self.writes_started = 0
        #: Each write transaction's ``durable`` flag, in order.
        self.durable_writes: list[bool] = []
        self.before_commit: Callable[[], Awaitable[None]] | None = None
        self.commit_error: Exception | None = None
        self.gate: anyio.Event | None = None
        self.write_waiting = anyio.Event()
        self.read_leases_error: Exception | None = None
        self.read_registrations_error: Exception | None = None
        self.in_flight = 0
        self._idle = anyio.Event()
        self._idle.set()

    # --- quiescence: store calls run on aiosqlite's thread, which a FakeClock settle cannot see

    def _begin(self) -> None:
        self.in_flight += 1
        if self.in_flight == 1:
            self._idle = anyio.Event()

    def _end(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no store call is in progress."""
        while self.in_flight:
            await self._idle.wait()

    async def read_active_processes(self) -> list[tuple[str, Any, Any, Any]]:
        # The sweep's narrow read fails the same way a full registration read does.
        if self.read_registrations_error is not None:
            raise self.read_registrations_error
        self._begin()
        try:
            return await self._inner.read_active_processes()
        finally:
            self._end()

    async def read_registrations(self, *, status: str | None = None) -> list[Row]:
        if self.read_registrations_error is not None:
            raise self.read_registrations_error
        self._begin()
        try:
            return await self._inner.read_registrations(status=status)
        finally:
            self._end()

    async def read_registry_view(self) -> RegistryView:
        # The plan's read: fails the same way a full registration read does.
        if self.read_registrations_error is not None:
            raise self.read_registrations_error
        self._begin()
        try:
            return await self._inner.read_registry_view()
        finally:
            self._end()

    async def read_active_changes(self, cursor: int) -> ActiveChanges:
        # The kept counts' read: fails the same way a full registration read does.
        if self.read_registrations_error is not None:
            raise self.read_registrations_error
        self._begin()
        try:
            return await self._inner.read_active_changes(cursor)
        finally:
            self._end()

    async def read_history_scope(self, keys: Collection[tuple[str, str]]) -> list[bytes]:
        self._begin()
        try:
            return await self._inner.read_history_scope(keys)
        finally:
            self._end()

    async def read_history(
        self, *, after: str | None = None, limit: int = 100, needle: str | None = None
    ) -> list[Row]:
        self._begin()
        try:
            return await self._inner.read_history(after=after, limit=limit, needle=needle)
        finally:
            self._end()

    async def read_leases(self, *, status: str | None = None) -> list[Row]:
        if self.read_leases_error is not None:
            raise self.read_leases_error
        self._begin()
        try:
            return await self._inner.read_leases(status=status)
        finally:
            self._end()

    async def read_audit(self, *, limit: int = 100) -> list[Row]:
        self._begin()
        try:
            return await self._inner.read_audit(limit=limit)
        finally:
            self._end()

    async def read_host_leases(self) -> list[Row]:
        self._begin()
        try:
            return await self._inner.read_host_leases()
        finally:
            self._end()

    async def read_observed_servers(self, host_id: str, *, live_only: bool = True) -> list[Row]:
        self._begin()
        try:
            return await self._inner.read_observed_servers(host_id, live_only=live_only)
        finally:
            self._end()

    @asynccontextmanager
    async def write(self, *, durable: bool = True) -> AsyncIterator[WriteTx]:
        gate = self.gate
        if gate is not None:
            self.write_waiting.set()
            await gate.wait()
        self.writes_started += 1
        self.durable_writes.append(durable)
        self._begin()
        try:
            async with self._inner.write(durable=durable) as tx:
                yield RecordingTx(tx, self)
                self.events.append("commit:start")
                if self.before_commit is not None:
                    await self.before_commit()
                # Give any reply sent too early every chance to reach its receiver first.
                for _ in range(16):
                    await anyio.lowlevel.checkpoint()
                if self.commit_error is not None:
                    raise self.commit_error
            self.events.append("commit:done")
        finally:
            self._end()

    def submit_heartbeats(
        self, beats: Sequence[tuple[str, str]], chain: CommitChain
    ) -> Awaitable[bool]:
        """Through ``write()``, so gates, commit hooks and recorded touches apply to
        pipelined heartbeat batches too; queued in order like the real store's jobs."""
        return asyncio.ensure_future(self._stamp_and_commit(list(beats), chain))

    async def _stamp_and_commit(self, beats: list[tuple[str, str]], chain: CommitChain) -> bool:
        # Tasks take the store's write lock in the order they were created.
        try:
            async with self.write() as tx:
                if chain.broken:
                    return False
                if await tx.touch_heartbeats(beats) != len(beats):
                    raise _Unstamped
        except _Unstamped:
            chain.broken = True
            return False
        except BaseException:
            chain.broken = True
            raise
        return True

    async def close(self) -> None:
        await self._inner.close()


class _Unstamped(Exception):
    """Rolls back a heartbeat batch that found a row no longer active."""
