"""Heartbeats per second end to end through the daemon's socket, against one commit per beat."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import anyio

from bench.beat_load import (
    Load,
    beat_frames,
    beat_through_handle,
    drive,
    register_sleepers,
    worker_claims,
)
from bench.fixtures import live_rows, local_supervisor, make_db, sqlite_connect
from bench.processes import Daemon, EchoServer, Sleepers, short_tempdir
from bench.report import Figure, percentile
from supervisor.policy.stamps import format_stamp
from supervisor.store import sql
from supervisor.store.dialect import SQLITE
from supervisor.store.sqlite.open import open_sqlite_store

__all__ = ["run"]

#: (connections, requests in flight per connection) for the end-to-end runs.
_LEVELS = ((8, 1), (32, 1), (32, 16))
_QUICK_LEVELS = ((8, 1), (32, 1), (32, 2))
#: Config sections that make the daemon commit every heartbeat alone.
_NAIVE = (
    "[heartbeat]",
    "max_batch = 1",
    "max_in_flight = 1",
    "[retirement]",
    "writer_max_batch = 1",
)
#: Tasks or connections of the baselines and the in-process comparison.
_SENDERS = 32


def _sqlite3_per_beat(path: Path, identities: Sequence[str], duration: float) -> tuple[int, float]:
    """Plain sqlite3: BEGIN IMMEDIATE, the writer's heartbeat UPDATE, COMMIT, for every beat."""
    statement = sql.touch_heartbeats(SQLITE)
    conn = sqlite_connect(path)
    try:
        done = 0
        started = time.perf_counter()
        while True:
            stamp = format_stamp(datetime.now(UTC))
            for identity in identities:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(statement, (identity, stamp))
                conn.execute("COMMIT")
            done += len(identities)
            elapsed = time.perf_counter() - started
            if elapsed >= duration:
                return done, elapsed
    finally:
        conn.close()


async def _store_per_beat(
    path: Path, identities: Sequence[str], senders: int, duration: float
) -> tuple[int, float]:
    """The project's own store, one ``write()`` transaction per beat, ``senders`` tasks at once."""
    store = await open_sqlite_store(path)
    done = 0
    try:
        started = time.perf_counter()
        deadline = started + duration

        async def sender(offset: int) -> None:
            nonlocal done
            k = offset
            while time.perf_counter() < deadline:
                stamp = format_stamp(datetime.now(UTC))
                async with store.write() as tx:
                    await tx.touch_heartbeats([(identities[k % len(identities)], stamp)])
                done += 1
                k += senders

        async with anyio.create_task_group() as tg:
            for offset in range(senders):
                tg.start_soon(sender, offset)
        return done, time.perf_counter() - started
    finally:
        await store.close()


async def _through_handle(
    db: Path, sleepers: Sleepers, callers: int, warmup: float, duration: float
) -> tuple[int, float]:
    """The same beats without the socket: ``callers`` tasks calling ``handle.heartbeat``."""
    store = await open_sqlite_store(db)
    try:
        async with local_supervisor(store) as supervisor:
            handle = supervisor.handle
            registrations = []
            for index, pid in enumerate(sleepers.pids):
                result = await handle.register(pid, worker_claims(index))
                if not result.ok:
                    raise RuntimeError(f"registration of pid {pid} refused: {result.code}")
                registrations.append(result.registration)
            return await beat_through_handle(
                handle, registrations, callers=callers, warmup=warmup, duration=duration
            )
    finally:
        await store.close()


