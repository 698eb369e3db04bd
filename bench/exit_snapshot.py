"""SIGKILL of a registered worker that its parent never reaps, until a snapshot shows it dead."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from actors.liveness.actor import LivenessSettings
from bench.exit_detect import worker_claims
from bench.fixtures import READER, local_supervisor
from bench.processes import short_tempdir, sleeper_argv
from bench.report import Figure, percentile
from supervisor.daemon.app import AppSettings, Supervisor
from supervisor.store.sqlite.open import open_sqlite_store

__all__ = ["run"]

#: The daemon's default: a snapshot must not need a sweep to see the death.
SWEEP_INTERVAL = LivenessSettings().sweep_interval_seconds
#: A kill not seen within this long counts as this long (and as a miss).
_GIVE_UP = 5.0
_POLL = 0.0005


def _worker_live(snapshot: Mapping[str, Any], identity: str) -> bool:
    for worker in snapshot["workers"]:
        if worker["worker_identity"] == identity:
            return bool(worker["live"])
    raise RuntimeError(f"worker {identity} is missing from the snapshot")


def _still_unreaped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="latin-1") as handle:
            return handle.read().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return False


def _spawn_unreaped() -> subprocess.Popen[bytes]:
    # Popen, not anyio: the event loop's child watcher would reap the worker at once. Here
    # the parent (this process) does not wait for it until the measurement is over, like
    # a parent that is gone or busy: the killed worker stays a zombie throughout.
    return subprocess.Popen(sleeper_argv())


async def _one_kill(supervisor: Supervisor, index: int) -> tuple[float, bool, bool]:
    """Spawn, register, kill without reaping; seconds until a snapshot shows it not live."""
    handle = supervisor.handle
    process = _spawn_unreaped()
    killed = False
    try:
        watched_before = (await handle.liveness_status()).watched_pids
        result = await handle.register(process.pid, worker_claims(index))
        if not result.ok:
            raise RuntimeError(f"registration refused: {result.code} {result.detail}")
        identity = str(result.registration["worker_identity"])
        deadline = time.perf_counter() + _GIVE_UP
        while (await handle.liveness_status()).watched_pids <= watched_before:
            if time.perf_counter() > deadline:
                raise RuntimeError("a registered sleeper never got an exit watch")
            await anyio.sleep(_POLL)
        if not _worker_live(await handle.snapshot(READER), identity):
            raise RuntimeError("a running, freshly registered worker is not live")
        killed_at = time.perf_counter()
        os.kill(process.pid, signal.SIGKILL)
        killed = True
        seen = False
        while time.perf_counter() - killed_at < _GIVE_UP:
            if not _worker_live(await handle.snapshot(READER), identity):
                seen = True
                break
            await anyio.sleep(_POLL)
        latency = time.perf_counter() - killed_at
        return latency, seen, _still_unreaped(process.pid)
    finally:
        if not killed:
            process.kill()
        process.wait()


async def _measure(workdir: Path, *, kills: int) -> dict[str, Any]:
    latencies: list[float] = []
    misses = 0
    zombies = 0
    for index in range(kills):
        # A registry of its own per kill: otherwise every earlier victim's row would stay
        # in the snapshot, and the figure would grow with the benchmark's own history.
        store = await open_sqlite_store(workdir / f"registry-{index}.sqlite3")
        try:
            async with local_supervisor(
                store, AppSettings(liveness=LivenessSettings(sweep_interval_seconds=SWEEP_INTERVAL))
            ) as supervisor:
                latency, seen, zombie = await _one_kill(supervisor, index)
        finally:
            await store.close()
        latencies.append(latency if seen else _GIVE_UP)
        misses += not seen
        zombies += zombie
    return {"latencies": latencies, "misses": misses, "unreaped_when_seen": zombies}


def run(quick: bool) -> list[Figure]:
    kills = 8 if quick else 60
    with short_tempdir("fsb-exs-") as work:
        got = anyio.run(partial(_measure, kills=kills), work)
    ms = [x * 1000 for x in got["latencies"]]
    detail = {
        "kills": kills,
        "misses": got["misses"],
        "unreaped_when_seen": got["unreaped_when_seen"],
        "sweep_interval_s": SWEEP_INTERVAL,
        "max_ms": max(ms),
        "mean_ms": sum(ms) / len(ms),
    }
    return [
        Figure(
            name=f"exit.snapshot_p{pct}_ms",
            label=f"SIGKILL to snapshot showing the worker not live (never reaped), p{pct}",
            value=percentile(ms, pct),
            unit="ms",
            goal=100.0 if pct == 99 else None,
            op="<=" if pct == 99 else None,
            judged=not quick,
            detail=detail,
        )
        for pct in (50, 99)
    ]
