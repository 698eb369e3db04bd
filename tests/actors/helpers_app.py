"""The actor-test harness, plus quiescence and a safety net against leaked mailboxes.

Quiescence: ``FakeClock.advance`` settles until every task is blocked, but a task waiting
for aiosqlite's worker thread also counts as blocked, so a sweep or lease expiry woken by
the advance may still be reading the database when it returns. ``SettledHarness.advance``
routes every actor store call through a ``RecordingStore`` and settles until none is in
flight: after it returns, whatever the timers started has finished.

Safety net: ``Supervisor.run`` closes its memory streams only on the orderly path (stop,
then drain). When the body of ``running_supervisor`` raises, the run is cancelled before
it reaches those ``close()`` calls; the unclosed streams then warn when garbage collected,
and under ``filterwarnings = error`` that lands on whichever test runs at the time. Closing
what the supervisor left open keeps one failing test from failing others.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.mailbox import Reply
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.daemon.app import AppSettings, Supervisor, running_supervisor
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.store.sqlite.store import SQLiteStore
from tests.actors.harness import START, Harness, Profiles, default_settings
from tests.actors.harness import harness as base_harness
from tests.actors.helpers_store import RecordingStore
from tests.census_source import Take, empty_census
from tests.fakes import ScriptedProbes

__all__ = ["Bare", "SettledHarness", "bare_supervisor", "close_mailboxes", "harness", "settle"]


@dataclass
class SettledHarness(Harness):
    #: The proxy every actor uses for the database (``store`` is the real one, for asserts).
    proxy: RecordingStore = field(kw_only=True)

    async def settle(self) -> None:
        """Until every task is blocked and no store call is in flight."""
        await settle(self.clock, self.proxy)

    async def advance(self, seconds: float) -> None:
        await self.clock.advance(seconds)
        await self.settle()


async def settle(clock: FakeClock, proxy: RecordingStore) -> None:
    """Until every task is blocked and no store call through ``proxy`` is in flight."""
    while True:
        await clock.advance(0)
        if proxy.in_flight == 0:
            return
        await proxy.wait_idle()


def close_mailboxes(supervisor: Supervisor) -> None:
    """Close every memory stream the supervisor holds, and the reply channels of requests
    still queued in them (idempotent)."""
    for value in vars(supervisor).values():
        if isinstance(value, MemoryObjectReceiveStream):
            while True:
                try:
                    message = value.receive_nowait()
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break
                reply = getattr(message, "reply", None)
                if isinstance(reply, Reply):
                    reply.close()
        if isinstance(value, MemoryObjectSendStream | MemoryObjectReceiveStream):
            value.close()


@asynccontextmanager
async def harness(
    tmp_path: Path,
    *,
    settings: AppSettings | None = None,
    probes: ScriptedProbes | None = None,
    census: Take = empty_census,
) -> AsyncIterator[SettledHarness]:
    proxies: list[RecordingStore] = []

    def wrap(store: SQLiteStore) -> RecordingStore:
        proxies.append(RecordingStore(store))
        return proxies[-1]

    supervisor: Supervisor | None = None
    try:
        async with base_harness(
            tmp_path, settings=settings, probes=probes, wrap_store=wrap, census=census
        ) as h:
            supervisor = h.supervisor
            base: dict[str, Any] = {f.name: getattr(h, f.name) for f in fields(h)}
            settled = SettledHarness(**base, proxy=proxies[0])
            await settled.settle()
            yield settled
    finally:
        if supervisor is not None:
            close_mailboxes(supervisor)


@dataclass
class Bare:
    """A supervisor started with ``running_supervisor`` directly, for app-level tests."""

    supervisor: Supervisor
    clock: FakeClock
    probes: ScriptedProbes
    store: SQLiteStore
    proxy: RecordingStore


@asynccontextmanager
async def bare_supervisor(
    tmp_path: Path,
    *,
    settings: AppSettings | None = None,
    handle_signals: bool = False,
    probes: ScriptedProbes | None = None,
) -> AsyncIterator[Bare]:
    """Yields inside ``running_supervisor``; the caller sees every exception it raises.

    Unlike ``harness`` nothing is closed for the supervisor here: tests that check what a
    failed supervisor leaves behind call ``close_mailboxes`` themselves when done.
    """
    fake = FakeClock(wall=START)
    scripted = probes or ScriptedProbes(host_id="host-a", boot_id="boot-1")
    store = await open_sqlite_store(tmp_path / "registry.sqlite3")
    proxy = RecordingStore(store)
    try:
        async with running_supervisor(
            store=proxy,
            clock=MonotonicWall(fake),
            probes=scripted,
            profiles=Profiles(),
            settings=settings or default_settings(),
            handle_signals=handle_signals,
        ) as supervisor:
            bare = Bare(
                supervisor=supervisor, clock=fake, probes=scripted, store=store, proxy=proxy
            )
            await settle(fake, proxy)
            yield bare
    finally:
        await store.close()
