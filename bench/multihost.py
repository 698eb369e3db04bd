"""Three supervisors sharing one PostgreSQL: heartbeats/s against one commit per beat, plan latency.

Each supervisor runs in a process of its own (``python -m bench.multihost host ...``), as it
would on its own host; they share one local PostgreSQL 15 server started from the machine's
binaries with fsync on, so a commit costs what it costs in production.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import asyncpg

from actors.host_lease.actor import HostLeaseSettings
from bench.beat_load import beat_through_handle
from bench.fixtures import READER, REPO, StaticProfiles
from bench.processes import Sleepers, cpu_seconds, short_tempdir
from bench.report import Figure, percentile
from supervisor.clock import MonotonicWall, SystemClock
from supervisor.daemon.app import AppSettings, running_supervisor
from supervisor.observe.logs import configure_logging
from supervisor.policy.identity.instance import mint_instance_id
from supervisor.policy.stamps import format_stamp
from supervisor.store import sql
from supervisor.store.dialect import POSTGRESQL
from supervisor.store.postgres.open import migrate_postgres, open_postgres_store
from supervisor.system.probes import LocalProbes
from tests.pg_server import find_pg_bindir, start_pg_server

__all__ = ["run"]

_HOSTS = ("bench-host-a", "bench-host-b", "bench-host-c")
_ROOT = Path(__file__).resolve().parent.parent
#: Connections of the commit-per-beat baselines: one per supervisor (each daemon has one
#: write connection, so three supervisors committing every beat alone), and a generous
#: 24, where PostgreSQL can flush several backends' commits with one WAL write.
_BASELINE_CONNECTIONS = (3, 24)


def _claims(host: str, index: int) -> dict[str, Any]:
    return {
        "client_name": "codex",
        "client_instance_id": mint_instance_id(
            "codex", now=datetime(2026, 1, 1, tzinfo=UTC), nonce=f"{host}-{index}"
        ),
        "session_id": f"sess-{host}-{index}",
        "namespace": "author",
        "role": "author",
        "profile": "prgs-author",
        "repository_binding": REPO,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class _HostRun:
    url: str
    host: str
    workers: int
    warmup: float
    duration: float
    plans: int


async def _host(spec: _HostRun) -> dict[str, Any]:
    """One supervisor: ``workers`` callers beat through the handle, then timed plans."""
    host, workers, plans = spec.host, spec.workers, spec.plans
    warmup, duration = spec.warmup, spec.duration
    store = await open_postgres_store(spec.url)
    try:
        with Sleepers(workers) as sleepers:
            async with running_supervisor(
                store=store,
                clock=MonotonicWall(SystemClock()),
                probes=LocalProbes(host_override=host),
                profiles=StaticProfiles(),
                # Host leases on, as with any shared registry.
                settings=AppSettings(hosts=HostLeaseSettings(enabled=True)),
            ) as supervisor:
                handle = supervisor.handle
                registrations = []
                for index, pid in enumerate(sleepers.pids):
                    result = await handle.register(pid, _claims(host, index))
                    if not result.ok:
                        raise RuntimeError(f"registration refused: {result.code} {result.detail}")
                    registrations.append(result.registration)
                backend = store.writer_backend_pid()
                cpu: dict[str, float] = {}

                async def cpu_at_window_start() -> None:
                    # CPU per acknowledged beat, this process's and its PostgreSQL write
                    # backend's: what the throughput costs, whatever else the machine runs.
                    await anyio.sleep(warmup)
                    cpu["host"], cpu["backend"] = time.process_time(), cpu_seconds(backend)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(cpu_at_window_start)
                    acked, seconds = await beat_through_handle(
                        handle,
                        registrations,
                        callers=len(registrations),
                        warmup=warmup,
                        duration=duration,
                    )
                host_cpu = time.process_time() - cpu["host"]
                backend_cpu = cpu_seconds(backend) - cpu["backend"]
                plan_ms: list[float] = []
                host_plan_ms: list[float] = []
                for _ in range(plans):
                    began = time.perf_counter()
                    await handle.plan(READER, canonical_repository=REPO)
                    plan_ms.append((time.perf_counter() - began) * 1000)
                    began = time.perf_counter()
                    other = next(h for h in _HOSTS if h != host)
                    await supervisor.hosts.plan_retirement(READER, other)
                    host_plan_ms.append((time.perf_counter() - began) * 1000)
    finally:
        await store.close()
    return {
        "host": host,
        "acked": acked,
        "seconds": seconds,
        "host_cpu_us_per_beat": 1e6 * host_cpu / max(acked, 1),
        "backend_cpu_us_per_beat": 1e6 * backend_cpu / max(acked, 1),
        "plan_ms": plan_ms,
        "host_plan_ms": host_plan_ms,
    }


@dataclass(frozen=True, slots=True)
class _Baseline:
    beats: int
    seconds: float
    #: CPU per beat of this (client) process and of the connections' server backends.
    client_cpu_us_per_beat: float
    backend_cpu_us_per_beat: float


async def _commit_per_beat(
    url: str, identities: Sequence[str], connections: int, duration: float
) -> _Baseline:
    """The same UPDATE, one autocommitted statement (one commit, one WAL flush) per beat."""
    statement = sql.touch_heartbeats(POSTGRESQL)
    conns = [await asyncpg.connect(url) for _ in range(connections)]
    backends = [conn.get_server_pid() for conn in conns]
    done = 0
    try:
        client0, backend0 = time.process_time(), sum(map(cpu_seconds, backends))
        started = time.perf_counter()
        deadline = started + duration

        async def sender(conn: asyncpg.Connection, offset: int) -> None:
            nonlocal done
            k = offset
            while time.perf_counter() < deadline:
                stamp = format_stamp(datetime.now(UTC))
                await conn.execute(statement, identities[k % len(identities)], stamp)
                done += 1
                k += connections

        async with anyio.create_task_group() as tg:
            for offset, conn in enumerate(conns):
                tg.start_soon(sender, conn, offset)
        seconds = time.perf_counter() - started
        client = time.process_time() - client0
        backend = sum(map(cpu_seconds, backends)) - backend0
        return _Baseline(
            beats=done,
            seconds=seconds,
            client_cpu_us_per_beat=1e6 * client / max(done, 1),
            backend_cpu_us_per_beat=1e6 * backend / max(done, 1),
        )
    finally:
        for conn in conns:
            await conn.close()


async def _active_identities(url: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT worker_identity FROM worker_registrations WHERE status = 'active'"
        )
        return [str(r[0]) for r in rows]
    finally:
        await conn.close()


def run(quick: bool) -> list[Figure]:
    """Method: three host processes start together and beat for the same window; their
    acknowledged beats are summed. Then, on the same server and rows, the baseline commits
    every beat alone from 3 connections (one per supervisor), then from 24. Plan latency
    is the retirement plan (and the host-retirement plan for another host) each
    supervisor answers after its window."""
    bindir = find_pg_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL binaries (initdb, pg_ctl) not found")
    workers = 128 if quick else 256
    warmup, duration = (0.3, 0.7) if quick else (1.0, 4.0)
    plans = 3 if quick else 10
    load_at_start = os.getloadavg()[0]
    server = start_pg_server(bindir, durable=True)
    try:
        url = server.url()
        anyio.run(migrate_postgres, url)
        with short_tempdir("fsb-mh-") as work:
            procs, outs = [], []
            for host in _HOSTS:
                out = work / f"{host}.json"
                outs.append(out)
                argv = [sys.executable, "-m", "bench.multihost", "host", url, host, str(workers)]
                argv += [str(warmup), str(duration), str(plans), str(out)]
                procs.append(subprocess.Popen(argv, cwd=_ROOT))
            for proc in procs:
                if proc.wait(timeout=120) != 0:
                    raise RuntimeError(f"a host process exited with {proc.returncode}")
            hosts = [json.loads(out.read_text(encoding="utf-8")) for out in outs]
        identities = anyio.run(_active_identities, url)
        baselines = {
            n: anyio.run(_commit_per_beat, url, identities, n, duration)
            for n in _BASELINE_CONNECTIONS
        }
    finally:
        server.stop()
    combined = sum(h["acked"] / h["seconds"] for h in hosts)
    rates = {n: b.beats / b.seconds for n, b in baselines.items()}
    judged = not quick
    figures = [
        Figure(
            name="multihost.pg_3_supervisors_per_s",
            label="heartbeats/s into PostgreSQL, 3 supervisors (processes) together",
            value=combined,
            unit="/s",
            judged=judged,
            detail={
                "per_host_per_s": {h["host"]: h["acked"] / h["seconds"] for h in hosts},
                "host_cpu_us_per_beat": {h["host"]: h["host_cpu_us_per_beat"] for h in hosts},
                "backend_cpu_us_per_beat": {h["host"]: h["backend_cpu_us_per_beat"] for h in hosts},
                "load_average_at_start": load_at_start,
                "workers_per_host": workers,
                "window_seconds": duration,
                "fsync": "on",
                "cpus": os.cpu_count(),
            },
        ),
        Figure(
            name="multihost.pg_commit_per_beat_per_s",
            label="baseline: one commit per beat, 3 connections (1 per supervisor)",
            value=rates[3],
            unit="/s",
            judged=judged,
            detail={"rows": len(identities), **asdict(baselines[3])},
        ),
        Figure(
            name="multihost.pg_commit_per_beat_c24_per_s",
            label="baseline: one commit per beat, 24 connections",
            value=rates[24],
            unit="/s",
            judged=judged,
            detail=asdict(baselines[24]),
        ),
        Figure(
            name="multihost.pg_vs_commit_per_beat_ratio",
            label="3 supervisors / one commit per beat (3 connections), same server",
            value=combined / rates[3],
            unit="x",
            goal=10.0,
            op=">=",
            judged=judged,
        ),
        Figure(
            name="multihost.pg_vs_commit_per_beat_c24_ratio",
            label="3 supervisors / one commit per beat (24 connections), same server",
            value=combined / rates[24],
            unit="x",
            judged=judged,
        ),
    ]
    for h in hosts:
        figures.append(
            Figure(
                name=f"multihost.plan_p50_ms.{h['host']}",
                label=f"retirement plan p50 on {h['host']} ({len(identities)} rows shared)",
                value=statistics.median(h["plan_ms"]),
                unit="ms",
                judged=judged,
                detail={
                    "plan_p99_ms": percentile(h["plan_ms"], 99),
                    "host_plan_p50_ms": statistics.median(h["host_plan_ms"]),
                    "plans": len(h["plan_ms"]),
                },
            )
        )
    return figures


def _host_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.multihost host")
    parser.add_argument("url")
    parser.add_argument("host")
    parser.add_argument("workers", type=int)
    parser.add_argument("warmup", type=float)
    parser.add_argument("duration", type=float)
    parser.add_argument("plans", type=int)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    configure_logging("error")
    spec = _HostRun(
        url=args.url,
        host=args.host,
        workers=args.workers,
        warmup=args.warmup,
        duration=args.duration,
        plans=args.plans,
    )
    result = anyio.run(_host, spec)
    args.out.write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["host"]:
        raise SystemExit("usage: python -m bench.multihost host URL HOST WORKERS ...")
    raise SystemExit(_host_main(sys.argv[2:]))
