"""The daemon: opens the store, starts the actors and the surfaces, stops in order on a signal."""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import anyio

from actors.retirement import RetirementSettings
from supervisor.app import AppSettings, RestartBudgetExceeded, Supervisor, running_supervisor
from supervisor.clock import Clock, MonotonicWall, SystemClock
from supervisor.config import Settings
from supervisor.errors import SupervisorError
from supervisor.logs import configure_logging, get_logger
from supervisor.probes import LocalProbes, ProbeBackend
from supervisor.profiles import ProfileBook
from supervisor.store.sqlite import open_sqlite_store
from supervisor.surfaces.socket_server import serve_socket

__all__ = ["app_settings", "freeze_startup_heap", "run_service"]

_log = get_logger()


def app_settings(settings: Settings) -> AppSettings:
    """The actors' settings, taken from the validated configuration."""
    return AppSettings(
        writer=replace(settings.retirement.to_writer(), control=settings.leases.to_control()),
        heartbeat=settings.heartbeat.to_actor(),
        liveness=settings.liveness.to_actor(),
        leases=settings.leases.to_actor(),
        retirement=RetirementSettings(
            canonical_repository=settings.supervisor.canonical_repository,
            auto_enabled=settings.retirement.auto_enabled,
            auto_interval_seconds=settings.retirement.auto_interval_seconds,
            auto_profile=settings.retirement.auto_profile,
        ),
        max_restarts=settings.restart.max_restarts,
        restart_window_seconds=settings.restart.window_seconds,
    )


def freeze_startup_heap() -> None:
    """Exempt everything alive after start-up from the cyclic GC's later collections."""
    # Modules, classes and settings live as long as the daemon, yet every full
    # collection would traverse them again: ~10 ms with the loop held, the longest
    # stall a 10,000-pid sweep saw. Collecting first keeps start-up garbage out of
    # the frozen set, where it could never be freed.
    gc.collect()
    gc.freeze()


async def run_service(
    settings: Settings,
    *,
    clock: Clock | None = None,
    probes: ProbeBackend | None = None,
    on_ready: Callable[[Path], None] | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit code."""
    configure_logging(settings.supervisor.log_level)
    probe_backend = probes or LocalProbes(host_override=settings.supervisor.host_id)
    protocol_clock = clock or MonotonicWall(SystemClock())
    db_path = settings.database.path
    db_path.parent.mkdir(parents=True, exist_ok=True)
    profiles = ProfileBook(settings.auth.profiles_path)
    if profiles.error:
        _log.warning(
            "profiles_unavailable", path=str(settings.auth.profiles_path), error=profiles.error
        )
    try:
        store = await open_sqlite_store(db_path, busy_timeout_ms=settings.database.busy_timeout_ms)
    except SupervisorError as exc:
        _log.error("store_open_failed", path=str(db_path), error=exc.detail)
        return 1
    try:
        # The handler is installed before anything starts, so a SIGTERM during
        # start-up drains like any other instead of killing the process.
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with running_supervisor(
                store=store,
                clock=protocol_clock,
                probes=probe_backend,
                profiles=profiles,
                settings=app_settings(settings),
            ) as supervisor:
                await _serve_until_signal(
                    supervisor,
                    settings,
                    profiles=profiles,
                    probes=probe_backend,
                    signals=signals,
                    on_ready=on_ready,
                )
    except* RestartBudgetExceeded as group:
        for failure in group.exceptions:
            _log.error("supervisor_failed", error=str(failure))
        failed = True
    else:
        failed = False
    finally:
        await store.close()
    return 1 if failed else 0


async def _serve_until_signal(
    supervisor: Supervisor,
    settings: Settings,
    *,
    profiles: ProfileBook,
    probes: ProbeBackend,
    signals: AsyncIterator[int],
    on_ready: Callable[[Path], None] | None,
) -> None:
    async with anyio.create_task_group() as surfaces:
        path = await surfaces.start(
            lambda task_status: serve_socket(
                supervisor.handle,
                settings=settings.socket,
                profiles=profiles,
                probes=probes,
                task_status=task_status,
            )
        )
        if settings.mcp.http_enabled:
            # Imported only when enabled: the MCP/HTTP stack (pydantic,
            # starlette, uvicorn) is about half of an idle daemon's memory.
            from supervisor.surfaces.mcp_bridge import serve_mcp_http

            await surfaces.start(
                lambda task_status: serve_mcp_http(
                    supervisor.handle,
                    profiles=profiles,
                    host=settings.mcp.http_host,
                    port=settings.mcp.http_port,
                    task_status=task_status,
                )
            )
        freeze_startup_heap()
        _log.info("ready", socket=str(path), database=str(settings.database.path), pid=os.getpid())
        if on_ready is not None:
            on_ready(Path(path))
        async for signum in signals:
            _log.info("signal", signal=signal.Signals(signum).name)
            break
        # Stop taking requests before the actors drain, so nothing new arrives
        # at an inbox that is closing.
        surfaces.cancel_scope.cancel()
