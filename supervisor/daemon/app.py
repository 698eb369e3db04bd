"""Wires the actors together: mailboxes, start order, restart budget, orderly drain on stop."""

from __future__ import annotations

import secrets
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NotRequired, TypedDict, Unpack

import anyio
from anyio import create_memory_object_stream as _stream
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.census.actor import CensusActor, CensusSettings
from actors.census.inbox import CensusInbox
from actors.heartbeat.actor import HeartbeatActor, HeartbeatSettings
from actors.heartbeat.inbox import HeartbeatInbox
from actors.host_lease import HostLeaseInbox, HostLeaseKeeper, HostLeaseSettings
from actors.lease_watch import LeaseWatch, LeaseWatchInbox, LeaseWatchSettings
from actors.liveness.actor import LivenessActor, LivenessSettings
from actors.liveness.inbox import LivenessInbox
from actors.reap import ReapActor, ReapInbox, ReapSettings
from actors.retirement.actor import ProfileLookup, RetirementActor, RetirementSettings
from actors.retirement.inbox import RetirementInbox
from actors.servers import ServerGuard, ServerGuardInbox, ServerGuardSettings
from actors.writer.actor import RegistryWriter, WriterSettings
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.daemon.restarts import (
    ActorBook,
    ActorRun,
    RestartBudget,
    RestartBudgetExceeded,
    supervise,
)
from supervisor.handle import SupervisorHandle
from supervisor.handle.hosts import HostLeaseCalls
from supervisor.observe.logs import get_logger
from supervisor.observe.metrics import Metrics
from supervisor.store.base import Store
from supervisor.system.probes import ProbeBackend

__all__ = [
    "AppSettings",
    "RestartBudgetExceeded",
    "Supervisor",
    "SupervisorParts",
    "running_supervisor",
]

_log = get_logger()


@dataclass(frozen=True, slots=True, kw_only=True)
class AppSettings:
    writer: WriterSettings = field(default_factory=WriterSettings)
    heartbeat: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    liveness: LivenessSettings = field(default_factory=LivenessSettings)
    leases: LeaseWatchSettings = field(default_factory=LeaseWatchSettings)
    retirement: RetirementSettings = field(default_factory=RetirementSettings)
    hosts: HostLeaseSettings = field(default_factory=HostLeaseSettings)
    servers: ServerGuardSettings = field(default_factory=ServerGuardSettings)
    census: CensusSettings = field(default_factory=CensusSettings)
    reap: ReapSettings = field(default_factory=ReapSettings)
    max_restarts: int = 3
    restart_window_seconds: float = 60.0
    inbox_capacity: int = 8192


class SupervisorParts(TypedDict):
    """What a Supervisor is made of: its and ``running_supervisor``'s keyword arguments."""

    store: Store
    clock: Clock
    probes: ProbeBackend
    profiles: ProfileLookup
    settings: NotRequired[AppSettings | None]
    supervisor_id: NotRequired[str | None]
    metrics: NotRequired[Metrics | None]
    #: The census the reap asks (tests); by default the supervisor's own census actor.
    census: NotRequired[MemoryObjectSendStream[CensusInbox] | None]


