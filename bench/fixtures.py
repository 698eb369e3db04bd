"""Shared benchmark set-up: registry rows, databases, profiles and the loop-stall meter."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import anyio

from bench.processes import Sleepers, free_pids
from supervisor.clock import MonotonicWall, SystemClock
from supervisor.daemon.app import AppSettings, Supervisor, running_supervisor
from supervisor.policy.control.permissions import OP_READ, OP_RETIRE, Profile
from supervisor.policy.evidence import PidEvidence
from supervisor.policy.identity.instance import mint_instance_id
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import Store
from supervisor.store.schema.tables import REGISTRATION_COLUMNS
from supervisor.store.sqlite.open import migrate
from supervisor.system.probes import LocalProbes, ProbeBackend

__all__ = [
    "READER",
    "REPO",
    "RETIRER",
    "RowKind",
    "StallMeter",
    "StaticProfiles",
    "history_rows",
    "host_rows",
    "insert_rows",
    "live_rows",
    "local_supervisor",
    "make_db",
    "mixed_fleet",
    "mixed_kind",
    "registration_row",
    "sleeper_fleet",
    "sqlite_connect",
    "wait_until",
]

REPO = "/srv/repos/bench-fleet"
_MINT_AT = datetime(2026, 1, 1, tzinfo=UTC)

RowKind = Literal["live", "stale", "legacy"]

READER = Profile(
    name="bench-reader", role_kind="controller", allowed_operations=frozenset({OP_READ})
)
RETIRER = Profile(
    name="bench-retirer",
    role_kind="reconciler",
    allowed_operations=frozenset({OP_READ, OP_RETIRE}),
)


class StaticProfiles:
    """A ProfileLookup over the two bench profiles."""

    def get(self, name: str) -> Profile | None:
        return {p.name: p for p in (READER, RETIRER)}.get(name)


def local_supervisor(
    store: Store, settings: AppSettings | None = None, *, probes: ProbeBackend | None = None
) -> AbstractAsyncContextManager[Supervisor]:
    """Every actor as the daemon runs them: the real clock, this machine's probes."""
    return running_supervisor(
        store=store,
        clock=MonotonicWall(SystemClock()),
        probes=probes or LocalProbes(),
        profiles=StaticProfiles(),
        settings=settings,
    )


# --- rows -------------------------------------------------------------------------------


def mixed_kind(index: int) -> RowKind:
    """Half live, 35% stale (retirement candidates), 15% legacy rows without fencing data."""
    slot = index % 20
    if slot < 10:
        return "live"
    if slot < 17:
        return "stale"
    return "legacy"


def registration_row(
    index: int,
    *,
    kind: RowKind,
    now: datetime,
    host_id: str | None,
    boot_id: str | None,
    pid: int,
    start_time: str | None,
    ttl: float = 30.0,
) -> dict[str, Any]:
    """One ``worker_registrations`` row; its own trusted instance id so no slot is shared."""
    legacy = kind == "legacy"
    last = now - (timedelta(seconds=1) if kind == "live" else timedelta(hours=1))
    instance = f"pid-{pid}" if legacy else mint_instance_id("codex", now=_MINT_AT, nonce=str(index))
    return {
        "worker_identity": f"wkr-bench-{index:08d}",
        "client_name": "codex",
        "client_instance_id": instance,
        "session_id": f"sess-bench-{index}",
        "generation_id": f"gen-bench-{index}",
        "role": "author",
        "profile": "prgs-author",
        "namespace": "author",
        "repository_binding": REPO,
        "pid": pid,
        "process_identity": f"{host_id}:{pid}:{start_time}",
        "transport": "stdio",
        "started_at": format_stamp(now - timedelta(hours=2)),
        "last_heartbeat_at": format_stamp(last),
        "heartbeat_ttl_seconds": ttl,
        "fencing_epoch": 1,
        "status": "active",
        "instance_id_provenance": "legacy_incomplete" if legacy else "trusted_launcher",
        "host_id": None if legacy else host_id,
        "boot_id": None if legacy else boot_id,
        "process_start_time": None if legacy else start_time,
    }


