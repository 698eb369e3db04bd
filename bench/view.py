"""``python -m bench.view``: read_registry_view at 10k active + 100k historical rows (SQLite)."""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from bench.fixtures import history_rows, make_db, mixed_kind, registration_row
from bench.processes import short_tempdir
from supervisor.store import rows as rowmap
from supervisor.store.base import CommitChain
from supervisor.store.schema.tables import REGISTRATION_COLUMNS
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.store.sqlite.store import SQLiteStore
from supervisor.store.stamps import format_stamp

__all__ = ["main"]

_FULL_READ = (
    f"SELECT {', '.join(REGISTRATION_COLUMNS)} FROM worker_registrations "
    "WHERE status = 'active' ORDER BY worker_identity"
)


def _rows(active: int, history: int, *, shuffled: bool) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    rows = [
        registration_row(
            i,
            kind=mixed_kind(i),
            now=now,
            host_id="h",
            boot_id="b",
            pid=100_000 + i,
            start_time=f"t{i}",
        )
        for i in range(active)
    ]
    pids = list(range(100_000, 100_000 + active))
    rows += history_rows(history, now=now, host_id="h", boot_id="b", pids=pids)
    if shuffled:
        # Active rows spread over the whole table, as years of churn would leave them.
        random.Random(1).shuffle(rows)
    return rows


async def _ms(call: Callable[[], Awaitable[Any]]) -> float:
    began = time.perf_counter()
    await call()
    return (time.perf_counter() - began) * 1000


async def _restamp(store: SQLiteStore, identities: list[str], step: int) -> None:
    """Beat every ``step``-th row through the store's own heartbeat path."""
    stamp = format_stamp(datetime.now(UTC) + timedelta(seconds=step))
    beats = [(identity, stamp) for identity in identities[::step]]
    for start in range(0, len(beats), 256):
        if not await store.submit_heartbeats(beats[start : start + 256], CommitChain()):
            raise RuntimeError("a bench beat matched no active row")


async def _measure(path: Path, reps: int) -> dict[str, Any]:
    store = await open_sqlite_store(path)
    try:
        out: dict[str, Any] = {"first_ms": await _ms(store.read_registry_view)}
        view = await store.read_registry_view()
        identities = [str(row["worker_identity"]) for row in view.active]
        repeat = [await _ms(store.read_registry_view) for _ in range(reps)]
        out["repeat_median_ms"], out["repeat_min_ms"] = statistics.median(repeat), min(repeat)
        for name, step in (("restamp_1pct", 100), ("restamp_50pct", 2)):
            samples = []
            for _ in range(reps):
                await _restamp(store, identities, step)
                samples.append(await _ms(store.read_registry_view))
            out[f"{name}_median_ms"] = statistics.median(samples)
        samples = []
        conn = sqlite3.connect(path)
        try:
            for rep in range(reps):
                # 1% of the rows change a logged column (a hand-run edit, as a migration would).
                with conn:
                    conn.executemany(
                        "UPDATE worker_registrations SET live_revision = ? "
                        "WHERE worker_identity = ?",
                        [(f"r{rep}", identity) for identity in identities[::100]],
                    )
                samples.append(await _ms(store.read_registry_view))
            out["relogged_1pct_median_ms"] = statistics.median(samples)
            began = time.perf_counter()
            rowmap.as_dicts(REGISTRATION_COLUMNS, conn.execute(_FULL_READ).fetchall())
            out["baseline_full_read_ms"] = (time.perf_counter() - began) * 1000
        finally:
            conn.close()
        out["active"] = len(identities)
        return out
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.view", description=__doc__)
    parser.add_argument("--active", type=int, default=10_000)
    parser.add_argument("--history", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--shuffled", action="store_true", help="active rows spread out")
    args = parser.parse_args()
    with short_tempdir("fsb-view-") as work:
        db = work / "registry.sqlite3"
        anyio.run(make_db, db, _rows(args.active, args.history, shuffled=args.shuffled))
        print(json.dumps(anyio.run(_measure, db, args.reps), indent=2))


if __name__ == "__main__":
    main()
