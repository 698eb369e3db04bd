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

import contextlib
import os
import select
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from actors.mailbox import Inbox, Outbox, ask
from actors.messages import (
    AppendAudit,
    HeartbeatInbox,
    HeartbeatResult,
    HeartbeatWrite,
    Register,
    RegisterResult,
    ReleaseRegistration,
    TouchHeartbeats,
    WriteAck,
    WriterInbox,
)
from actors.servers.identity import ServerFacts, derive_claims
from actors.servers.messages import AdoptResult, AdoptServer, ServerGuardInbox
from actors.servers.stopping import LocalTree, StopOutcome, TreeOps, stop_tree
from supervisor.clock import Clock
from supervisor.errors import SupervisorError
from supervisor.logs import get_logger
from supervisor.policy.exec_marker import ExecMarker
from supervisor.policy.liveness import STATUS_ACTIVE
from supervisor.policy.stamps import format_stamp
from supervisor.probes import ProbeBackend, close_pidfd, pidfd_open
from supervisor.process_tree import duplicate_fd, scan_markers, stat_facts, ticks
from supervisor.store.base import Store

__all__ = [
    "EXIT_CLIENT",
    "EXIT_LEADER_UNWATCHED",
    "EXIT_SERVER",
    "EXIT_STDIN",
    "ServerGuard",
    "ServerGuardSettings",
]

_log = get_logger()

#: Exit reason codes, recorded on the audit event written with each release.
EXIT_SERVER = "server_exited"
EXIT_CLIENT = "client_exited"
EXIT_STDIN = "stdin_closed"
#: The leader was already gone when the guard first saw the tree (nobody watched it go).
EXIT_LEADER_UNWATCHED = "leader_gone_unwatched"

_HANGUP = select.EPOLLHUP | select.EPOLLERR | select.EPOLLRDHUP
_DEAD_STATES = ("Z", "X")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerGuardSettings:
    #: Stop trees whose client is gone (false: only report them, signal nothing).
    reap: bool = True
    grace_seconds: float = 5.0
    #: After SIGKILL, how long to wait for the tree to be gone before giving up for now.
    kill_wait_seconds: float = 5.0
    #: How often running servers are looked for by their environment marker.
    rescan_seconds: float = 30.0
    poll_seconds: float = 0.05


@dataclass(slots=True, kw_only=True)
class _Server:
    """One watched server: its row's fencing, its incarnation and its client's."""

    worker_identity: str | None
    pid: int
    start: str
    client: tuple[int, str]
    name: str
    generation_id: str = ""
    fencing_epoch: int = 0
    ttl: float = 30.0
    pidfd: int | None = None
    stdin_fd: int | None = None
    stopping: bool = False

    @property
    def key(self) -> tuple[int, str]:
        return (self.pid, self.start)


@dataclass(slots=True)
class _Client:
    pidfd: int
    servers: set[tuple[int, str]] = field(default_factory=set)


