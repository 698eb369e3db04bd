"""Discovery's cost: a steady-state sweep with the census against the liveness sweep alone.

1,000 real sleeping processes are on the host (each registered, so the liveness sweep has
them all to judge) plus a stand-in client with a few MCP servers over pipes (so the
census has trees to read). The figures: the CPU of one liveness sweep, of one census
sweep once the host is known (first sights done), their ratio, and the longest event-loop
stall while the census sweeps.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from actors.liveness.actor import LivenessActor, LivenessSettings
from actors.liveness.inbox import LivenessInbox
from actors.mailbox import let_others_run
from bench.census_rig import StandInClient, census_and_writer
from bench.fixtures import StallMeter, host_rows, make_db
from bench.processes import Sleepers, short_tempdir
from bench.report import Figure
from supervisor.clock import MonotonicWall, SystemClock
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.system.probes import LocalProbes

__all__ = ["run"]


class _Chunks:
    """The longest stretch a census sweep runs between two yields, in this thread's CPU
    time: what the sweep itself holds the loop for, whatever else the machine runs."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._mark = time.thread_time()

    def start(self) -> None:
        self.longest, self._mark = 0.0, time.thread_time()

    def lap(self) -> None:
        now = time.thread_time()
        self.longest = max(self.longest, now - self._mark)
        self._mark = now

    async def pause(self) -> None:
        self.lap()
        await let_others_run()
        self._mark = time.thread_time()


async def _cpu_of(work: Any) -> float:
    began = time.process_time()
    await work()
    return time.process_time() - began


async def _measure(db: Path, sweeps: int, home: Path) -> dict[str, Any]:
    store = await open_sqlite_store(db)
    clock = MonotonicWall(SystemClock())
    probes = LocalProbes()
    try:
        census, writer, writer_tx = census_and_writer(store, clock, probes, home)
        _l_tx, liveness_rx = anyio.create_memory_object_stream[LivenessInbox](16)
        liveness = LivenessActor(
            inbox=liveness_rx,
            store=store,
            clock=clock,
            probes=probes,
            settings=LivenessSettings(sweep_interval_seconds=3600.0),
        )
        meter = StallMeter()
        chunks = _Chunks()
        census.pause = chunks.pause
        got: dict[str, Any] = {"liveness": [], "census": [], "stalls": [], "chunks": []}
        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)
            tg.start_soon(meter.run)
            # The first sweeps of each: the liveness actor opens its pidfd watches, the
            # census reads every process once. What follows is the steady state.
            await liveness.sweep()
            meter.reset()
            got["first_census"] = await _cpu_of(census.sweep)
            got["first_stall"] = meter.longest
            got["first_sights"] = census.tracker.first_sights
            gc.collect()
            # The same ticker with nothing else running: what a "no stall" gap looks like.
            meter.reset()
            await anyio.sleep(0.5)
            got["idle_longest"] = meter.longest
            for _ in range(sweeps):
                got["liveness"].append(await _cpu_of(liveness.sweep))
                await anyio.sleep(0.02)
                meter.reset()
                chunks.start()
                got["census"].append(await _cpu_of(census.sweep))
                chunks.lap()
                got["chunks"].append(chunks.longest)
                await anyio.sleep(0.005)  # one more tick, so a gap ending with the sweep counts
                got["stalls"].append(meter.longest)
                await anyio.sleep(0.02)
            got["servers"] = len(census.view().census.servers)
            got["steady_first_sights"] = census.tracker.first_sights
            meter.stop()
            writer_tx.close()
            tg.cancel_scope.cancel()
        return got
    finally:
        await store.close()


def run(quick: bool) -> list[Figure]:
    count = 200 if quick else 1_000
    sweeps = 3 if quick else 10
    with (
        short_tempdir("fsb-dc-") as work,
        Sleepers(count) as sleepers,
    ):
        client = StandInClient(
            4,
            name="mcp-bench-server",
            program=[sys.executable, "-c", "import time; time.sleep(900)"],
        )
        try:
            anyio.run(make_db, work / "registry.sqlite3", host_rows(count, sleepers))
            got = anyio.run(_measure, work / "registry.sqlite3", sweeps, work)
        finally:
            client.close()
    liveness_ms = statistics.median(got["liveness"]) * 1000
    census_ms = statistics.median(got["census"]) * 1000
    ratio = (liveness_ms + census_ms) / liveness_ms if liveness_ms > 0 else float("inf")
    chunk_ms = max(got["chunks"]) * 1000
    judged = not quick
    detail = {
        "processes_started": count,
        "sweeps": sweeps,
        "liveness_ms_per_sweep": [x * 1000 for x in got["liveness"]],
        "census_ms_per_sweep": [x * 1000 for x in got["census"]],
        "longest_chunk_cpu_ms_per_sweep": [x * 1000 for x in got["chunks"]],
        # The ticker's longest gap: this sweep's chunks plus whatever else the (shared,
        # noisy) machine did meanwhile; compare with idle_longest_tick_ms.
        "ticker_gap_ms_per_sweep": [x * 1000 for x in got["stalls"]],
        "first_census_ms": got["first_census"] * 1000,
        "first_census_stall_ms": got["first_stall"] * 1000,
        "idle_longest_tick_ms": got["idle_longest"] * 1000,
        "first_sights": got["first_sights"],
        "steady_first_sights": got["steady_first_sights"],
        "servers_found": got["servers"],
    }
    return [
        Figure(
            name="discovery.cost_ratio",
            label=f"steady sweep with discovery / without, {count:,} processes",
            value=ratio,
            unit="x",
            goal=1.5,
            op="<=",
            judged=judged,
            detail=detail,
        ),
        Figure(
            name="discovery.census_sweep_ms",
            label=f"census sweep CPU once the host is known, {count:,} processes (median)",
            value=census_ms,
            unit="ms",
            judged=judged,
        ),
        Figure(
            name="discovery.liveness_sweep_ms",
            label=f"liveness sweep CPU, {count:,} registered processes (median)",
            value=liveness_ms,
            unit="ms",
            judged=judged,
        ),
        Figure(
            name="discovery.first_sweep_ms",
            label=f"first census sweep CPU (every process read once), {count:,} processes",
            value=got["first_census"] * 1000,
            unit="ms",
            judged=judged,
        ),
        Figure(
            name="discovery.max_stall_ms",
            label=f"longest census chunk between yields (loop stall), {count:,} processes",
            value=chunk_ms,
            unit="ms",
            goal=5.0,
            op="<=",
            judged=judged,
        ),
    ]