def run(quick: bool) -> list[Figure]:
    """Method, so the figures can be read for what they are.

    * The daemon is a real ``python -m supervisor.cli run`` subprocess (temporary config,
      LocalProbes, default actor settings), so its CPU is its own and readable from /proc.
    * The socket admits a heartbeat only from the worker's own pid or its parent, so this
      process spawns ``sleep`` children, registers each over the socket as their parent,
      and then beats for them.
    * The load generator is a plain ``selectors`` loop over C raw connections, one request
      in flight per connection (no pipelining), pre-encoded frames, every answer parsed and
      counted only when both the frame and the result say ok. Warm-up, then a timed window.
    * Baselines run on a table of the same schema and size after the daemon stopped:
      plain sqlite3 (BEGIN IMMEDIATE, the writer's UPDATE, COMMIT per beat, the store's
      pragmas) and the project's store (one ``write()`` transaction per beat, 32 tasks).
    * For attribution, the same beats also go through ``handle.heartbeat`` in-process,
      with no socket.
    """
    levels = _QUICK_LEVELS if quick else _LEVELS
    # One worker per request in flight, so no two beats in flight name the same worker
    # (the heartbeat actor would merge them into one write).
    workers = max(c * d for c, d in levels)
    warmup, duration = (0.2, 0.5) if quick else (1.0, 4.0)
    # Three short rounds per baseline, median reported: thread hand-offs are noisy on a VM.
    baseline_seconds = 0.15 if quick else 0.8
    rounds = 3
    judged = not quick
    loads: list[Load] = []
    with short_tempdir("fsb-hb-") as work, Sleepers(workers) as sleepers:
        db = work / "registry.sqlite3"
        with Daemon(work, db=db) as daemon:
            registrations = register_sleepers(daemon.socket_path, sleepers)
            for connections, depth in levels:
                loads.append(
                    drive(
                        daemon.socket_path,
                        beat_frames(registrations, connections),
                        daemon=daemon,
                        warmup=warmup,
                        duration=duration,
                        depth=depth,
                    )
                )
        # The like-for-like baseline: the same daemon, clients and loads, configured so that
        # every heartbeat is its own transaction (no batching in the heartbeat actor or the
        # writer): what a supervisor without group commit would do.
        naive_loads: list[Load] = []
        naive_dir = work / "naive"
        naive_dir.mkdir()
        with Daemon(naive_dir, db=naive_dir / "registry.sqlite3", sections=_NAIVE) as naive:
            naive_registrations = register_sleepers(naive.socket_path, sleepers)
            for connections, depth in levels:
                naive_loads.append(
                    drive(
                        naive.socket_path,
                        beat_frames(naive_registrations, connections),
                        daemon=naive,
                        warmup=warmup / 2,
                        duration=duration / 2,
                        depth=depth,
                    )
                )
        # The floor: a bare asyncio server answering every frame at once, same client.
        with EchoServer(work) as echo:
            floor_loads = [
                drive(
                    echo.socket_path,
                    beat_frames(registrations, connections),
                    daemon=echo,
                    warmup=warmup / 2,
                    duration=duration / 2,
                    depth=depth,
                )
                for connections, depth in levels
            ]
        # Baselines run after the daemon stopped, on a table of the same shape and size.
        rows = live_rows(workers, first_pid=200_000)
        identities = [str(r["worker_identity"]) for r in rows]
        plain_db, store_db = work / "plain.sqlite3", work / "store.sqlite3"
        anyio.run(make_db, plain_db, rows)
        anyio.run(make_db, store_db, rows)
        plain_rates, store_rates = [], []
        for _ in range(rounds):
            done, seconds = _sqlite3_per_beat(plain_db, identities, baseline_seconds)
            plain_rates.append(done / seconds)
            done, seconds = anyio.run(
                _store_per_beat, store_db, identities, _SENDERS, baseline_seconds
            )
            store_rates.append(done / seconds)
        handle_done, handle_seconds = anyio.run(
            _through_handle,
            work / "handle.sqlite3",
            sleepers,
            _SENDERS,
            warmup,
            duration,
        )
    plain_rate = statistics.median(plain_rates)
    store_rate = statistics.median(store_rates)
    best = max(loads, key=lambda load: load.rate)
    naive_best = max(naive_loads, key=lambda load: load.rate)
    figures: list[Figure] = []
    for load in loads:
        connections, depth = load.connections, load.depth
        suffix = "" if depth == 1 else "_pipelined"
        mode = "1 request in flight each" if depth == 1 else f"{depth} pipelined each"
        lat_ms = [x * 1000 for x in load.latencies] or [0.0]
        beats = max(1, load.acked + sum(load.refused.values()))
        figures.append(
            Figure(
                name=f"heartbeats.e2e_c{connections}{suffix}_per_s",
                label=f"heartbeats/s end to end, {connections} conns, {mode}",
                value=load.rate,
                unit="/s",
                goal=25_000,
                op=">=",
                judged=judged,
                detail={
                    "connections": connections,
                    "in_flight_per_connection": depth,
                    "workers": workers,
                    "window_seconds": load.seconds,
                    "acked": load.acked,
                    "refused": dict(load.refused),
                    "latency_p50_ms": percentile(lat_ms, 50),
                    "latency_p99_ms": percentile(lat_ms, 99),
                    "daemon_cpu_us_per_beat": load.daemon_cpu / beats * 1e6,
                    "daemon_cpu_share": load.daemon_cpu / load.seconds,
                    "client_cpu_us_per_beat": load.client_cpu / beats * 1e6,
                    "client_cpu_share": load.client_cpu / load.seconds,
                },
            )
        )
    figures += [
        Figure(
            name="heartbeats.handle_c32_per_s",
            label="heartbeats/s via handle, no socket, 32 callers",
            value=handle_done / handle_seconds,
            unit="/s",
            judged=judged,
            detail={"beats": handle_done, "seconds": handle_seconds, "workers": workers},
        ),
        Figure(
            name="heartbeats.echo_floor_c32_per_s",
            label="floor: bare asyncio echo server, 32 conns, 1 in flight",
            value=next(f.rate for f in floor_loads if f.connections == 32 and f.depth == 1),
            unit="/s",
            judged=judged,
            detail={
                "by_level": [
                    {
                        "connections": f.connections,
                        "depth": f.depth,
                        "per_s": f.rate,
                        "server_cpu_us_per_beat": f.daemon_cpu / max(1, f.acked) * 1e6,
                        "client_cpu_us_per_beat": f.client_cpu / max(1, f.acked) * 1e6,
                    }
                    for f in floor_loads
                ]
            },
        ),
        Figure(
            name="heartbeats.baseline_naive_e2e_per_s",
            label="baseline: same daemon, one commit per beat, e2e",
            value=naive_best.rate,
            unit="/s",
            judged=judged,
            detail={
                "by_level": [
                    {"connections": n.connections, "depth": n.depth, "per_s": n.rate}
                    for n in naive_loads
                ],
                "best_connections": naive_best.connections,
                "best_depth": naive_best.depth,
            },
        ),
        Figure(
            name="heartbeats.vs_naive_e2e_ratio",
            label="heartbeats e2e / same daemon committing per beat",
            value=best.rate / naive_best.rate,
            unit="x",
            goal=10.0,
            op=">=",
            judged=judged,
            detail={"e2e_connections": best.connections, "e2e_depth": best.depth},
        ),
        Figure(
            name="heartbeats.baseline_sqlite3_per_s",
            label="baseline: sqlite3, one commit per beat",
            value=plain_rate,
            unit="/s",
            judged=judged,
            detail={
                "rounds_per_s": plain_rates,
                "round_seconds": baseline_seconds,
                "rows": workers,
            },
        ),
        Figure(
            name="heartbeats.baseline_store_per_s",
            label="baseline: store.write() per beat (aiosqlite)",
            value=store_rate,
            unit="/s",
            judged=judged,
            detail={
                "rounds_per_s": store_rates,
                "round_seconds": baseline_seconds,
                "senders": _SENDERS,
            },
        ),
        Figure(
            name="heartbeats.vs_sqlite3_ratio",
            label="heartbeats e2e / sqlite3 commit-per-beat",
            value=best.rate / plain_rate,
            unit="x",
            goal=10.0,
            op=">=",
            judged=judged,
            detail={"e2e_connections": best.connections, "e2e_depth": best.depth},
        ),
        Figure(
            name="heartbeats.vs_store_ratio",
            label="heartbeats e2e / store commit-per-beat",
            value=best.rate / store_rate,
            unit="x",
            goal=10.0,
            op=">=",
            judged=judged,
            detail={"e2e_connections": best.connections, "e2e_depth": best.depth},
        ),
    ]
    return figures
