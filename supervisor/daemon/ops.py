"""The daemon's operability tasks: the ops HTTP listener and the systemd watchdog."""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from anyio.abc import TaskGroup

from supervisor.clock import Clock
from supervisor.observe.logs import get_logger
from supervisor.observe.metrics import Metrics
from supervisor.settings.config import OpsConfig
from supervisor.surfaces.http.health import HealthReport, HealthSource, check_health
from supervisor.surfaces.socket.dispatch import ProfileLookupWithAuth
from supervisor.system.sd_notify import notify, watchdog_interval

__all__ = ["OpsState", "feed_watchdog", "start_ops"]

_log = get_logger()


@dataclass(slots=True, eq=False)
class OpsState:
    """What the health endpoints need from the service: its supervisor and whether it serves."""

    source: HealthSource
    metrics: Metrics
    #: Proves the fleet page's tokens; None serves the page to the same uid only.
    profiles: ProfileLookupWithAuth | None = None
    serving: bool = field(default=False, init=False)

    async def health(self) -> HealthReport:
        return await check_health(self.source, serving=self.serving)


class _Health(Protocol):
    async def health(self) -> HealthReport: ...


async def feed_watchdog(
    state: _Health,
    *,
    clock: Clock,
    interval: float,
    send: Callable[[str], bool] = notify,
) -> None:
    """Send WATCHDOG=1 every ``interval`` seconds, but only while the actors are healthy:
    a wedged supervisor stops feeding, and systemd restarts it after WatchdogSec."""
    while True:
        report = await state.health()
        if report.healthy:
            send("WATCHDOG=1")
        else:
            _log.warning("watchdog_withheld", reasons=list(report.reasons))
        await clock.sleep(interval)


async def start_ops(
    tg: TaskGroup,
    state: OpsState,
    settings: OpsConfig,
    *,
    clock: Clock,
    sock: socket.socket | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """Start the listener (when enabled; on ``sock`` when start-up claimed it) and the
    watchdog (when systemd asks for one). Returns the listener's base URL, or None.
    """
    url: str | None = None
    if settings.http_enabled:
        # Loaded only for a listener: the HTTP server (h11), the routes and the page's
        # HTML and scripts are about a megabyte a daemon without [ops] http never uses.
        from supervisor.surfaces.http.fleet_page import FleetPage  # noqa: PLC0415
        from supervisor.surfaces.http.ops import OpsRoutes, serve_ops_http  # noqa: PLC0415

        page = FleetPage(state.source.handle, state.profiles) if settings.page_enabled else None
        routes = OpsRoutes(state.source.handle, state.metrics, state.health, page)
        url = await tg.start(
            lambda task_status: serve_ops_http(
                routes,
                sock=sock,
                host=settings.http_host,
                port=settings.http_port,
                task_status=task_status,
            )
        )
    interval = watchdog_interval(environ)
    if interval is not None:
        tg.start_soon(lambda: feed_watchdog(state, clock=clock, interval=interval))
    return url