def history_rows(
    count: int, *, now: datetime, host_id: str | None, boot_id: str | None, pids: Sequence[int]
) -> list[dict[str, Any]]:
    """``count`` terminal rows of earlier launches (released, superseded, retired in turn).

    Each has its own identity, instance and session. One in ten reuses a pid
    number from ``pids`` (cycling), as a host reuses them, so rows sharing a pid
    with a current row exist and the plan's scope lookup has real history to read;
    the rest carry numbers no current row has.
    """
    statuses = ("released", "superseded", "retired")
    rows = []
    for index in range(count):
        pid = pids[(index // 10) % len(pids)] if index % 10 == 0 else 5_000_000 + index
        row = registration_row(
            10_000_000 + index,
            kind="stale",
            now=now - timedelta(days=1),
            host_id=host_id,
            boot_id=boot_id,
            pid=pid,
            start_time=f"ticks-old-{index}",
        )
        row["status"] = statuses[index % 3]
        rows.append(row)
    return rows


def live_rows(count: int, *, first_pid: int) -> list[dict[str, Any]]:
    """``count`` live rows on the bench's synthetic host, pids from ``first_pid`` (never
    probed: for benchmarks that only write)."""
    now = datetime.now(UTC)
    return [
        registration_row(
            i,
            kind="live",
            now=now,
            host_id="host-bench",
            boot_id="boot-bench",
            pid=first_pid + i,
            start_time=f"ticks-{i}",
        )
        for i in range(count)
    ]


def mixed_fleet(
    count: int,
    *,
    now: datetime,
    host_id: str | None,
    boot_id: str | None,
    first_pid: int = 100_000,
) -> tuple[list[dict[str, Any]], dict[int, PidEvidence]]:
    """``count`` rows of :func:`mixed_kind` and evidence to match (live alive, others dead)."""
    rows: list[dict[str, Any]] = []
    evidence: dict[int, PidEvidence] = {}
    for index in range(count):
        kind = mixed_kind(index)
        pid = first_pid + index
        start = f"ticks-{pid}"
        row = registration_row(
            index,
            kind=kind,
            now=now,
            host_id=host_id,
            boot_id=boot_id,
            pid=pid,
            start_time=start,
        )
        # Shaped as the store returns rows: every column, NULL ones as None.
        rows.append({column: row.get(column) for column in REGISTRATION_COLUMNS})
        alive = kind == "live"
        evidence[pid] = PidEvidence(alive=alive, start_time=start if alive else None)
    return rows, evidence


def sleeper_fleet(
    count: int,
    sleepers: Sleepers,
    dead_pids: Sequence[int],
    *,
    now: datetime,
    host_id: str | None,
    boot_id: str | None,
) -> list[dict[str, Any]]:
    """``count`` rows of :func:`mixed_kind` whose probes are real: live rows name the
    ``sleepers`` (their pids and start times), the others
    ``dead_pids`` (numbers no process can hold)."""
    dead = iter(dead_pids)
    rows = []
    for index in range(count):
        kind = mixed_kind(index)
        if kind == "live":
            slot = index % len(sleepers.pids)
            pid, start = sleepers.pids[slot], sleepers.start_times[slot]
        else:
            pid, start = next(dead), f"ticks-{index}"
        row = registration_row(
            index, kind=kind, now=now, host_id=host_id, boot_id=boot_id, pid=pid, start_time=start
        )
        rows.append(row)
    return rows


# --- databases --------------------------------------------------------------------------


def sqlite_connect(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection with the store's pragmas (WAL, synchronous=NORMAL)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def insert_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Bulk-insert registrations in one transaction (the database must be migrated)."""
    columns = ", ".join(REGISTRATION_COLUMNS)
    marks = ", ".join("?" for _ in REGISTRATION_COLUMNS)
    conn = sqlite_connect(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            f"INSERT INTO worker_registrations ({columns}) VALUES ({marks})",
            [tuple(row.get(c) for c in REGISTRATION_COLUMNS) for row in rows],
        )
        conn.execute("COMMIT")
        # Leave a self-contained file behind (no WAL to carry along when it is copied).
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


async def make_db(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """A migrated registry database at ``path`` holding ``rows``."""
    await migrate(path)
    await anyio.to_thread.run_sync(insert_rows, path, rows)


async def wait_until(predicate: Callable[[], Awaitable[bool]], *, limit: float, what: str) -> None:
    """Poll ``predicate`` every 10 ms until it holds; RuntimeError after ``limit`` seconds."""
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        if await predicate():
            return
        await anyio.sleep(0.01)
    if not await predicate():
        raise RuntimeError(f"{what} did not happen within {limit}s")


# --- event-loop stall meter ---------------------------------------------------------------


class StallMeter:
    """A task that sleeps 1 ms at a time and records the longest gap between its wake-ups."""

    def __init__(self, tick: float = 0.001) -> None:
        self.tick = tick
        self.longest = 0.0
        self.gaps = 0
        self._running = True

    def reset(self) -> None:
        self.longest = 0.0
        self.gaps = 0

    def stop(self) -> None:
        self._running = False

    async def run(self) -> None:
        last = time.perf_counter()
        while self._running:
            await anyio.sleep(self.tick)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            self.gaps += 1
            last = now


def host_rows(count: int, sleepers: Sleepers | None) -> list[dict[str, Any]]:
    """Fresh active rows on this host; with sleepers, every row names one of them (alive),
    else a pid no process can hold (dead)."""
    probes = LocalProbes()
    now = datetime.now(UTC)
    dead = free_pids(count) if sleepers is None else []
    rows = []
    for index in range(count):
        if sleepers is not None:
            slot = index % len(sleepers.pids)
            pid, start = sleepers.pids[slot], sleepers.start_times[slot]
        else:
            pid, start = dead[index], f"ticks-{index}"
        rows.append(
            registration_row(
                index,
                kind="live",
                now=now,
                host_id=probes.host_id(),
                boot_id=probes.boot_id(),
                pid=pid,
                start_time=start,
            )
        )
    return rows
