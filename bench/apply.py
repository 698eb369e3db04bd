"""Apply retiring 1,000 stale rows, re-probes included: the writer transaction and handle.apply."""

from __future__ import annotations

import gc
import shutil
import statistics
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from actors.audit import audit_event
from actors.liveness.actor import LivenessSettings
from actors.mailbox import Reply
from actors.replies import ApplyOutcome
from actors.retirement.actor import RetirementSettings
from actors.retirement.apply_tx import ApplyRetirement, ApplySettings, run_apply
from actors.writer.actor import WriterSettings
from bench.fixtures import (
    READER,
    REPO,
    RETIRER,
    local_supervisor,
    make_db,
    registration_row,
    wait_until,
)
from bench.processes import free_pids, short_tempdir
from bench.report import Figure
from supervisor.clock import MonotonicWall, SystemClock
from supervisor.daemon.app import AppSettings
from supervisor.daemon.service import freeze_startup_heap
from supervisor.policy.evidence import PidEvidence
from supervisor.policy.retirement.plan import FencingContext, ProtectedOwners
from supervisor.policy.retirement.planner import plan_retirement
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.system.probes import LocalProbes

__all__ = ["run"]

#: High enough that the mass guard never refuses the benchmark's all-stale fleet.
_FLOOR = 1_000_000


def _stale_rows(count: int, probes: LocalProbes) -> list[dict[str, Any]]:
    """Stale, dead, fenced on this host and boot, trusted: every row is a candidate."""
    now = datetime.now(UTC)
    host, boot = probes.host_id(), probes.boot_id()
    return [
        registration_row(
            index, kind="stale", now=now, host_id=host, boot_id=boot, pid=pid, start_time="ticks-1"
        )
        for index, pid in enumerate(free_pids(count))
    ]


async def _writer_apply(db: Path) -> tuple[float, Mapping[str, Any]]:
    """``run_apply`` exactly as the writer calls it, on a store nobody else uses."""
    probes = LocalProbes()
    clock = MonotonicWall(SystemClock())
    store = await open_sqlite_store(db)
    try:
        rows = await store.read_registrations()
        evidence = {
            seen.pid: PidEvidence(alive=seen.alive, start_time=seen.start_time)
            for seen in probes.probe_many(sorted({int(r["pid"]) for r in rows}))
        }
        plan = plan_retirement(
            rows,
            now=clock.now(),
            evidence=evidence,
            fencing=FencingContext(host_id=probes.host_id(), boot_id=probes.boot_id()),
            canonical_repository=REPO,
            protected=ProtectedOwners(),
        )
        message = ApplyRetirement(
            mode="strict",
            expected_token=plan.registry_fingerprint,
            expected_candidate_fingerprint=plan.candidate_fingerprint,
            worker_identities=plan.candidate_worker_identities,
            canonical_repository=REPO,
            retired_by=RETIRER.name,
            recheck_grant=lambda: None,
            audit=lambda result: audit_event(RETIRER, "apply", result, at=clock.now()),
            reply=Reply[ApplyOutcome].discarding(),
        )
        began = time.perf_counter()
        outcome = await run_apply(
            message,
            store=store,
            clock=clock,
            probes=probes,
            settings=ApplySettings(mass_guard_floor=_FLOOR),
        )
        return time.perf_counter() - began, dict(outcome.result)
    finally:
        await store.close()


async def _handle_apply(db: Path) -> tuple[float, Mapping[str, Any]]:
    """plan then ``handle.apply`` through the running supervisor; only the apply is timed."""
    store = await open_sqlite_store(db)
    settings = AppSettings(
        writer=WriterSettings(apply=ApplySettings(mass_guard_floor=_FLOOR)),
        liveness=LivenessSettings(sweep_interval_seconds=3600.0),
        retirement=RetirementSettings(canonical_repository=REPO),
    )
    try:
        async with local_supervisor(store, settings) as supervisor:
            # As the daemon does once it is up (supervisor/daemon/service.py); undone below so
            # later benchmarks in this process start from an ordinary heap.
            freeze_startup_heap()

            # Apply refuses until one sweep completed; the first one starts with the actor.
            async def swept() -> bool:
                return (await supervisor.handle.liveness_status()).sweeps_completed >= 1

            await wait_until(swept, limit=30.0, what="a first liveness sweep")
            plan = await supervisor.handle.plan(READER)
            began = time.perf_counter()
            result = await supervisor.handle.apply(
                RETIRER,
                registry_fingerprint=str(plan["registry_fingerprint"]),
                candidate_fingerprint=str(plan["candidate_fingerprint"]),
                worker_identities=list(plan["candidate_worker_identities"]),
            )
            return time.perf_counter() - began, result
    finally:
        gc.unfreeze()
        await store.close()


def _check(result: Mapping[str, Any], expected: int) -> None:
    kept = list(result.get("preserved") or [])
    if result.get("outcome") != "applied" or result.get("retired_count") != expected:
        raise RuntimeError(
            f"apply did not retire all {expected} rows: outcome={result.get('outcome')} "
            f"retired={result.get('retired_count')} reasons={result.get('reasons')} "
            f"preserved={[(v.get('reason_code'), v.get('detail')) for v in kept][:5]}"
        )


def run(quick: bool) -> list[Figure]:
    count = 100 if quick else 1_000
    reps = 1 if quick else 5
    judged = not quick
    probes = LocalProbes()
    timings: dict[str, list[float]] = {"writer": [], "handle": []}
    with short_tempdir("fsb-ap-") as work:
        template = work / "template.sqlite3"
        anyio.run(make_db, template, _stale_rows(count, probes))
        for rep in range(reps):
            for kind, measure in (("writer", _writer_apply), ("handle", _handle_apply)):
                db = work / f"{kind}-{rep}.sqlite3"
                shutil.copyfile(template, db)
                seconds, result = anyio.run(measure, db)
                _check(result, count)
                timings[kind].append(seconds * 1000)
    return [
        Figure(
            name=f"apply.{kind}_1k_ms",
            label=f"apply retiring {count:,} rows, "
            + ("writer run_apply" if kind == "writer" else "full handle.apply"),
            value=statistics.median(samples),
            unit="ms",
            goal=150.0,
            op="<=",
            judged=judged,
            detail={"rows": count, "samples_ms": samples},
        )
        for kind, samples in timings.items()
    ]
