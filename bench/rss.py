"""Peak RSS of the daemon (a real ``supervisor.cli run``) holding 10,000 registrations."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from bench.fixtures import host_rows, make_db
from bench.processes import Daemon, Sleepers, short_tempdir
from bench.report import Figure
from supervisor.client import Client
from supervisor.settings.profile_edits import create_token

__all__ = ["run"]

_PROFILES = """\
[profiles.bench-ops]
role_kind = "controller"
allowed_operations = ["gitea.read"]
"""
_SWEEP_INTERVAL = 0.25
_SETTLED_SWEEPS = 3


def _settle(daemon: Daemon, token: str, *, watched: int, limit: float) -> Mapping[str, Any]:
    """Wait for a few completed sweeps (and the expected pidfd watches) via ``status``."""
    deadline = time.monotonic() + limit
    status: Mapping[str, Any] = {}
    with Client(daemon.socket_path, token=token, timeout=30.0) as client:
        while time.monotonic() < deadline:
            status = client.status()
            liveness = status.get("liveness") or {}
            if (
                int(liveness.get("sweeps_completed") or 0) >= _SETTLED_SWEEPS
                and int(liveness.get("watched_pids") or 0) >= watched
            ):
                return status
            time.sleep(0.1)
    raise RuntimeError(f"daemon did not settle within {limit}s: {status}")


def _measure(rows_count: int, sleepers: Sleepers | None, *, plans: int = 0) -> dict[str, Any]:
    with short_tempdir("fsb-rss-") as work:
        db = work / "registry.sqlite3"
        anyio.run(make_db, db, host_rows(rows_count, sleepers))
        profiles = work / "profiles.toml"
        profiles.write_text(_PROFILES, encoding="utf-8")
        token = create_token(profiles, "bench-ops")
        daemon = Daemon(
            work, db=db, sweep_interval_seconds=_SWEEP_INTERVAL, profiles=Path(profiles)
        )
        with daemon:
            began = time.monotonic()
            status = _settle(daemon, token, watched=rows_count if sleepers else 0, limit=120.0)
            liveness = status["liveness"]
            measured: dict[str, Any] = {
                "rows": rows_count,
                "vm_hwm_mb": daemon.status_kb("VmHWM") / 1024,
                "vm_rss_mb": daemon.status_kb("VmRSS") / 1024,
                "open_fds": daemon.open_fds(),
                "watched_pids": liveness.get("watched_pids"),
                "sweeps_completed": liveness.get("sweeps_completed"),
                "verdicts": liveness.get("verdicts"),
                "settle_seconds": time.monotonic() - began,
            }
            if plans:
                # An operator's plans: the planner keeps per-row facts between plans.
                with Client(daemon.socket_path, token=token, timeout=120.0) as client:
                    for _ in range(plans):
                        plan = client.plan()
                        if plan.get("success") is not True:
                            raise RuntimeError(f"plan failed: {plan.get('reasons')}")
                measured["after_plans"] = plans
                measured["vm_hwm_after_plans_mb"] = daemon.status_kb("VmHWM") / 1024
                measured["vm_rss_after_plans_mb"] = daemon.status_kb("VmRSS") / 1024
            return measured


def run(quick: bool) -> list[Figure]:
    count = 500 if quick else 10_000
    judged = not quick
    empty = _measure(0, None)
    dead = _measure(count, None)
    with Sleepers(8 if quick else 64) as sleepers:
        live = _measure(count, sleepers, plans=3)
    baseline = empty["vm_hwm_mb"]
    return [
        Figure(
            name="rss.peak_10k_live_mb",
            label=f"daemon peak RSS, {count:,} live rows (pidfd each)",
            value=live["vm_hwm_mb"],
            unit="MB",
            goal=80.0,
            op="<=",
            judged=judged,
            detail={**live, "over_empty_mb": live["vm_hwm_mb"] - baseline},
        ),
        Figure(
            name="rss.peak_10k_live_planned_mb",
            label=f"daemon peak RSS, {count:,} live rows, after 3 plans",
            value=live["vm_hwm_after_plans_mb"],
            unit="MB",
            goal=80.0,
            op="<=",
            judged=judged,
            detail={"vm_rss_after_plans_mb": live["vm_rss_after_plans_mb"]},
        ),
        Figure(
            name="rss.peak_10k_dead_mb",
            label=f"daemon peak RSS, {count:,} rows of exited pids",
            value=dead["vm_hwm_mb"],
            unit="MB",
            goal=80.0,
            op="<=",
            judged=judged,
            detail={**dead, "over_empty_mb": dead["vm_hwm_mb"] - baseline},
        ),
        Figure(
            name="rss.peak_empty_mb",
            label="daemon peak RSS, empty registry",
            value=baseline,
            unit="MB",
            judged=judged,
            detail=empty,
        ),
    ]