class ServerGuard:
    """Owns every pidfd and stdin duplicate of the wrapped servers; writes through the writer."""

    def __init__(
        self,
        *,
        inbox: Inbox[ServerGuardInbox],
        heartbeat: Outbox[HeartbeatInbox],
        writer: Outbox[WriterInbox],
        store: Store,
        clock: Clock,
        probes: ProbeBackend,
        settings: ServerGuardSettings | None = None,
        tree: TreeOps | None = None,
    ) -> None:
        self._inbox = inbox
        self._heartbeat = heartbeat
        self._writer = writer
        self._store = store
        self._clock = clock
        self._probes = probes
        self._settings = settings or ServerGuardSettings()
        self._tree = tree or LocalTree()
        self._servers: dict[tuple[int, str], _Server] = {}
        self._clients: dict[tuple[int, str], _Client] = {}
        self._fds: dict[int, tuple[str, tuple[int, str]]] = {}
        #: Pids whose registration is in flight: a rescan must not adopt them twice.
        self._pending: set[int] = set()
        self._epoll: select.epoll | None = None
        self._tg: TaskGroup | None = None

    @property
    def watched(self) -> int:
        return len(self._servers)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._epoll = select.epoll()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._watch)
                tg.start_soon(self._beat_loop)
                tg.start_soon(self._rescan_loop)
                task_status.started()
                async for message in self._inbox:
                    tg.start_soon(self._adopt_request, message)
                # Draining: running servers are left running; the next guard adopts them.
                tg.cancel_scope.cancel()
        finally:
            self._close_all()

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
        if facts is None or facts.state in _DEAD_STATES:
            return _refused("process_unverifiable", f"pid {message.pid} cannot be read"), stdin_fd
        client = stat_facts(facts.ppid) if facts.ppid > 1 else None
        if client is None or client.state in _DEAD_STATES:
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

    async def _register(self, facts: ServerFacts) -> _Server | AdoptResult:
        claims = derive_claims(facts, self._probes)
        if claims is None:
            return _refused("host_unknown", "this host's id or boot id cannot be established")
        self._pending.add(facts.pid)
        try:
            result: RegisterResult = await ask(
                self._heartbeat,
                lambda reply: Register(pid=facts.pid, claims=claims, reply=reply),
                actor="heartbeat",
            )
        except SupervisorError as exc:
            return _refused(exc.code, exc.detail)
        finally:
            self._pending.discard(facts.pid)
        if not result.ok:
            return _refused(result.code, result.detail)
        return _server_from_row(result.registration, facts)

    def _watch_server(self, server: _Server, stdin_fd: int | None) -> None:
        """Start watching; ownership of ``stdin_fd`` passes to the guard."""
        assert self._epoll is not None
        self._servers[server.key] = server
        server.pidfd = pidfd_open(server.pid, expected_start_time=server.start)
        if server.pidfd is None:
            # Gone already (or a different process holds the pid): the exit was missed by
            # microseconds, which is still an exit of the watched incarnation.
            if stdin_fd is not None:
                os.close(stdin_fd)
            self._begin_stop(server, EXIT_SERVER)
            return
        self._add_fd(server.pidfd, "server", server.key)
        if stdin_fd is not None:
            try:
                self._epoll.register(stdin_fd, _HANGUP)
            except OSError:
                os.close(stdin_fd)  # /dev/null or a file: nothing that can hang up
            else:
                server.stdin_fd = stdin_fd
                self._fds[stdin_fd] = ("stdin", server.key)
        watch = self._clients.get(server.client)
        if watch is None:
            pidfd = pidfd_open(server.client[0], expected_start_time=server.client[1])
            if pidfd is None:
                self._begin_stop(server, EXIT_CLIENT)
                return
            watch = self._clients[server.client] = _Client(pidfd=pidfd)
            self._add_fd(pidfd, "client", server.client)
        watch.servers.add(server.key)
        _log.info(
            "server_watched",
            worker_identity=server.worker_identity,
            pid=server.pid,
            client_pid=server.client[0],
            name=server.name,
            stdin_watched=server.stdin_fd is not None,
        )

    # --- events --------------------------------------------------------------------------

    def _add_fd(self, fd: int, kind: str, key: tuple[int, str]) -> None:
        assert self._epoll is not None
        self._epoll.register(fd, select.EPOLLIN)
        self._fds[fd] = (kind, key)

    def _drop_fd(self, fd: int | None) -> None:
        if fd is None or self._fds.pop(fd, None) is None:
            return
        if self._epoll is not None:
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)
        close_pidfd(fd)

    async def _watch(self) -> None:
        assert self._epoll is not None
        while True:
            events = self._epoll.poll(0)
            if not events:
                await anyio.wait_readable(self._epoll.fileno())
                continue
            for fd, _mask in events:
                entry = self._fds.get(fd)
                if entry is not None:
                    self._on_event(fd, *entry)

    def _on_event(self, fd: int, kind: str, key: tuple[int, str]) -> None:
        self._drop_fd(fd)
        if kind == "client":
            watch = self._clients.pop(key, None)
            for server_key in sorted(watch.servers if watch else ()):
                server = self._servers.get(server_key)
                if server is not None:
                    self._begin_stop(server, EXIT_CLIENT)
            return
        server = self._servers.get(key)
        if server is None:
            return
        if kind == "server":
            server.pidfd = None
            self._begin_stop(server, EXIT_SERVER)
        else:
            server.stdin_fd = None
            assert self._tg is not None
            self._tg.start_soon(self._stdin_closed, server)

    async def _stdin_closed(self, server: _Server) -> None:
        """An MCP server exits on stdin EOF; one still running after the grace is stopped."""
        _log.info("server_stdin_closed", worker_identity=server.worker_identity, pid=server.pid)
        deadline = self._clock.monotonic() + self._settings.grace_seconds
        while self._clock.monotonic() < deadline and not server.stopping:
            left = deadline - self._clock.monotonic()
            await self._clock.sleep(min(self._settings.poll_seconds, max(left, 0.0)))
        if not server.stopping and server.key in self._servers:
            self._begin_stop(server, EXIT_STDIN)

    def _begin_stop(self, server: _Server, reason: str) -> None:
        if server.stopping:
            return
        if not self._settings.reap and reason != EXIT_SERVER:
            # Reported once; the row is released only when the server's tree is gone.
            _log.warning(
                "server_orphaned",
                worker_identity=server.worker_identity,
                pid=server.pid,
                reason=reason,
                detail="reaping is off; the server is only reported",
            )
            return
        server.stopping = True
        assert self._tg is not None
        self._tg.start_soon(self._stop, server, reason)

    async def _stop(self, server: _Server, reason: str) -> None:
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

    async def _stop_or_wait(self, server: _Server) -> StopOutcome:
        settings = self._settings
        if settings.reap:
            return await stop_tree(
                server.pid,
                server.start,
                ops=self._tree,
                clock=self._clock,
                grace=settings.grace_seconds,
                kill_wait=settings.kill_wait_seconds,
                poll=settings.poll_seconds,
            )
        # Reaping off, leader gone: the row stays active while any process of its tree runs.
        while self._tree.members(server.pid, server.start):
            await self._clock.sleep(settings.rescan_seconds)
        return StopOutcome(gone=True)

    async def _release(self, server: _Server, reason: str, outcome: StopOutcome) -> None:
        stamp = format_stamp(self._clock.now())
        audit = {
            "at": stamp,
            "actor": "server_guard",
            "role": None,
            "action": "server_exit",
            "outcome": reason,
            "detail": {
                "worker_identity": server.worker_identity,
                "pid": server.pid,
                "process_start_time": server.start,
                "client_pid": server.client[0],
                "client_process_start_time": server.client[1],
                "name": server.name,
                "signals": {str(pid): sent for pid, sent in sorted(outcome.signals.items())},
            },
        }
        _log.info(
            "server_exit",
            worker_identity=server.worker_identity,
            pid=server.pid,
            reason=reason,
            signalled=len(outcome.signals),
        )
        if server.worker_identity is None:
            await self._append_audit(audit)
            return
        identity = server.worker_identity
        try:
            ack: WriteAck = await ask(
                self._writer,
                lambda reply: ReleaseRegistration(
                    worker_identity=identity,
                    pid=server.pid,
                    generation_id=server.generation_id,
                    fencing_epoch=server.fencing_epoch,
                    stamp=stamp,
                    audit=audit,
                    reply=reply,
                ),
                actor="registry_writer",
            )
        except SupervisorError as exc:
            ack = WriteAck(ok=False, code=exc.code, detail=exc.detail)
        if not ack.ok:
            _log.warning(
                "server_release_refused", worker_identity=identity, code=ack.code, detail=ack.detail
            )

    async def _append_audit(self, audit: Mapping[str, Any]) -> None:
        try:
            await ask(
                self._writer,
                lambda reply: AppendAudit(event=audit, reply=reply),
                actor="registry_writer",
            )
        except SupervisorError as exc:
            _log.warning("audit_write_failed", action="server_exit", detail=exc.detail)

    def _forget(self, server: _Server) -> None:
        self._servers.pop(server.key, None)
        self._drop_fd(server.pidfd)
        self._drop_fd(server.stdin_fd)
        server.pidfd = server.stdin_fd = None
        watch = self._clients.get(server.client)
        if watch is not None:
            watch.servers.discard(server.key)
            if not watch.servers:
                self._clients.pop(server.client, None)
                self._drop_fd(watch.pidfd)

    # --- heartbeats on the server's behalf -------------------------------------------------

    async def _beat_loop(self) -> None:
        while True:
            ttls = [s.ttl for s in self._servers.values() if s.worker_identity]
            interval = max(min(ttls, default=30.0) / 3, 0.5)
            await self._clock.sleep(interval)
            await self._beat()

    async def _beat(self) -> None:
        stamp = format_stamp(self._clock.now())
        watched = [
            s
            for s in self._servers.values()
            if s.worker_identity and s.pidfd is not None and not s.stopping
        ]
        if not watched:
            return
        beats = tuple(
            HeartbeatWrite(
                worker_identity=s.worker_identity or "",
                pid=s.pid,
                generation_id=s.generation_id,
                fencing_epoch=s.fencing_epoch,
                stamp=stamp,
            )
            for s in watched
        )
        try:
            results: tuple[HeartbeatResult, ...] = await ask(
                self._writer,
                lambda reply: TouchHeartbeats(beats=beats, reply=reply),
                actor="registry_writer",
            )
        except SupervisorError as exc:
            _log.warning("server_beats_failed", code=exc.code, detail=exc.detail)
            return
        for server, result in zip(watched, results, strict=True):
            if not result.ok and result.code != "store_error":
                # Retired or released by someone else: not ours to keep up any more.
                _log.warning(
                    "server_row_gone",
                    worker_identity=server.worker_identity,
                    code=result.code,
                    pid=server.pid,
                )
                server.worker_identity = None

    # --- adoption of servers found running ----------------------------------------------------

    async def _rescan_loop(self) -> None:
        while True:
            try:
                await self._rescan()
            except SupervisorError as exc:
                _log.warning("server_rescan_failed", code=exc.code, detail=exc.detail)
            await self._clock.sleep(self._settings.rescan_seconds)

    async def _rescan(self) -> None:
        boot = self._probes.boot_id()
        groups: dict[tuple[int, str], ExecMarker] = {}
        for marker in scan_markers().values():
            key = (marker.leader_pid, ticks(marker.leader_start))
            if marker.boot_id == boot and key not in self._servers:
                groups.setdefault(key, marker)
        rows: list[Mapping[str, Any]] | None = None
        for key, marker in sorted(groups.items()):
            if marker.leader_pid in self._pending or key in self._servers:
                continue
            if rows is None:
                rows = await self._active_rows()
            await self._adopt_found(key, marker, rows)

    async def _active_rows(self) -> list[Mapping[str, Any]]:
        host, boot = self._probes.host_id(), self._probes.boot_id()
        return [
            row
            for row in await self._store.read_registrations(status=STATUS_ACTIVE)
            if row.get("host_id") == host and row.get("boot_id") == boot
        ]

    async def _adopt_found(
        self, key: tuple[int, str], marker: ExecMarker, rows: list[Mapping[str, Any]]
    ) -> None:
        leader = stat_facts(marker.leader_pid)
        leader_alive = (
            leader is not None and leader.start == key[1] and leader.state not in _DEAD_STATES
        )
        client_key = (marker.client_pid, ticks(marker.client_start))
        client = stat_facts(marker.client_pid)
        client_alive = client is not None and (
            client.start == client_key[1] and client.state not in _DEAD_STATES
        )
        row = next(
            (r for r in rows if r.get("pid") == key[0] and r.get("process_start_time") == key[1]),
            None,
        )
        facts = ServerFacts(
            pid=key[0],
            start=key[1],
            client_pid=client_key[0],
            client_start=client_key[1],
            client_label=marker.client,
            name=marker.name,
            namespace=marker.namespace,
        )
        if leader_alive and client_alive and row is None:
            registered = await self._register(facts)
            if isinstance(registered, AdoptResult):
                _log.warning("server_adopt_refused", pid=key[0], code=registered.code)
                return
            server = registered
        elif row is not None:
            server = _server_from_row(row, facts)
        else:
            server = _Server(
                worker_identity=None, pid=key[0], start=key[1], client=client_key, name=marker.name
            )
        _log.info(
            "server_found",
            pid=key[0],
            worker_identity=server.worker_identity,
            leader_alive=leader_alive,
            client_alive=client_alive,
        )
        if not leader_alive:
            # Its exit was not watched: only the processes it left are stopped here; a row
            # still goes through the evidence-checked plan and apply.
            server.worker_identity = None
            self._servers[server.key] = server
            self._begin_stop(server, EXIT_LEADER_UNWATCHED)
            return
        stdin_fd = None
        if client_alive:
            probe_fd = pidfd_open(key[0], expected_start_time=key[1])
            if probe_fd is not None:
                stdin_fd = duplicate_fd(probe_fd, 0)
                close_pidfd(probe_fd)
        self._watch_server(server, stdin_fd)

    def _close_all(self) -> None:
        for fd in list(self._fds):
            self._drop_fd(fd)
        self._servers.clear()
        self._clients.clear()
        if self._epoll is not None:
            self._epoll.close()
            self._epoll = None


def _refused(code: str, detail: str) -> AdoptResult:
    return AdoptResult(ok=False, code=code, detail=detail)


def _server_from_row(row: Mapping[str, Any], facts: ServerFacts) -> _Server:
    return _Server(
        worker_identity=str(row["worker_identity"]),
        pid=facts.pid,
        start=facts.start,
        client=(facts.client_pid, facts.client_start),
        name=facts.name,
        generation_id=str(row["generation_id"]),
        fencing_epoch=int(row["fencing_epoch"]),
        ttl=float(row.get("heartbeat_ttl_seconds") or 30.0),
    )