class Supervisor:
    """One task group, one inbox per actor, the writer started first and stopped last."""

    def __init__(self, **parts: Unpack[SupervisorParts]) -> None:
        self.store = parts["store"]
        metrics = parts.get("metrics")
        if metrics is None:
            # Loaded only when asked for: a daemon without /metrics never imports the client.
            from supervisor.observe.metrics_prometheus import PrometheusMetrics  # noqa: PLC0415

            metrics = PrometheusMetrics()
        self.metrics = metrics
        # One per daemon launch: tells this supervisor's host lease from a second one
        # started with the same host id.
        self.supervisor_id = parts.get("supervisor_id") or f"sup-{secrets.token_hex(6)}"
        self.clock = parts["clock"]
        self.probes = parts["probes"]
        self.profiles = parts["profiles"]
        self.settings = parts.get("settings") or AppSettings()
        capacity = self.settings.inbox_capacity
        # One bounded stream per actor: a full inbox makes its senders wait (backpressure).
        self._writer_tx, self._writer_rx = _stream[WriterInbox](capacity)
        self._heartbeat_tx, self._heartbeat_rx = _stream[HeartbeatInbox](capacity)
        self._liveness_tx, self._liveness_rx = _stream[LivenessInbox](capacity)
        self._leases_tx, self._leases_rx = _stream[LeaseWatchInbox](capacity)
        self._retirement_tx, self._retirement_rx = _stream[RetirementInbox](capacity)
        self._hosts_tx, self._hosts_rx = _stream[HostLeaseInbox](capacity)
        self._servers_tx, self._servers_rx = _stream[ServerGuardInbox](capacity)
        self._census_tx, self._census_rx = _stream[CensusInbox](capacity)
        self._reap_tx, self._reap_rx = _stream[ReapInbox](capacity)
        #: The census the reap asks: the census actor's, unless the caller gives another.
        self._reap_census = parts.get("census") or self._census_tx
        # Producers first, the writer last: each closes before what it feeds.
        self._outboxes: tuple[MemoryObjectSendStream[Any], ...] = (
            self._reap_tx,
            self._census_tx,
            self._servers_tx,
            self._hosts_tx,
            self._heartbeat_tx,
            self._retirement_tx,
            self._leases_tx,
            self._liveness_tx,
            self._writer_tx,
        )
        self._inboxes: tuple[MemoryObjectReceiveStream[Any], ...] = (
            self._reap_rx,
            self._census_rx,
            self._servers_rx,
            self._hosts_rx,
            self._heartbeat_rx,
            self._retirement_rx,
            self._leases_rx,
            self._liveness_rx,
            self._writer_rx,
        )
        #: The server guard's inbox, for the exec socket.
        self.servers = self._servers_tx
        self.hosts = HostLeaseCalls(self._hosts_tx)
        self.handle = SupervisorHandle(
            heartbeat=self._heartbeat_tx,
            retirement=self._retirement_tx,
            liveness=self._liveness_tx,
            lease_watch=self._leases_tx,
            writer=self._writer_tx,
            reap=self._reap_tx,
            clock=self.clock,
            census=self._census_tx,
        )
        self._stop = anyio.Event()
        self._book = ActorBook()
        #: Restarts so far, and each actor's state (see ``ActorBook``).
        self.restarts = self._book.restarts
        self.actor_states = self._book.states
        self.liveness: LivenessActor | None = None
        self.lease_watch: LeaseWatch | None = None
        self.writer: RegistryWriter | None = None
        self.host_lease: HostLeaseKeeper | None = None
        self.server_guard: ServerGuard | None = None
        self.census: CensusActor | None = None

    def stop(self) -> None:
        """Begin an orderly drain: producers first, the writer last."""
        self._stop.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with anyio.create_task_group() as tg:
                await self._start_all(tg)
                task_status.started()
                await self._stop.wait()
                _log.info("draining")
                # Closing an inbox lets its actor finish what it holds and
                # return; each actor's outbound clones close when it does, so
                # the writer sees end-of-stream only after every producer is done.
                self._close_senders()
        finally:
            # Also on a crash or cancellation: no stream may outlive the run.
            self._close_senders()
            for inbox in self._inboxes:
                inbox.close()
        _log.info("stopped")

    def _close_senders(self) -> None:
        for stream in self._outboxes:
            stream.close()

    async def _start_all(self, tg: TaskGroup) -> None:
        clock, probes, store = self.clock, self.probes, self.store
        s = self.settings

        def make_writer() -> ActorRun:
            self.writer = RegistryWriter(
                store=store,
                inbox=self._writer_rx,
                clock=clock,
                probes=probes,
                settings=s.writer,
                metrics=self.metrics,
            )
            return self.writer.run

        await tg.start(self._supervise, "registry_writer", make_writer, ())

        liveness_writer = self._writer_tx.clone()

        def make_liveness() -> ActorRun:
            self.liveness = LivenessActor(
                inbox=self._liveness_rx,
                store=store,
                clock=clock,
                probes=probes,
                settings=s.liveness,
                metrics=self.metrics,
            )
            return self.liveness.run

        await tg.start(self._supervise, "liveness", make_liveness, (liveness_writer,))

        leases_writer = self._writer_tx.clone()

        def make_leases() -> ActorRun:
            self.lease_watch = LeaseWatch(
                inbox=self._leases_rx,
                writer=leases_writer,
                store=store,
                clock=clock,
                settings=s.leases,
            )
            return self.lease_watch.run

        await tg.start(self._supervise, "lease_watch", make_leases, (leases_writer,))

        hb_writer, hb_liveness = self._writer_tx.clone(), self._liveness_tx.clone()

        def make_heartbeat() -> ActorRun:
            return HeartbeatActor(
                inbox=self._heartbeat_rx,
                writer=hb_writer,
                liveness=hb_liveness,
                clock=clock,
                probes=probes,
                settings=s.heartbeat,
                metrics=self.metrics,
            ).run

        await tg.start(self._supervise, "heartbeat", make_heartbeat, (hb_writer, hb_liveness))

        r_writer, r_liveness, r_leases = (
            self._writer_tx.clone(),
            self._liveness_tx.clone(),
            self._leases_tx.clone(),
        )

        def make_retirement() -> ActorRun:
            return RetirementActor(
                inbox=self._retirement_rx,
                writer=r_writer,
                liveness=r_liveness,
                lease_watch=r_leases,
                store=store,
                clock=clock,
                probes=probes,
                profiles=self.profiles,
                settings=s.retirement,
                metrics=self.metrics,
            ).run

        await tg.start(
            self._supervise, "retirement", make_retirement, (r_writer, r_liveness, r_leases)
        )

        hosts_writer = self._writer_tx.clone()

        def make_host_lease() -> ActorRun:
            self.host_lease = HostLeaseKeeper(
                inbox=self._hosts_rx,
                writer=hosts_writer,
                store=store,
                clock=clock,
                profiles=self.profiles,
                host_id=probes.host_id(),
                boot_id=probes.boot_id(),
                supervisor_id=self.supervisor_id,
                settings=s.hosts,
            )
            return self.host_lease.run

        await tg.start(self._supervise, "host_lease", make_host_lease, (hosts_writer,))

        guard_heartbeat, guard_writer = self._heartbeat_tx.clone(), self._writer_tx.clone()

        def make_server_guard() -> ActorRun:
            self.server_guard = ServerGuard(
                inbox=self._servers_rx,
                heartbeat=guard_heartbeat,
                writer=guard_writer,
                store=store,
                clock=clock,
                probes=probes,
                settings=s.servers,
            )
            return self.server_guard.run

        await tg.start(
            self._supervise, "server_guard", make_server_guard, (guard_heartbeat, guard_writer)
        )

        census_writer = self._writer_tx.clone()

        def make_census() -> ActorRun:
            self.census = CensusActor(
                inbox=self._census_rx,
                writer=census_writer,
                store=store,
                clock=clock,
                probes=probes,
                settings=s.census,
                metrics=self.metrics,
            )
            return self.census.run

        await tg.start(self._supervise, "census", make_census, (census_writer,))

        reap_writer, reap_census = self._writer_tx.clone(), self._reap_census.clone()
        reap = partial(ReapActor, inbox=self._reap_rx, census=reap_census, writer=reap_writer)
        make_reap = partial(reap, clock=clock, profiles=self.profiles, settings=s.reap)
        owned = (reap_writer, reap_census)
        await tg.start(self._supervise, "reap", lambda: make_reap().run, owned)

    async def _supervise(
        self,
        name: str,
        make: Callable[[], ActorRun],
        owned: Sequence[MemoryObjectSendStream[Any]],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run an actor; restart it after a crash within the budget, else fail the group."""
        budget = RestartBudget(
            max_restarts=self.settings.max_restarts,
            window_seconds=self.settings.restart_window_seconds,
        )
        await supervise(
            name,
            make,
            owned,
            budget=budget,
            book=self._book,
            clock=self.clock,
            metrics=self.metrics,
            task_status=task_status,
        )


async def _stop_on_signals(
    supervisor: Supervisor, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        # Ready only once the handler is installed: a SIGTERM that arrives
        # earlier would otherwise take the default action and kill the process.
        task_status.started()
        async for signum in signals:
            _log.info("signal", signal=signal.Signals(signum).name)
            supervisor.stop()
            return


@asynccontextmanager
async def running_supervisor(
    *, handle_signals: bool = False, **parts: Unpack[SupervisorParts]
) -> AsyncIterator[Supervisor]:
    """Start every actor; on exit drain and stop them (the store stays the caller's)."""
    supervisor = Supervisor(**parts)
    signal_scope = anyio.CancelScope()

    async def watch_signals(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with signal_scope:
            await _stop_on_signals(supervisor, task_status=task_status)

    async with anyio.create_task_group() as tg:
        await tg.start(supervisor.run)
        if handle_signals:
            await tg.start(watch_signals)
        try:
            yield supervisor
        finally:
            supervisor.stop()
            # Only the signal watcher is cancelled: the actors must drain.
            signal_scope.cancel()
