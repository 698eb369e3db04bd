"""The daemon: opens the store, starts the actors and the surfaces, stops in order on a signal."""

from __future__ import annotations

import gc
import os
import signal
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import anyio

from actors.retirement.actor import RetirementSettings
from supervisor.clock import Clock, MonotonicWall, SystemClock
from supervisor.daemon.app import AppSettings, RestartBudgetExceeded, Supervisor, running_supervisor
from supervisor.daemon.ops import OpsState, start_ops
from supervisor.daemon.reload import reload_settings
from supervisor.errors import ConfigError, SupervisorError, Unavailable
from supervisor.exec.exec_args import EXEC_SOCKET_SUFFIX
from supervisor.observe.logs import configure_logging, get_logger
from supervisor.observe.metrics import Metrics
from supervisor.settings.config import Settings
from supervisor.settings.config_checks import carried
from supervisor.settings.profiles import ProfileBook
from supervisor.store.factory import describe_store, open_store
from supervisor.surfaces.socket.bind import bound_listener
from supervisor.surfaces.socket.exec_socket import serve_exec_socket
from supervisor.surfaces.socket.server import serve_socket
from supervisor.system.lockfile import database_lock
from supervisor.system.probes import LocalProbes, ProbeBackend
from supervisor.system.sd_notify import notify

__all__ = [
    "McpPortUnavailable",
    "OpsPortUnavailable",
    "app_settings",
    "freeze_startup_heap",
    "run_service",
]

_log = get_logger()


def app_settings(settings: Settings) -> AppSettings:
    """The actors' settings, taken from the validated configuration."""
    return AppSettings(
        writer=replace(settings.retirement.to_writer(), control=settings.leases.to_control()),
        heartbeat=settings.heartbeat.to_actor(),
        liveness=settings.liveness.to_actor(),
        leases=settings.leases.to_actor(),
        retirement=carried(
            settings.retirement,
            RetirementSettings,
            canonical_repository=settings.supervisor.canonical_repository,
        ),
        hosts=settings.hosts.to_actor(shared=settings.database.url is not None),
        servers=settings.exec.to_actor(exec_socket=exec_socket_of(settings)),
        census=replace(settings.discovery.to_actor(), budgets=settings.servers.budgets),
        reap=replace(
            settings.reap.to_actor(),
            stop_superseded_after_seconds=settings.servers.stop_superseded_after_seconds,
        ),
        max_restarts=settings.restart.max_restarts,
        restart_window_seconds=settings.restart.window_seconds,
    )


def exec_socket_of(settings: Settings) -> str:
    """Where wrappers register: beside the main socket (as ``bound_listener`` binds it)."""
    return str(Path(settings.socket.path).expanduser().absolute()) + EXEC_SOCKET_SUFFIX


def freeze_startup_heap() -> None:
    """Exempt everything alive after start-up from the cyclic GC's later collections."""
    # Modules, classes and settings live as long as the daemon, yet every full
    # collection would traverse them again: ~10 ms with the loop held, the longest
    # stall a 10,000-pid sweep saw. Collecting first keeps start-up garbage out of
    # the frozen set, where it could never be freed.
    gc.collect()
    gc.freeze()


class McpPortUnavailable(SupervisorError, code="mcp_port_unavailable"):
    """The MCP HTTP endpoint cannot listen on its configured loopback port."""


class OpsPortUnavailable(SupervisorError, code="ops_port_unavailable"):
    """The ops HTTP listener (metrics, health, fleet page) cannot have its loopback port."""


@dataclass(frozen=True, slots=True)
class _Listeners:
    """What start-up claimed for the surfaces, before anything else started."""

    unix: tuple[socket.socket, Path]
    mcp_http: socket.socket | None
    ops_http: socket.socket | None = None
    #: The exec socket (``<socket>.exec``), where wrappers register before they exec.
    exec_unix: socket.socket | None = None


