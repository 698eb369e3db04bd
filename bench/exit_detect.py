"""Time from SIGKILL of a registered worker to a ``dead`` verdict: pidfd, and sweeps alone."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from actors.liveness.actor import LivenessSettings
from bench.fixtures import REPO, local_supervisor
from bench.processes import short_tempdir, sleeper_argv
from bench.report import Figure, percentile
from supervisor.daemon.app import AppSettings, Supervisor
from supervisor.policy.identity.instance import mint_instance_id
from supervisor.store.sqlite.open import open_sqlite_store

__all__ = ["run", "worker_claims"]

SWEEP_INTERVAL = 0.1
#: A kill not seen within this long counts as this long (and as a miss).
_GIVE_UP = 5.0
_POLL = 0.0005


def worker_claims(index: int) -> dict[str, Any]:
    """Registration claims of the index-th benchmark worker (one trusted launch each)."""
    return {
        "client_name": "codex",
        "client_instance_id": mint_instance_id(
            "codex", now=datetime(2026, 1, 1, tzinfo=UTC), nonce=f"exit-{index}"
        ),
        "session_id": f"sess-exit-{index}",
        "namespace": "author",
        "role": "author",
        "profile": "prgs-author",
        "repository_binding": REPO,
    }


async def _wait_for(predicate: Callable[[], bool], limit: float) -> bool:
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        if predicate():
            return True
        await anyio.sleep(_POLL)
    return bool(predicate())


async def _wait_for_async(predicate: Callable[[], Awaitable[bool]], limit: float) -> bool:
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        if await predicate():
            return True
        await anyio.sleep(_POLL)
    return await predicate()


async def _one_kill(
    supervisor: Supervisor, index: int, *, pidfd: bool, rng: random.Random
) -> tuple[float, bool, str]:
    """Spawn, register, wait until watched or judged alive, kill; seconds until judged dead."""
    liveness = supervisor.liveness
    assert liveness is not None
    process: Process = await anyio.open_process(sleeper_argv())
    killed = False
    try:
        watched_before = (await supervisor.handle.liveness_status()).watched_pids
        result = await supervisor.handle.register(process.pid, worker_claims(index))
        if not result.ok:
            raise RuntimeError(f"registration refused: {result.code} {result.detail}")
        identity = str(result.registration["worker_identity"])

        def ready() -> bool:
            verdict = liveness.verdict(identity)
            return verdict is not None and verdict.state == "alive"

        if pidfd:
            # The Watch the heartbeat actor sent at registration has been opened.
            async def watched() -> bool:
                status = await supervisor.handle.liveness_status()
                return status.watched_pids > watched_before

            if not await _wait_for_async(watched, _GIVE_UP):
                raise RuntimeError("a registered sleeper never got a pidfd watch")
        elif not await _wait_for(ready, _GIVE_UP):
            raise RuntimeError("a registered sleeper was never judged alive by a sweep")
        # A random phase against the sweep timer, so sweep-only latencies cover its whole cycle.
        await anyio.sleep(rng.uniform(0.0, SWEEP_INTERVAL))
        killed_at = time.perf_counter()
        process.kill()
        killed = True

        def dead() -> bool:
            verdict = liveness.verdict(identity)
            return verdict is not None and verdict.state == "dead"

        seen = await _wait_for(dead, _GIVE_UP)
        latency = time.perf_counter() - killed_at
        verdict = liveness.verdict(identity)
        return latency, seen, verdict.source if verdict else "none"
    finally:
        # Never signal twice: returncode stays None until asyncio's watcher thread reaps
        # the child, and a second kill() polls (waitpid) first, which can reap it ahead
        # of the watcher ("Unknown child process pid ..., will report returncode 255").
        if not killed:
            process.kill()
        await process.wait()
        await process.aclose()


async def _measure(db: Path, *, pidfd: bool, kills: int) -> dict[str, Any]:
    store = await open_sqlite_store(db)
    rng = random.Random(7)
    try:
        settings = AppSettings(
            liveness=LivenessSettings(sweep_interval_seconds=SWEEP_INTERVAL, use_pidfd=pidfd)
        )
        async with local_supervisor(store, settings) as supervisor:
            latencies: list[float] = []
            sources: Counter[str] = Counter()
            misses = 0
            for index in range(kills):
                latency, seen, source = await _one_kill(supervisor, index, pidfd=pidfd, rng=rng)
                latencies.append(latency if seen else _GIVE_UP)
                misses += not seen
                sources[source] += 1
        return {"latencies": latencies, "sources": dict(sources), "misses": misses}
    finally:
        await store.close()


def run(quick: bool) -> list[Figure]:
    kills = {"pidfd": 10 if quick else 100, "sweep": 8 if quick else 60}
    judged = not quick
    figures: list[Figure] = []
    for mode, count in kills.items():
        with short_tempdir("fsb-ex-") as work:
            measure = partial(_measure, pidfd=mode == "pidfd", kills=count)
            got = anyio.run(measure, work / "registry.sqlite3")
        ms = [x * 1000 for x in got["latencies"]]
        detail = {
            "kills": count,
            "misses": got["misses"],
            "verdict_sources": got["sources"],
            "sweep_interval_s": SWEEP_INTERVAL,
            "max_ms": max(ms),
            "mean_ms": sum(ms) / len(ms),
        }
        for pct in (50, 99):
            goal = 50.0 if mode == "pidfd" and pct == 99 else None
            figures.append(
                Figure(
                    name=f"exit.{mode}_p{pct}_ms",
                    label=f"SIGKILL to dead verdict, {mode}{'' if mode == 'pidfd' else ' only'},"
                    f" p{pct}",
                    value=percentile(ms, pct),
                    unit="ms",
                    goal=goal,
                    op="<=" if goal is not None else None,
                    judged=judged,
                    detail=detail,
                )
            )
    return figures
