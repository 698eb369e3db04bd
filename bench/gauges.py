"""A /metrics scrape and a ``status`` request at 10k rows, against the full classification."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from actors.retirement.actor import RetirementSettings
from bench.fixtures import (
    REPO,
    local_supervisor,
    make_db,
    mixed_kind,
    sleeper_fleet,
    wait_until,
)
from bench.plan import _beat_live_rows, _settled
from bench.processes import Sleepers, free_pids, short_tempdir
from bench.report import Figure
from supervisor.client.connection import AsyncClient
from supervisor.daemon.app import AppSettings, Supervisor
from supervisor.policy.control.permissions import Profile
from supervisor.policy.evidence import row_pid
from supervisor.policy.fleet.orphans import client_candidate, find_orphans
from supervisor.settings.config import SocketConfig
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.surfaces.http.health import check_health
from supervisor.surfaces.http.ops import OpsRoutes, serve_ops_http
from supervisor.surfaces.socket.server import serve_socket
from supervisor.system.gc_pause import gc_paused
from supervisor.system.probes import LocalProbes
from tests.unit.policy.reference_counts import count_fleet_rows

__all__ = ["run"]

#: Milliseconds: a scrape or a status call must not grow with the fleet.
GOAL_MS = 5.0


class _NoProfiles:
    """No tokens: the bench's status comes from the socket owner's uid."""

    error = None

    def authenticate(self, token: str) -> Profile | None:
        return None


async def _scrape(url: str) -> bytes:
    """GET /metrics over a new TCP connection, as a scraper sends it; the body.

    asyncio's own connection: a numeric address is used as it is, where anyio's
    ``connect_tcp`` would first resolve it in a worker thread (about a millisecond
    of the client's, not the daemon's).
    """
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n")
        answer = await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = answer.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"/metrics answered {head[:60]!r}")
    return body


async def _timed(reps: int, call: Callable[[], Awaitable[Any]]) -> list[float]:
    samples = []
    for _ in range(reps):
        began = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - began)
    return samples


async def _full_count(supervisor: Supervisor) -> None:
    """What one scrape cost before the counts were kept: every row classified afresh,
    on the same reads and probes (the store's view, one ProbeNow of every pid)."""
    store, host = supervisor.store, supervisor.probes.host_id()
    view = await store.read_registry_view()
    pids = tuple(
        sorted({p for row in view.active for p in (row_pid(row), client_candidate(row, host)) if p})
    )
    liveness = supervisor.liveness
    if liveness is None:
        raise RuntimeError("the liveness actor is not running")
    evidence = liveness.probe_now(pids)
    with gc_paused():
        count_fleet_rows(
            view.active,
            now=supervisor.clock.now(),
            evidence=evidence,
            current_host_id=host,
            canonical_repository=REPO,
            historical_count=view.history.count,
            orphans=find_orphans(view.active, evidence=evidence, current_host_id=host),
        )


async def _serve(tg: TaskGroup, supervisor: Supervisor, sock_dir: Path) -> tuple[str, Path]:
    """The ops listener and the local socket, as the daemon serves them."""
    routes = OpsRoutes(
        supervisor.handle,
        supervisor.metrics,
        lambda: check_health(supervisor, serving=True),
    )
    url: str = await tg.start(partial(serve_ops_http, routes, host="127.0.0.1", port=0))
    path: Path = await tg.start(
        partial(
            serve_socket,
            supervisor.handle,
            settings=SocketConfig(path=sock_dir / "s.sock"),
            profiles=_NoProfiles(),
            probes=supervisor.probes,
        )
    )
    return url, path


async def _measure(count: int, work: Path, sleepers: Sleepers, reps: int) -> dict[str, Any]:
    probes = LocalProbes()
    db = work / "registry.sqlite3"
    rows = sleeper_fleet(
        count,
        sleepers,
        free_pids(count),
        now=datetime.now(UTC),
        host_id=probes.host_id(),
        boot_id=probes.boot_id(),
    )
    await make_db(db, rows)
    store = await open_sqlite_store(db)
    settings = AppSettings(retirement=RetirementSettings(canonical_repository=REPO))
    try:
        async with local_supervisor(store, settings, probes=probes) as supervisor:
            live = sum(1 for index in range(count) if mixed_kind(index) == "live")
            await wait_until(_settled(supervisor, live), limit=120.0, what="settled liveness")
            async with anyio.create_task_group() as tg:
                url, path = await _serve(tg, supervisor, work)
                async with AsyncClient(path) as client:
                    began = time.perf_counter()
                    body = await _scrape(url)  # the first read fills the kept counts
                    first_ms = (time.perf_counter() - began) * 1000
                    if b"fleet_gauges_available 1.0" not in body:
                        raise RuntimeError("the scrape's fleet gauges were unavailable")
                    status: Mapping[str, Any] = await client.status()
                    if status.get("success") is not True:
                        raise RuntimeError(f"status failed: {status}")
                    scrape = await _timed(reps, lambda: _scrape(url))
                    answers = await _timed(reps, client.status)
                    full = await _timed(max(1, reps // 3), lambda: _full_count(supervisor))
                    beating = []
                    for _ in range(max(1, reps // 3)):
                        await anyio.to_thread.run_sync(_beat_live_rows, db, sleepers.pids)
                        beating += await _timed(1, lambda: _scrape(url))
                tg.cancel_scope.cancel()
    finally:
        await store.close()
    return {
        "first_ms": first_ms,
        "scrape": scrape,
        "status": answers,
        "full": full,
        "beating": beating,
        "fleet": status.get("fleet"),
    }


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _timing(
    name: str, label: str, samples: list[float], *, judged: bool, goal: float | None, **detail: Any
) -> Figure:
    """The median of ``samples`` (seconds) in ms, with every sample in the detail."""
    return Figure(
        name=name,
        label=label,
        value=_ms(samples),
        unit="ms",
        goal=goal,
        op="<=" if goal is not None else None,
        judged=judged,
        detail={**detail, "samples_ms": [s * 1000 for s in samples]},
    )


def run(quick: bool) -> list[Figure]:
    count = 1_000 if quick else 10_000
    reps = 5 if quick else 15
    with short_tempdir("fsb-gauges-") as work, Sleepers(8 if quick else 32) as sleepers:
        info = anyio.run(_measure, count, work, sleepers, reps)
    judged = not quick
    scrape, full = _ms(info["scrape"]), _ms(info["full"])
    live = sum(1 for index in range(count) if mixed_kind(index) == "live")
    # (name, label, samples, goal, detail) of each timed figure.
    timed: list[tuple[str, str, list[float], float | None, dict[str, Any]]] = [
        (
            "gauges.scrape_10k_ms",
            f"/metrics scrape over HTTP, {count:,} rows (median)",
            info["scrape"],
            GOAL_MS,
            {"rows": count, "first_scrape_ms": info["first_ms"]},
        ),
        (
            "gauges.status_10k_ms",
            f"status over the socket, {count:,} rows (median)",
            info["status"],
            GOAL_MS,
            {"rows": count, "fleet": info["fleet"]},
        ),
        (
            "gauges.full_count_10k_ms",
            f"full classification of {count:,} rows (what a scrape cost before)",
            info["full"],
            None,
            {"rows": count},
        ),
        (
            "gauges.scrape_10k_beating_ms",
            f"/metrics scrape, {count:,} rows, every live row beat since the last",
            info["beating"],
            None,
            {"beaten_rows_per_scrape": live},
        ),
    ]
    return [
        *(
            _timing(name, label, samples, judged=judged, goal=goal, **detail)
            for name, label, samples, goal, detail in timed
        ),
        Figure(
            name="gauges.vs_full_ratio",
            label="full classification / kept-count scrape",
            value=full / scrape if scrape > 0 else float("inf"),
            unit="x",
            judged=judged,
        ),
    ]