async def run_service(
    settings: Settings,
    *,
    clock: Clock | None = None,
    probes: ProbeBackend | None = None,
    on_ready: Callable[[Path], None] | None = None,
    reload: Callable[[], Settings] | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit code. On SIGHUP ``reload``
    reads the settings again and what a running daemon can change is applied.

    What can only fail at start-up is claimed before any actor starts: the database's
    lock, the socket path, the MCP HTTP port, then the store itself. A failure raises one
    plain ``SupervisorError`` (never an exception group) with nothing left running, so the
    command line can report it in one line.
    """
    configure_logging(settings.supervisor.log_level)
    probe_backend = probes or LocalProbes(host_override=settings.supervisor.host_id)
    protocol_clock = clock or MonotonicWall(SystemClock())
    database = settings.database
    profiles = ProfileBook(settings.auth.profiles_path)
    if profiles.error:
        _log.warning(
            "profiles_unavailable", path=str(settings.auth.profiles_path), error=profiles.error
        )
    # The handler is installed before anything starts, so a SIGTERM during start-up
    # drains like any other instead of killing the process (and a SIGHUP is ignored).
    with (
        anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals,
        ExitStack() as claims,
        ExitStack() as surface_claims,
    ):
        listeners = _claim(settings, claims, surface_claims)
        # SQLite at database.path, or the shared PostgreSQL of database.url.
        store = await open_store(
            url=database.url, path=database.path, busy_timeout_ms=database.busy_timeout_ms
        )
        try:
            async with running_supervisor(
                store=store,
                clock=protocol_clock,
                probes=probe_backend,
                profiles=profiles,
                settings=app_settings(settings),
                # Without the /metrics listener nobody reads them: count nothing.
                metrics=None if settings.ops.http_enabled else Metrics(),
            ) as supervisor:
                await _serve_until_signal(
                    supervisor,
                    settings,
                    listeners=listeners,
                    profiles=profiles,
                    probes=probe_backend,
                    signals=signals,
                    on_ready=on_ready,
                    reload=reload,
                )
                # The socket file goes before the actors drain: a client must find no
                # server rather than one that will never answer.
                surface_claims.close()
        except* RestartBudgetExceeded as group:
            for failure in group.exceptions:
                _log.error("supervisor_failed", error=str(failure))
            failed = True
        else:
            failed = False
        finally:
            await store.close()
    return 1 if failed else 0


def _claim(settings: Settings, daemon: ExitStack, surfaces: ExitStack) -> _Listeners:
    """The database's lock (held on ``daemon``), then the socket and MCP port (``surfaces``)."""
    db_path = settings.database.path
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the database directory {db_path.parent}: {exc.strerror or exc}"
        ) from None
    # First, so a second daemon on the same registry is refused whatever socket it names.
    daemon.enter_context(database_lock(db_path))
    bound = surfaces.enter_context(bound_listener(settings.socket))
    exec_listener, _ = surfaces.enter_context(
        bound_listener(settings.socket, suffix=EXEC_SOCKET_SUFFIX, kind=socket.SOCK_SEQPACKET)
    )
    http: socket.socket | None = None
    if settings.mcp.http_enabled:
        # Imported only when enabled: the MCP/HTTP stack (pydantic,
        # starlette, uvicorn) is about half of an idle daemon's memory.
        from supervisor.surfaces.mcp.http import mcp_http_listener

        mcp = settings.mcp
        http = _port(
            surfaces, lambda: mcp_http_listener(mcp.http_host, mcp.http_port), McpPortUnavailable
        )
    ops: socket.socket | None = None
    if settings.ops.http_enabled:
        # Loaded only for a listener, as in start_ops.
        from supervisor.surfaces.http.ops import ops_listener

        opc = settings.ops
        ops = _port(
            surfaces, lambda: ops_listener(opc.http_host, opc.http_port), OpsPortUnavailable
        )
    return _Listeners(unix=bound, mcp_http=http, ops_http=ops, exec_unix=exec_listener)


def _port(
    surfaces: ExitStack, listen: Callable[[], socket.socket], refusal: type[SupervisorError]
) -> socket.socket:
    """A TCP port claimed for a surface (closed with ``surfaces``), or ``refusal``."""
    try:
        sock = listen()
    except Unavailable as exc:
        raise refusal(exc.detail) from None
    surfaces.callback(sock.close)
    return sock


async def _serve_until_signal(
    supervisor: Supervisor,
    settings: Settings,
    *,
    listeners: _Listeners,
    profiles: ProfileBook,
    probes: ProbeBackend,
    signals: AsyncIterator[int],
    on_ready: Callable[[Path], None] | None,
    reload: Callable[[], Settings] | None,
) -> None:
    async with anyio.create_task_group() as surfaces:
        path = await surfaces.start(
            lambda task_status: serve_socket(
                supervisor.handle,
                settings=settings.socket,
                profiles=profiles,
                probes=probes,
                bound=listeners.unix,
                hosts=supervisor.hosts,
                task_status=task_status,
            )
        )
        if listeners.exec_unix is not None:
            exec_unix = listeners.exec_unix
            await surfaces.start(
                lambda task_status: serve_exec_socket(
                    supervisor.servers,
                    listener=exec_unix,
                    request_seconds=settings.socket.request_timeout_seconds,
                    max_connections=settings.socket.max_connections,
                    task_status=task_status,
                )
            )
        if listeners.mcp_http is not None:
            from supervisor.surfaces.mcp.http import serve_mcp_http

            await surfaces.start(
                lambda task_status: serve_mcp_http(
                    supervisor.handle,
                    profiles=profiles,
                    sock=listeners.mcp_http,
                    max_result_bytes=settings.mcp.max_result_bytes,
                    task_status=task_status,
                )
            )
        ops = OpsState(supervisor, supervisor.metrics, profiles)
        await start_ops(
            surfaces, ops, settings.ops, clock=supervisor.clock, sock=listeners.ops_http
        )
        ops.serving = True
        freeze_startup_heap()
        where = describe_store(url=settings.database.url, path=settings.database.path)
        _log.info("ready", socket=str(path), database=where, pid=os.getpid())
        # The writer reported ready (migrations done) before any surface started.
        notify(f"READY=1\nMAINPID={os.getpid()}\nSTATUS=serving on {path}")
        if on_ready is not None:
            on_ready(Path(path))
        in_effect = settings
        async for signum in signals:
            if signum == signal.SIGHUP:
                # A reload, never a stop: a terminal hanging up must not kill the daemon
                # and leave its socket behind.
                if reload is None:
                    _log.info("signal_ignored", signal="SIGHUP", detail="nothing to reload")
                else:
                    in_effect = await reload_settings(in_effect, reload, supervisor.handle)
                continue
            _log.info("signal", signal=signal.Signals(signum).name)
            break
        notify("STOPPING=1")
        # Stop taking requests before the actors drain, so nothing new arrives
        # at an inbox that is closing.
        surfaces.cancel_scope.cancel()
