"""The server guard actor: pidfds for wrapped servers and their clients, one epoll set.

A wrapped server registers through the exec socket and then becomes the server (the
wrapper ``exec``s it). From then on nothing in the server's process talks to the
supervisor, so the guard does the work a resident sidecar did, without a process per
server: it beats for the row while the server's pidfd says it runs, and when the
client's pidfd fires, the client hangs up the server's stdin for longer than the grace
period, or the server's leader exits, it stops the whole tree (SIGTERM, grace, SIGKILL,
every signal through a verified pidfd) and releases the row with an exit reason once
the last process is gone. A guard that starts (the daemon was down, or restarted)
finds running servers by the marker in their environment and adopts or stops them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, assert_never

from anyio.abc import TaskGroup

from actors.heartbeat.inbox import HeartbeatInbox, Register
from actors.mailbox import Actor, Inbox, Outbox, ask
from actors.replies import AdoptResult, RegisterResult
from actors.server_guard.adoption import Found, inspect_found, unwatched
from actors.server_guard.beats import BeatSchedule
from actors.server_guard.identity import ServerFacts, derive_claims
from actors.server_guard.inbox import AdoptServer, ServerGuardInbox, StopForBudget
from actors.server_guard.records import release_exited
from actors.server_guard.stopping import LocalTree, StopOutcome, TreeOps, stop_tree
from actors.server_guard.watches import (
    EXIT_CLIENT,
    EXIT_LEADER_UNWATCHED,
    EXIT_SERVER,
    EXIT_STDIN,
    Watched,
    Watches,
)
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock
from supervisor.errors import SupervisorError
from supervisor.observe.logs import get_logger
from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.policy.incarnation import same_incarnation
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import Store
from supervisor.system.pidfd import close_pidfd, pidfd_open
from supervisor.system.probes import ProbeBackend
from supervisor.system.process_tree import (
    dedicated_cgroup,
    duplicate_fd,
    owner_uid,
    scan_markers,
    stat_facts,
)

__all__ = [
    "EXIT_CLIENT",
    "EXIT_LEADER_UNWATCHED",
    "EXIT_SERVER",
    "EXIT_STDIN",
    "ServerGuard",
    "ServerGuardSettings",
]

_log = get_logger()


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerGuardSettings:
    #: Stop trees whose client is gone (false: only report them, signal nothing).
    stop_orphans: bool = True
    grace_seconds: float = 5.0
    #: After SIGKILL, how long to wait for the tree to be gone before giving up for now.
    kill_wait_seconds: float = 5.0
    #: How often running servers are looked for by their environment marker.
    rescan_seconds: float = 30.0
    poll_seconds: float = 0.05
    #: ``daemon_key`` of this daemon's exec socket. Markers carrying another key were sent
    #: to another daemon (another user's, a test's own) and are never adopted here; None
    #: adopts nothing found by scanning.
    daemon_key: str | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class ServerGuard(Actor[ServerGuardInbox]):
    """Owns every pidfd and stdin duplicate of the wrapped servers; writes through the writer."""

    # ``finish_tasks`` stays False: draining cancels what is in flight; running servers are
    # left running, and the next guard adopts them.

    inbox: Inbox[ServerGuardInbox]
    heartbeat: Outbox[HeartbeatInbox]
    writer: Outbox[WriterInbox]
    store: Store
    clock: Clock
    probes: ProbeBackend
    settings: ServerGuardSettings = field(default_factory=ServerGuardSettings)
    tree: TreeOps = field(default_factory=LocalTree)

    _watches: Watches | None = field(default=None, init=False)
    #: Pids whose registration is in flight: a rescan must not adopt them twice.
    _pending: set[int] = field(default_factory=set, init=False)
    _tg: TaskGroup | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._beats = BeatSchedule(
            clock=self.clock, writer=self.writer, servers=lambda: list(self._servers.values())
        )

    @property
    def _servers(self) -> dict[tuple[int, str], Watched]:
        return self._watches.servers if self._watches is not None else {}

    async def on_start(self, tg: TaskGroup) -> None:
        self._watches = Watches()
        self._tg = tg
        tg.start_soon(self._watch)
        tg.start_soon(self._beats.run)
        tg.start_soon(self._rescan_loop)

    async def on_receive(self, message: ServerGuardInbox, tg: TaskGroup) -> None:
        match message:
            case AdoptServer():
                tg.start_soon(self._adopt_request, message)
            case StopForBudget():
                self._stop_for_budget(message)
            case _:
                assert_never(message)

    async def on_stop(self) -> None:
        if self._watches is not None:
            self._watches.close()
            self._watches = None

    # --- registration ------------------------------------------------------------------

    async def _adopt_request(self, message: AdoptServer) -> None:
        stdin_fd = message.stdin_fd
        with message.reply:
            try:
                result, stdin_fd = await self._register_peer(message, stdin_fd)
            finally:
                if stdin_fd is not None:
                    os.close(stdin_fd)
            message.reply.send(result)

    async def _register_peer(
        self, message: AdoptServer, stdin_fd: int | None
    ) -> tuple[AdoptResult, int | None]:
        facts = stat_facts(message.pid)
        if facts is None or not facts.running:
            return _refused("process_unverifiable", f"pid {message.pid} cannot be read"), stdin_fd
        client = stat_facts(facts.ppid) if facts.ppid >= 1 else None
        if client is None or not client.running:
            return _refused("client_gone", f"pid {message.pid} has no launching client"), stdin_fd
        server = ServerFacts(
            pid=message.pid,
            start=facts.start,
            client_pid=client.pid,
            client_start=client.start,
            client_label=message.client,
            name=message.name,
            namespace=message.namespace,
            ttl=message.ttl,
        )
        registered = await self._register(server)
        if isinstance(registered, AdoptResult):
            return registered, stdin_fd
        self._watch_server(registered, stdin_fd)
        return AdoptResult(
            ok=True, code="registered", worker_identity=registered.worker_identity
        ), None

    async def _register(self, facts: ServerFacts) -> Watched | AdoptResult:
        claims = derive_claims(facts, self.probes)
        if claims is None:
            return _refused("host_unknown", "this host's id or boot id cannot be established")
        self._pending.add(facts.pid)
        try:
            result: RegisterResult = await ask(
                self.heartbeat,
                lambda reply: Register(pid=facts.pid, claims=claims, reply=reply),
                actor="heartbeat",
            )
        except SupervisorError as exc:
            return _refused(exc.code, exc.detail)
        finally:
            self._pending.discard(facts.pid)
        if not result.ok:
            return _refused(result.code, result.detail)
        return _server(facts, result.registration)

    def _watch_server(self, server: Watched, stdin_fd: int | None) -> None:
        """Start watching; ownership of ``stdin_fd`` passes to the guard."""
        assert self._watches is not None
        server.cgroup = dedicated_cgroup(server.pid, server.client[0])
        gone = self._watches.add(server, stdin_fd)
        if gone is not None:
            self._begin_stop(server, gone)
            return
        self._beats.wake()
        _log.info(
            "server_watched",
            worker_identity=server.worker_identity,
            pid=server.pid,
            client_pid=server.client[0],
            name=server.name,
            stdin_watched=server.stdin_fd is not None,
        )

    # --- events --------------------------------------------------------------------------

    async def _watch(self) -> None:
        assert self._watches is not None
        assert self._tg is not None
        while True:
            for event in await self._watches.events():
                if event.kind == "stdin":
                    self._tg.start_soon(self._stdin_closed, event.server)
                else:
                    reason = EXIT_SERVER if event.kind == "server" else EXIT_CLIENT
                    self._begin_stop(event.server, reason)

    async def _stdin_closed(self, server: Watched) -> None:
        """An MCP server exits on stdin EOF; one still running after the grace is stopped."""
        _log.info("server_stdin_closed", worker_identity=server.worker_identity, pid=server.pid)
        deadline = self.clock.monotonic() + self.settings.grace_seconds
        while self.clock.monotonic() < deadline and not server.stopping:
            left = deadline - self.clock.monotonic()
            await self.clock.sleep(min(self.settings.poll_seconds, max(left, 0.0)))
        if not server.stopping and server.key in self._servers:
            self._begin_stop(server, EXIT_STDIN)

    def _stop_for_budget(self, message: StopForBudget) -> None:
        """A budget the user set: the named incarnation's tree is stopped (a server not
        watched, or another process under that pid now, is left alone)."""
        ref = message.process
        for server in self._servers.values():
            if server.pid == ref.pid and same_incarnation(server.start, ref.start):
                _log.warning("server_budget_stop", pid=server.pid, name=server.name,
                             reason=message.reason, detail=message.detail)  # fmt: skip
                self._begin_stop(server, message.reason, asked=True)
                return

    def _begin_stop(self, server: Watched, reason: str, *, asked: bool = False) -> None:
        """``asked``: the user's own rule (a budget) asks for it, whatever ``stop_orphans`` says."""
        if server.stopping:
            return
        if not self.settings.stop_orphans and reason != EXIT_SERVER and not asked:
            # Reported once; the row is released only when the server's tree is gone.
            _log.warning(
                "server_orphaned",
                worker_identity=server.worker_identity,
                pid=server.pid,
                reason=reason,
                detail="[exec] stop_orphans is false; the server is only reported",
            )
            return
        server.stopping = True
        assert self._tg is not None
        self._tg.start_soon(self._stop, server, reason)

    async def _stop(self, server: Watched, reason: str) -> None:
        outcome = await self._stop_or_wait(server)
        self._forget(server)
        if not outcome.gone:
            # Forgotten, not released: the next rescan finds the tree by its marker again.
            _log.error(
                "server_tree_survived",
                worker_identity=server.worker_identity,
                pid=server.pid,
                signalled=sorted(outcome.signals),
            )
            return
        await self._release(server, reason, outcome)

    async def _stop_or_wait(self, server: Watched) -> StopOutcome:
        settings = self.settings
        if settings.stop_orphans:
            return await stop_tree(
                server.pid,
                server.start,
                uid=server.uid,
                cgroup=server.cgroup,
                ops=self.tree,
                clock=self.clock,
                grace=settings.grace_seconds,
                kill_wait=settings.kill_wait_seconds,
                poll=settings.poll_seconds,
            )
        # Reaping off, leader gone: the row stays active while any process of its tree runs.
        while self.tree.members(server.pid, server.start, uid=server.uid, cgroup=server.cgroup):
            await self.clock.sleep(settings.rescan_seconds)
        return StopOutcome(gone=True)

    async def _release(self, server: Watched, reason: str, outcome: StopOutcome) -> None:
        stamp = format_stamp(self.clock.now())
        await release_exited(self.writer, server, reason, outcome, stamp=stamp)

    def _forget(self, server: Watched) -> None:
        if self._watches is not None:
            self._watches.forget(server)

    # --- adoption of servers found running ----------------------------------------------------

    async def _rescan_loop(self) -> None:
        while True:
            try:
                await self._rescan()
            except SupervisorError as exc:
                _log.warning("server_rescan_failed", code=exc.code, detail=exc.detail)
            await self.clock.sleep(self.settings.rescan_seconds)

    async def _rescan(self) -> None:
        found = unwatched(
            scan_markers().values(),
            daemon_key=self.settings.daemon_key,
            boot=self.probes.boot_id(),
            watched=self._servers,
            pending=self._pending,
        )
        rows = await self._active_rows() if found else []
        for key, marker in found:
            if marker.leader_pid not in self._pending and key not in self._servers:
                await self._adopt(inspect_found(key, marker, rows))

    async def _active_rows(self) -> list[Mapping[str, Any]]:
        host, boot = self.probes.host_id(), self.probes.boot_id()
        return [
            row
            for row in await self.store.read_registrations(status=STATUS_ACTIVE)
            if row.get("host_id") == host and row.get("boot_id") == boot
        ]

    async def _adopt(self, found: Found) -> None:
        """Watch a running tree, or stop one whose client (or leader) is gone."""
        facts = found.facts
        if found.leader_alive and found.client_alive and found.row is None:
            registered = await self._register(facts)  # started while the daemon was down
            if isinstance(registered, AdoptResult):
                _log.warning("server_adopt_refused", pid=facts.pid, code=registered.code)
                return
            server = registered
        else:
            server = _server(facts, found.row)
        _log.info(
            "server_found",
            pid=facts.pid,
            worker_identity=server.worker_identity,
            leader_alive=found.leader_alive,
            client_alive=found.client_alive,
        )
        if not found.leader_alive:
            # Its exit was not watched: only the processes it left are stopped here; a row
            # still goes through the evidence-checked plan and apply.
            server.worker_identity = None
            self._servers[server.key] = server
            self._begin_stop(server, EXIT_LEADER_UNWATCHED)
            return
        stdin_fd = None
        if found.client_alive:
            probe_fd = pidfd_open(facts.pid, expected_start_time=facts.start)
            if probe_fd is not None:
                stdin_fd = duplicate_fd(probe_fd, 0)
                close_pidfd(probe_fd)
        self._watch_server(server, stdin_fd)


def _refused(code: str, detail: str) -> AdoptResult:
    return AdoptResult(ok=False, code=code, detail=detail)


def _server(facts: ServerFacts, row: Mapping[str, Any] | None) -> Watched:
    """The watch entry of the server ``facts`` name, fenced by its row if it has one."""
    server = Watched(
        worker_identity=None,
        pid=facts.pid,
        start=facts.start,
        client=(facts.client_pid, facts.client_start),
        name=facts.name,
        uid=owner_uid(facts.pid),
    )
    if row is None:
        return server
    return replace(
        server,
        worker_identity=str(row["worker_identity"]),
        generation_id=str(row["generation_id"]),
        fencing_epoch=int(row["fencing_epoch"]),
        ttl=float(row.get("heartbeat_ttl_seconds") or 30.0),
    )
