"""One liveness sweep over 10,000 registered pids: CPU time and the longest event-loop stall."""

from __future__ import annotations

import gc
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from actors.liveness.actor import LivenessActor, LivenessSettings
from actors.liveness.inbox import LivenessInbox
from bench.fixtures import StallMeter, make_db, registration_row
from bench.processes import Sleepers, free_pids, short_tempdir
from bench.report import Figure
from supervisor.clock import MonotonicWall, SystemClock
from supervisor.daemon.service import freeze_startup_heap
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.system.probes import LocalProbes

__all__ = ["run"]


def _rows(count: int, sleepers: Sleepers, probes: LocalProbes) -> list[dict[str, Any]]:
    """Mostly pids nobody holds (the common case for a sweep to settle), plus real sleepers."""
    now = datetime.now(UTC)
    host, boot = probes.host_id(), probes.boot_id()
    live = len(sleepers.pids)
    dead = free_pids(count - live)
    rows = []
    for index in range(count):
        if index < live:
            pid, start = sleepers.pids[index], sleepers.start_times[index]
        else:
            pid, start = dead[index - live], f"ticks-{index}"
        rows.append(
            registration_row(
                index,
                kind="live" if index < live else "stale",
                now=now,
                host_id=host,
                boot_id=boot,
                pid=pid,
                start_time=start,
            )
        )
    return rows


async def _measure(db: Path, sweeps: int) -> dict[str, Any]:
    store = await open_sqlite_store(db)
    try:
        _tx, inbox = anyio.create_memory_object_stream[LivenessInbox](16)
        actor = LivenessActor(
            inbox=inbox,
            store=store,
            clock=MonotonicWall(SystemClock()),
            probes=LocalProbes(),
            settings=LivenessSettings(sweep_interval_seconds=3600.0),
        )
        # As the daemon does once it is up; undone below so later benchmarks in this
        # process start from an ordinary heap.
        freeze_startup_heap()
        meter = StallMeter()
        cpu: list[float] = []
        thread_cpu: list[float] = []
        wall: list[float] = []
        stalls: list[float] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(meter.run)
            # The same ticker with nothing else running: what a "no stall" gap looks like here.
            await anyio.sleep(0.2)
            meter.reset()
            await anyio.sleep(0.5)
            idle_longest = meter.longest
            for _ in range(sweeps):
                meter.reset()
                cpu0, thread0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
                await actor.sweep()
                wall.append(time.perf_counter() - wall0)
                cpu.append(time.process_time() - cpu0)
                thread_cpu.append(time.thread_time() - thread0)
                # Let the ticker wake once more, so a gap that ends with the sweep is counted.
                await anyio.sleep(0.005)
                stalls.append(meter.longest)
                await anyio.sleep(0.05)
            meter.stop()
            verdicts: dict[str, int] = {}
            for row in await store.read_registrations(status="active"):
                verdict = actor.verdict(str(row["worker_identity"]))
                state = verdict.state if verdict else "none"
                verdicts[state] = verdicts.get(state, 0) + 1
            # Ends the pidfd watches the sweeps opened on the live rows.
            tg.cancel_scope.cancel()
        return {
            "cpu": cpu,
            "thread_cpu": thread_cpu,
            "wall": wall,
            "stalls": stalls,
            "idle_longest": idle_longest,
            "verdicts": verdicts,
        }
    finally:
        gc.unfreeze()
        await store.close()


def run(quick: bool) -> list[Figure]:
    count = 1_000 if quick else 10_000
    sweeps = 2 if quick else 6
    probes = LocalProbes()
    with short_tempdir("fsb-sw-") as work, Sleepers(8 if quick else 64) as sleepers:
        db = work / "registry.sqlite3"
        anyio.run(make_db, db, _rows(count, sleepers, probes))
        got = anyio.run(_measure, db, sweeps)
    ms = [x * 1000 for x in got["cpu"]]
    stall_ms = [x * 1000 for x in got["stalls"]]
    judged = not quick
    detail = {
        "pids": count,
        "live_pids": len(sleepers.pids),
        "sweeps": sweeps,
        "chunk": LivenessSettings().sweep_chunk,
        "cpu_ms_per_sweep": ms,
        "loop_thread_cpu_ms_per_sweep": [x * 1000 for x in got["thread_cpu"]],
        "wall_ms_per_sweep": [x * 1000 for x in got["wall"]],
        "verdicts": got["verdicts"],
    }
    return [
        Figure(
            name="sweep.cpu_ms",
            label=f"liveness sweep CPU, {count:,} pids (median)",
            value=statistics.median(ms),
            unit="ms",
            goal=80.0,
            op="<=",
            judged=judged,
            detail=detail,
        ),
        Figure(
            name="sweep.max_stall_ms",
            label=f"longest loop stall during a sweep, {count:,} pids",
            value=max(stall_ms),
            unit="ms",
            goal=5.0,
            op="<=",
            judged=judged,
            detail={
                "stall_ms_per_sweep": stall_ms,
                "idle_longest_tick_ms": got["idle_longest"] * 1000,
                "tick_ms": 1.0,
            },
        ),
    ]
