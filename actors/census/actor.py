"""The census actor: sweeps the host for MCP servers, keeps their usage, records observed ones."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, assert_never

import anyio
from anyio.abc import TaskGroup

from actors.census.configs import ClientConfigs
from actors.census.inbox import CensusInbox, ReportCensus, TakeCensus
from actors.census.rows import decoded, gone_row, observed_row
from actors.census.tracked import Tracked
from actors.census.tracker import Tracker
from actors.mailbox import Actor, Inbox, Outbox, let_others_run, post
from actors.server_guard.inbox import ServerGuardInbox, StopForBudget
from actors.writer.inbox import WriterInbox, ask_writer
from actors.writer.observed import RecordObservedServers
from supervisor.clock import Clock
from supervisor.errors import SupervisorError
from supervisor.observe.logs import get_logger
from supervisor.observe.metrics import Metrics
from supervisor.policy.canonical import canon
from supervisor.policy.incarnation import same_incarnation
from supervisor.policy.servers.budgets import Budget, BudgetState, judge_budgets
from supervisor.policy.servers.census import (
    PROVENANCE_OBSERVED,
    PROVENANCE_WRAPPED,
    Census,
    ProcessRef,
)
from supervisor.policy.servers.discovery import ConfiguredServer
from supervisor.policy.servers.rules import DEFAULT_RULES, DiscoveryRules
from supervisor.policy.servers.summary import HistoryPoint, history_point
from supervisor.policy.servers.view import CensusView, census_view
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import Store
from supervisor.system.probes import ProbeBackend
from supervisor.system.proc_events import ProcEvents
from supervisor.system.proc_listing import listing_is_complete

__all__ = ["CensusActor", "CensusSettings"]

_log = get_logger()

#: How long the kernel's exec events gather before they are looked at together.
_EVENT_BATCH_SECONDS = 0.1


@dataclass(frozen=True, slots=True, kw_only=True)
class CensusSettings:
    #: Sweep on a timer. Off for a supervisor embedded in a test or a benchmark; the
    #: daemon's ``[discovery] enabled`` (true by default) turns it on. A fresh census can
    #: be asked for either way.
    enabled: bool = False
    sweep_interval_seconds: float = 10.0
    #: Between sweeps, a pass over the processes started since (only those): a server is
    #: seen, and its owner recorded, while a client that lives a second still runs. 0: off.
    first_sight_interval_seconds: float = 0.5
    #: Where the kernel lets the daemon subscribe (root), each exec is looked at as the
    #: kernel reports it, instead of by that pass (which costs CPU on a quiet host).
    process_events: bool = True
    #: /proc entries listed between two yields to the event loop.
    sweep_chunk: int = 256
    #: Processes read in full (first sights) between two yields.
    first_sight_chunk: int = 32
    #: A process younger than this may not have exec'd yet: it is looked at again.
    settle_seconds: float = 2.0
    #: Sweeps whose counts the history ring keeps (for the page's chart).
    history_length: int = 360
    read_client_configs: bool = True
    config_refresh_seconds: float = 60.0
    #: How often a live observed server's ``last_seen`` is written; its first sight, its
    #: owner seen gone and its own end are written at the sweep that sees them.
    record_every_seconds: float = 60.0
    rules: DiscoveryRules = DEFAULT_RULES
    #: Whose client config files are read (None: the daemon user's home).
    home: Path | None = None
    #: ``[servers.budgets]``: wrapped servers past theirs are stopped by the server guard.
    budgets: tuple[Budget, ...] = ()


@dataclass(kw_only=True, eq=False, repr=False)
class CensusActor(Actor[CensusInbox]):
    """Owns discovery's memory of the host; writes observed servers through the writer."""

    inbox: Inbox[CensusInbox]
    writer: Outbox[WriterInbox]
    store: Store
    clock: Clock
    probes: ProbeBackend
    settings: CensusSettings = field(default_factory=CensusSettings)
    metrics: Metrics = field(default_factory=Metrics)
    #: Where a wrapped server past its budget is sent to be stopped (None: only shown).
    guard: Outbox[ServerGuardInbox] | None = None
    #: Wall seconds of the latest sweep (for the benchmark and the logs).
    last_sweep_seconds: float = field(default=0.0, init=False)
    #: How a sweep yields to the event loop between chunks (a benchmark times them).
    # A factory, not a default: a function kept on the class would bind as a method.
    pause: Callable[[], Awaitable[None]] = field(default_factory=lambda: let_others_run, init=False)

    def __post_init__(self) -> None:
        s = self.settings
        self._tracker = Tracker(
            rules=s.rules,
            chunk=s.sweep_chunk,
            first_chunk=s.first_sight_chunk,
            settle_seconds=s.settle_seconds,
            listing_complete=listing_is_complete(),
        )
        self._configs = (
            ClientConfigs(s.home or Path.home(), s.config_refresh_seconds)
            if s.read_client_configs
            else None
        )
        self._lock = anyio.Lock()
        self._sweeps = 0
        self._loaded = False
        self._census = Census(servers=(), taken_at=self.clock.monotonic())
        self._history: deque[HistoryPoint] = deque(maxlen=max(1, s.history_length))
        self._over_since: dict[ProcessRef, float] = {}
        self._budgets: tuple[BudgetState, ...] = ()

    @property
    def sweeps_completed(self) -> int:
        return self._sweeps

    @property
    def tracker(self) -> Tracker:
        return self._tracker

    async def on_start(self, tg: TaskGroup) -> None:
        if self.settings.enabled:
            tg.start_soon(self._sweeper)
            if self.settings.first_sight_interval_seconds > 0:
                events = ProcEvents.open() if self.settings.process_events else None
                source = "process_events" if events is not None else "proc_listing"
                _log.info("census_first_sights", source=source)
                if events is not None:
                    tg.start_soon(self._event_sighter, events)
                else:
                    tg.start_soon(self._first_sighter)

    async def on_stop(self) -> None:
        self._tracker.close()

    async def on_receive(self, message: CensusInbox, tg: TaskGroup) -> None:
        match message:
            case TakeCensus():
                with message.reply:
                    if message.fresh:
                        await self.sweep()
                    message.reply.send(self._census)
            case ReportCensus():
                with message.reply:
                    if message.fresh:
                        await self.sweep()
                    message.reply.send(self.view())
            case _:
                assert_never(message)

    def view(self) -> CensusView:
        return census_view(
            self._census,
            enabled=self.settings.enabled,
            sweeps=self._sweeps,
            history=self._history,
            budgets=self._budgets,
        )

    async def _judge_budgets(self, now: float) -> None:
        """Each wrapped server against its budget; the due ones go to the server guard,
        which stops them as it stops any wrapped server (and ignores a repeat)."""
        if not self.settings.budgets:
            return
        self._budgets, self._over_since = judge_budgets(
            self._census.servers, self.settings.budgets, self._over_since, now
        )
        if self.guard is None:
            return
        for state in self._budgets:
            if state.due is not None:
                _log.warning("server_over_budget", pid=state.process.pid, name=state.name,
                             reason=state.due, detail=state.detail)  # fmt: skip
                stop = StopForBudget(process=state.process, reason=state.due, detail=state.detail)
                await post(self.guard, stop, actor="server_guard")

    async def _sweeper(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception as exc:  # one failed sweep must not end discovery
                _log.error("census_sweep_failed", error=repr(exc))
            await self.clock.sleep(self.settings.sweep_interval_seconds)

    async def _first_sighter(self) -> None:
        while True:
            await self.clock.sleep(self.settings.first_sight_interval_seconds)
            try:
                await self.first_sights()
            except Exception as exc:  # one failed pass must not end discovery
                _log.error("census_first_sight_failed", error=repr(exc))

    async def _event_sighter(self, events: ProcEvents) -> None:
        try:
            while True:
                await anyio.wait_readable(events)
                # A burst of execs (a shell's pipeline, npx's chain) is looked at at once.
                await self.clock.sleep(_EVENT_BATCH_SECONDS)
                if not await self.take_events(events):
                    break  # the socket is broken: the listing takes over
        finally:
            events.close()
        await self._first_sighter()

    async def take_events(self, events: ProcEvents) -> bool:
        """Look at what the kernel reported since the last read: the processes that
        exec'd, or everything when events were lost. False: the socket is broken."""
        try:
            got = events.read()
        except OSError as exc:
            _log.warning("census_process_events_failed", error=repr(exc))
            return False
        try:
            if got.lost:
                await self.first_sights()
            elif got.execs:
                await self.looks_at(got.execs)
        except Exception as exc:  # one failed look must not end discovery
            _log.error("census_first_sight_failed", error=repr(exc))
        return True

    async def looks_at(self, pids: frozenset[int]) -> None:
        """Look at processes that just exec'd (the kernel's process events)."""
        async with self._lock:
            if not self._loaded:
                return  # the first sweep has not run: it looks at everything
            stamp = format_stamp(self.clock.now())
            await self._tracker.look_at(pids, stamp, self.pause, self._configured)

    async def first_sights(self) -> None:
        """Look at the processes started since the last look (not at the servers' trees):
        the owner of a server is its parent at first sight, so it must be seen while its
        client runs. The next sweep reads, judges and records what this found."""
        async with self._lock:
            if not self._loaded:
                return  # the first sweep has not run: it looks at everything
            stamp = format_stamp(self.clock.now())
            await self._tracker.glance(stamp, self.pause, self._configured)

    async def sweep(self) -> Census:
        """One census of the host now (one at a time: a fresh request waits for a sweep
        already running, then sweeps again)."""
        async with self._lock:
            began = time.perf_counter()
            if not self._loaded:
                await self._load_recorded()
            stamp = format_stamp(self.clock.now())
            now = self.clock.monotonic()
            tracker = self._tracker
            await tracker.sweep(stamp, now, self.pause, self._configured)
            await self._identify_wrapped()
            await self._record(stamp, now)
            self._census = Census(servers=tracker.records(), taken_at=now)
            self._sweeps += 1
            await self._judge_budgets(now)
            summary = self.view().summary
            self._history.append(history_point(summary, stamp))
            self.metrics.set_census(summary)
            self.last_sweep_seconds = time.perf_counter() - began
            return self._census

    async def _configured(self, cwds: list[str | None]) -> tuple[ConfiguredServer, ...]:
        if self._configs is None:
            return ()
        return await self._configs.entries(cwds, self.clock.monotonic())

    def _keys(self) -> tuple[str, str] | None:
        host, boot = self.probes.host_id(), self.probes.boot_id()
        return (host, boot) if host and boot else None

    async def _load_recorded(self) -> None:
        """Servers an earlier run of this host recorded: one found again under its pid and
        start keeps its first sight (its owner is the parent it had then)."""
        self._loaded = True
        keys = self._keys()
        if keys is None:
            return
        try:
            rows = await self.store.read_observed_servers(keys[0])
        except SupervisorError as exc:
            _log.warning("census_recorded_unreadable", detail=exc.detail)
            return
        recorded = self._tracker.recorded
        for row in rows:
            if row.get("boot_id") == keys[1] and row.get("pid") is not None:
                recorded[(int(row["pid"]), str(row["process_start_time"]))] = decoded(row)
            else:
                # Another boot's process is gone whatever its pid says now.
                recorded[(-1, f"{row.get('boot_id')}/{row.get('pid')}")] = decoded(row)

    async def _identify_wrapped(self) -> None:
        """The registry row of each wrapped server first seen by this sweep."""
        new = [
            s
            for s in self._tracker.servers.values()
            if s.provenance == PROVENANCE_WRAPPED and s.server.worker_identity is None
        ]
        if not new:
            return
        host = self.probes.host_id()
        rows = await self.store.read_active_processes()
        for server in new:
            for identity, pid, row_host, start in rows:
                ours = pid == server.process.pid and canon(row_host) == host and start
                if ours and same_incarnation(str(start), server.process.start):
                    server.server = replace(server.server, worker_identity=str(identity))
                    break

    async def _record(self, stamp: str, now: float) -> None:
        """Write what changed of the observed servers: first sights, owners and servers
        seen gone, and now and then that a server is still there."""
        keys = self._keys()
        tracker = self._tracker
        gone, tracker.gone = tracker.gone, []
        if keys is None:
            return
        host, boot = keys
        due: list[Tracked] = [
            s
            for s in tracker.servers.values()
            if s.provenance == PROVENANCE_OBSERVED
            and (
                s.written_at is None
                or now - s.written_at >= self.settings.record_every_seconds
                or (s.owner_gone_at is not None and not s.owner_gone_written)
            )
        ]
        rows: list[dict[str, Any]] = [
            observed_row(s, host_id=host, boot_id=boot, stamp=stamp) for s in due
        ]
        rows += [
            observed_row(s, host_id=host, boot_id=boot, stamp=stamp, gone=True)
            for s in gone
            if s.provenance == PROVENANCE_OBSERVED
        ]
        rows += [gone_row(r, stamp) for r in tracker.forget_recorded()]
        if not rows:
            return
        if await self._write(rows):
            for server in due:
                server.written_at = now
                server.owner_gone_written = server.owner_gone_at is not None

    async def _write(self, rows: Sequence[dict[str, Any]]) -> bool:
        batch = tuple(rows)
        ack = await ask_writer(
            self.writer, lambda reply: RecordObservedServers(rows=batch, reply=reply)
        )
        if not ack.ok:
            _log.warning("census_record_refused", code=ack.code, detail=ack.detail)
        return ack.ok
