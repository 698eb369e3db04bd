"""Wires the actors together: mailboxes, start order, restart budget, orderly drain on stop."""

from __future__ import annotations

import inspect
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
from actors.host_lease.actor import HostLeaseInbox, HostLeaseKeeper, HostLeaseSettings
from actors.lease_watch import LeaseWatch, LeaseWatchInbox, LeaseWatchSettings
from actors.liveness.actor import LivenessActor, LivenessSettings
from actors.liveness.inbox import LivenessInbox
from actors.mailbox import Actor
from actors.reap import ReapActor, ReapInbox, ReapSettings
from actors.retirement.actor import RetirementActor, RetirementSettings
from actors.retirement.inbox import RetirementInbox
from actors.server_guard import ServerGuard, ServerGuardInbox, ServerGuardSettings
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
from supervisor.operations.grants import ProfileLookup
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

#: The ``AppSettings`` field of each actor whose name differs from its own.
_SETTINGS = {
    "registry_writer": "writer",
    "lease_watch": "leases",
    "host_lease": "hosts",
    "server_guard": "servers",
}


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
        self.hosts = HostLeaseCalls(self._hosts_tx, writer=self._writer_tx, clock=self.clock)
        self.handle = SupervisorHandle(
            heartbeat=self._heartbeat_tx,
            retirement=self._retirement_tx,
            liveness=self._liveness_tx,
            lease_watch=self._leases_tx,
            writer=self._writer_tx,
            reap=self._reap_tx,
            clock=self.clock,
            census=self._census_tx,
            profiles=self.profiles,
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
        probes, start = self.probes, partial(self._start, tg)
        liveness, leases = self._liveness_tx, self._leases_tx
        await start("registry_writer", RegistryWriter, keep="writer", inbox=self._writer_rx)
        await start("liveness", LivenessActor, keep="liveness", inbox=self._liveness_rx)
        await start("lease_watch", LeaseWatch, keep="lease_watch", inbox=self._leases_rx)
        await start(
            "heartbeat", HeartbeatActor, inbox=self._heartbeat_rx, liveness=liveness.clone()
        )
        await start(
            "retirement",
            RetirementActor,
            inbox=self._retirement_rx,
            liveness=liveness.clone(),
            lease_watch=leases.clone(),
        )
        await start(
            "host_lease",
            HostLeaseKeeper,
            keep="host_lease",
            inbox=self._hosts_rx,
            host_id=probes.host_id(),
            boot_id=probes.boot_id(),
            supervisor_id=self.supervisor_id,
        )
        await start(
            "server_guard",
            ServerGuard,
            keep="server_guard",
            inbox=self._servers_rx,
            heartbeat=self._heartbeat_tx.clone(),
        )
        await start(
            "census",
            CensusActor,
            keep="census",
            inbox=self._census_rx,
            guard=self._servers_tx.clone(),
        )
        await start("reap", ReapActor, inbox=self._reap_rx, census=self._reap_census.clone())

    async def _start(
        self,
        tg: TaskGroup,
        name: str,
        actor: Callable[..., Actor[Any]],
        *,
        keep: str | None = None,
        **own: Any,
    ) -> None:
        """Start ``actor`` as ``name`` under the restart budget, built (again after a crash)
        from ``own`` (its inbox and outboxes) and what every actor takes by the same name:
        the store, clock, probes, metrics, profiles, its settings and a clone of the
        writer's inbox, each given only where the actor declares it.

        The outbox clones are the actor's, closed when it ends for good. ``keep`` names
        the attribute that holds the running instance (health and tests read it).
        """
        declared = inspect.signature(actor).parameters
        shared = {
            "store": self.store,
            "clock": self.clock,
            "probes": self.probes,
            "metrics": self.metrics,
            "profiles": self.profiles,
            "settings": getattr(self.settings, _SETTINGS.get(name, name)),
        }
        built = {key: value for key, value in shared.items() if key in declared} | own
        owned = [value for value in own.values() if isinstance(value, MemoryObjectSendStream)]
        if actor is not RegistryWriter:
            # Every other actor holds a clone of the writer's inbox, whether it writes or
            # not, so the writer sees end-of-stream only after every other actor is done.
            writer = self._writer_tx.clone()
            owned.append(writer)
            if "writer" in declared:
                built["writer"] = writer

        def make() -> ActorRun:
            instance = actor(**built)
            if keep is not None:
                setattr(self, keep, instance)
            return instance.run

        await tg.start(self._supervise, name, make, owned)

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
