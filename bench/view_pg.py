"""``python -m bench.view_pg``: history reads at 10k active + 100k historical rows on PostgreSQL."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import asyncpg

from bench.view import _rows
from supervisor.policy.retirement.fingerprints import identity_keys
from supervisor.store.base import CommitChain
from supervisor.store.postgres.connection import coercer
from supervisor.store.postgres.open import open_postgres_store
from supervisor.store.postgres.store import PostgresStore
from supervisor.store.postgres.tx import PG_COLUMN_TYPES
from supervisor.store.schema.tables import REGISTRATION_COLUMNS
from supervisor.store.stamps import format_stamp
from tests.pg_server import find_pg_bindir, start_pg_server

__all__ = ["main"]


async def _load(url: str, rows: list[dict[str, Any]]) -> None:
    """COPY the rows in (row triggers fire for COPY too, so the history log is fed)."""
    convert = [coercer(PG_COLUMN_TYPES.get(c, "text")) for c in REGISTRATION_COLUMNS]
    records = [
        tuple(f(row.get(c)) for f, c in zip(convert, REGISTRATION_COLUMNS, strict=True))
        for row in rows
    ]
    conn = await asyncpg.connect(url)
    try:
        await conn.copy_records_to_table(
            "worker_registrations", records=records, columns=list(REGISTRATION_COLUMNS)
        )
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def _ms(call: Callable[[], Awaitable[Any]]) -> float:
    began = time.perf_counter()
    await call()
    return (time.perf_counter() - began) * 1000


async def _median(call: Callable[[], Awaitable[Any]], reps: int) -> float:
    return statistics.median([await _ms(call) for _ in range(reps)])


async def _measure(url: str, rows: list[dict[str, Any]], reps: int) -> dict[str, Any]:
    # Open (migrate) first, then load: the rows arrive as a running registry's would.
    store: PostgresStore = await open_postgres_store(url)
    try:
        began = time.perf_counter()
        await _load(url, rows)
        out: dict[str, Any] = {"load_s": round(time.perf_counter() - began, 1)}
        out["first_view_ms"] = await _ms(store.read_registry_view)
        view = await store.read_registry_view()
        out["active"], out["history"] = len(view.active), view.history.count
        out["view_median_ms"] = await _median(store.read_registry_view, reps)
        # The floor: the active rows alone, no history at all.
        active_only = await _median(lambda: store.read_registrations(status="active"), reps)
        out["active_rows_only_median_ms"] = active_only
        identities = [str(row["worker_identity"]) for row in view.active]
        stamp = format_stamp(datetime.now(UTC) + timedelta(seconds=5))
        beats = [(identity, stamp) for identity in identities[::100]]
        assert await store.submit_heartbeats(beats, CommitChain())
        out["view_after_1pct_beats_ms"] = await _ms(store.read_registry_view)
        async with store.write() as tx:
            (row,) = await tx.registrations(worker_identities=[identities[0]])
            await tx.retire_guarded(row, retired_at=stamp, retired_by="bench", reason="bench")
        out["view_after_a_retirement_ms"] = await _ms(store.read_registry_view)
        keys = {key for row in view.active[1:51] for key in identity_keys(row)}
        out["scope_50_rows_first_ms"] = await _ms(lambda: store.read_history_scope(keys))
        out["scope_50_rows_again_ms"] = await _median(lambda: store.read_history_scope(keys), reps)
        out["history_page_100_ms"] = await _median(lambda: store.read_history(limit=100), reps)
        # A restart: what the first view's fold left in the digest row is not folded again.
        await store.close()
        store = await open_postgres_store(url)
        out["first_view_after_reopen_ms"] = await _ms(store.read_registry_view)
        return out
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.view_pg", description=__doc__)
    parser.add_argument("--active", type=int, default=10_000)
    parser.add_argument("--history", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    bindir = find_pg_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries (initdb, pg_ctl) not found")
    server = start_pg_server(bindir)
    try:
        rows = _rows(args.active, args.history, shuffled=True)
        print(json.dumps(anyio.run(_measure, server.url(), rows, args.reps), indent=2))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
