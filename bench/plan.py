"""Retirement plan latency: the pure planner at 1k/10k/100k rows, and a plan through the actor."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bench.fixtures import (
    READER,
    REPO,
    history_rows,
    local_supervisor,
    make_db,
    mixed_fleet,
    mixed_kind,
    sleeper_fleet,
    sqlite_connect,
    wait_until,
)
from bench.processes import Sleepers, free_pids, short_tempdir
from bench.report import Figure
from supervisor.daemon.app import AppSettings, Supervisor
from supervisor.policy.incremental.memo import PlanMemo
from supervisor.policy.incremental.planner import plan_retirement
from supervisor.policy.retirement.plan import FencingContext, ProtectedOwners, RetirementPlan
from supervisor.policy.stamps import format_stamp
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.system.gc_pause import gc_paused
from supervisor.system.probes import LocalProbes

__all__ = ["run"]

_NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
_FENCING = FencingContext(host_id="host-bench", boot_id="boot-bench")


def _time_pure(count: int, *, max_reps: int, budget: float) -> dict[str, Any]:
    """Median plan time: cold (no memo), incremental (memo warmed by one plan), and
    incremental after a round of heartbeats.

    Every incremental run advances ``now`` by a second, as a real supervisor's
    clock would, so no plan can reuse another's time-dependent verdicts. The
    ``changed`` runs also give 1% of the rows a new heartbeat; the ``beating``
    runs give every live row one, which is what a fleet does between two plans
    a few seconds apart. Rows are changed before the timer starts.
    """
    rows, evidence = mixed_fleet(count, now=_NOW, host_id="host-bench", boot_id="boot-bench")
    live = [index for index in range(count) if mixed_kind(index) == "live"]
    # A few active leases, so the protected-owner check has something to look at.
    protected = ProtectedOwners(
        session_ids=frozenset(f"sess-bench-{i}" for i in range(0, count, 97)),
        pids=frozenset(100_000 + i for i in range(0, count, 89)),
    )
    # As the retirement actor holds it: the store's view hands out a new mapping for
    # every new row version, so an unchanged row is known by identity (``advance``
    # below replaces changed rows, never edits them).
    memo = PlanMemo(trust_identity=True)
    step = [0]

    def advance(changed: Sequence[int]) -> datetime:
        step[0] += 1
        now = _NOW + timedelta(seconds=step[0])
        stamp = format_stamp(now)
        for index in changed:
            rows[index] = {**rows[index], "last_heartbeat_at": stamp}
        return now

    def plan(memo: PlanMemo | None, now: datetime) -> RetirementPlan:
        # As the retirement actor runs it: with the cyclic collector held off.
        with gc_paused():
            return plan_retirement(
                rows,
                now=now,
                evidence=evidence,
                fencing=_FENCING,
                canonical_repository=REPO,
                protected=protected,
                memo=memo,
            )

    def timed(memo: PlanMemo | None, changed: Sequence[int] = ()) -> list[float]:
        samples: list[float] = []
        started = time.perf_counter()
        # At least one run; more while the budget lasts (the 100k size gets few).
        while len(samples) < max_reps and (not samples or time.perf_counter() - started < budget):
            now = advance(changed)
            began = time.perf_counter()
            plan(memo, now)
            samples.append(time.perf_counter() - began)
        return samples

    cold = timed(None)
    last = plan(memo, advance(()))  # warms the memo
    warm = timed(memo)
    changed = timed(memo, changed=range(0, count, 100))
    beating = timed(memo, changed=live)
    median = statistics.median(warm) * 1000
    return {
        "rows": count,
        "median_ms": median,
        "min_ms": min(warm) * 1000,
        "reps": len(warm),
        "ms_per_1k_rows": median / (count / 1000),
        "cold_median_ms": statistics.median(cold) * 1000,
        "cold_reps": len(cold),
        "one_percent_changed_median_ms": statistics.median(changed) * 1000,
        "live_rows_beat_median_ms": statistics.median(beating) * 1000,
        "live_rows_beat_reps": len(beating),
        "live_rows": len(live),
        "candidates": len(last.candidates),
        "preserved": len(last.preserved),
    }


def _settled(supervisor: Supervisor, watches: int) -> Callable[[], Awaitable[bool]]:
    """Two sweeps done and an exit watch open on every live row."""

    async def done() -> bool:
        status = await supervisor.handle.liveness_status()
        return status.sweeps_completed >= 2 and status.watched_pids >= watches

    return done


def _beat_live_rows(db: Path, pids: Sequence[int]) -> None:
    """A new stamp on every live row, as a round of heartbeats between two plans leaves it."""
    conn = sqlite_connect(db)
    try:
        marks = ", ".join("?" for _ in pids)
        conn.execute(
            "UPDATE worker_registrations SET last_heartbeat_at = ? "
            f"WHERE status = 'active' AND pid IN ({marks})",
            (format_stamp(datetime.now(UTC)), *pids),
        )
    finally:
        conn.close()


async def _time_actor(
    count: int,
    db: Path,
    sleepers: Sleepers,
    reps: int,
    history: int = 0,
    *,
    beat_between: bool = False,
) -> tuple[list[float], Mapping[str, Any], dict[str, Any]]:
    """handle.plan on a store of ``count`` active rows (probes real: live rows name real
    sleepers) and ``history`` terminal rows; also the answer's size and a snapshot.

    ``beat_between``: every live row gets a new stamp before each timed plan (the
    stamp-only UPDATE a heartbeat round commits), so the plan meets a fleet that beats.
    """
    probes = LocalProbes()
    host, boot = probes.host_id(), probes.boot_id()
    now = datetime.now(UTC)
    dead_pids = free_pids(count)
    rows = sleeper_fleet(count, sleepers, dead_pids, now=now, host_id=host, boot_id=boot)
    if history:
        # One old registration in ten reuses the pid number of a current dead row.
        rows += history_rows(history, now=now, host_id=host, boot_id=boot, pids=dead_pids)
    await make_db(db, rows)
    opened = time.perf_counter()
    store = await open_sqlite_store(db)
    extra: dict[str, Any] = {"store_open_s": time.perf_counter() - opened}
    try:
        async with local_supervisor(store, AppSettings(), probes=probes) as supervisor:
            samples: list[float] = []
            result: Mapping[str, Any] = {}
            # Steady state, as an operator meets it: the start-up sweep done and its
            # exit watches open, the store's view and the planner's memo filled once.
            began = time.perf_counter()
            live = sum(1 for index in range(count) if mixed_kind(index) == "live")
            await wait_until(_settled(supervisor, live), limit=120.0, what="settled liveness")
            warm = await supervisor.handle.plan(READER, canonical_repository=REPO)
            extra["first_plan_ms"] = (time.perf_counter() - began) * 1000
            extra["first_plan_success"] = warm.get("success")
            for _ in range(reps):
                if beat_between:
                    await anyio.to_thread.run_sync(_beat_live_rows, db, sleepers.pids)
                began = time.perf_counter()
                result = await supervisor.handle.plan(READER, canonical_repository=REPO)
                samples.append(time.perf_counter() - began)
            if result.get("success") is not True:
                raise RuntimeError(f"plan through the actor failed: {result.get('reasons')}")
            extra["answer_bytes"] = len(json.dumps(result, default=str))
            began = time.perf_counter()
            snap = await supervisor.handle.snapshot(READER, canonical_repository=REPO)
            extra["snapshot_ms"] = (time.perf_counter() - began) * 1000
            extra["snapshot_success"] = snap.get("success")
            return samples, result, extra
    finally:
        await store.close()


def run(quick: bool) -> list[Figure]:
    sizes = (
        {"1k": 100, "10k": 1_000, "100k": 5_000}
        if quick
        else {
            "1k": 1_000,
            "10k": 10_000,
            "100k": 100_000,
        }
    )
    goals: dict[str, float | None] = {"1k": None, "10k": 20.0, "100k": 250.0}
    judged = not quick
    measured = {
        key: _time_pure(count, max_reps=15, budget=1.0 if quick else 4.0)
        for key, count in sizes.items()
    }
    figures = [
        Figure(
            name=f"plan.pure_{key}_ms",
            label=f"plan_retirement, {sizes[key]:,} rows (incremental, new now)",
            value=info["median_ms"],
            unit="ms",
            goal=goals[key],
            op="<=" if goals[key] is not None else None,
            judged=judged,
            detail=info,
        )
        for key, info in measured.items()
    ]
    figures.extend(
        Figure(
            name=f"plan.pure_{key}_beats_ms",
            label=f"plan_retirement, {sizes[key]:,} rows, every live row beat since the last",
            value=measured[key]["live_rows_beat_median_ms"],
            unit="ms",
            goal=goals[key],
            op="<=",
            judged=judged,
            detail={"live_rows": measured[key]["live_rows"], "rows": sizes[key]},
        )
        for key in ("10k", "100k")
    )
    per_1k = {key: info["ms_per_1k_rows"] for key, info in measured.items()}
    figures.append(
        Figure(
            name="plan.linearity",
            label="plan ms/1k rows: largest / smallest size",
            value=per_1k["100k"] / per_1k["1k"],
            unit="x",
            goal=2.0,
            op="<=",
            judged=judged,
            detail={"ms_per_1k_rows": per_1k},
        )
    )
    actor_rows = sizes["10k"]
    # Ten historical rows per active one; two in quick mode (the store folds each once).
    history = (2 if quick else 10) * actor_rows
    with short_tempdir("fsb-plan-") as work, Sleepers(8 if quick else 32) as sleepers:
        samples, result, info = anyio.run(
            _time_actor, actor_rows, work / "registry.sqlite3", sleepers, 2 if quick else 5
        )
        hist_samples, hist_result, hist_info = anyio.run(
            _time_actor,
            actor_rows,
            work / "history.sqlite3",
            sleepers,
            2 if quick else 5,
            history,
        )
        beat_samples, _, beat_info = anyio.run(
            partial(
                _time_actor,
                actor_rows,
                work / "beating.sqlite3",
                sleepers,
                2 if quick else 5,
                history,
                beat_between=True,
            )
        )
    figures.append(
        Figure(
            name="plan.actor_10k_ms",
            label=f"plan through the actor (probes, audit), {actor_rows:,} rows",
            value=statistics.median(samples) * 1000,
            unit="ms",
            goal=goals["10k"],
            op="<=",
            judged=judged,
            detail={
                "rows": actor_rows,
                "samples_ms": [s * 1000 for s in samples],
                "candidates": result.get("candidate_count"),
                **info,
            },
        )
    )
    figures.append(
        Figure(
            name="plan.actor_10k_history_ms",
            label=(f"plan through the actor, {actor_rows:,} active + {history:,} historical rows"),
            value=statistics.median(hist_samples) * 1000,
            unit="ms",
            goal=50.0,
            op="<=",
            judged=judged,
            detail={
                "active_rows": actor_rows,
                "historical_rows": history,
                "samples_ms": [s * 1000 for s in hist_samples],
                "candidates": hist_result.get("candidate_count"),
                "preserved": hist_result.get("preserved_count"),
                **hist_info,
            },
        )
    )
    figures.append(
        Figure(
            name="plan.actor_10k_history_beating_ms",
            label=(
                f"plan through the actor, {actor_rows:,} active + {history:,} historical rows, "
                "every live row beat since the last plan"
            ),
            value=statistics.median(beat_samples) * 1000,
            unit="ms",
            judged=judged,
            detail={
                "samples_ms": [s * 1000 for s in beat_samples],
                "beaten_rows_per_plan": sum(
                    1 for index in range(actor_rows) if mixed_kind(index) == "live"
                ),
                **beat_info,
            },
        )
    )
    return figures
