"""The PostgreSQL history log: upgrade seed, out-of-order commits and compaction across hosts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import asyncpg
import pytest

from supervisor.policy.retirement.fingerprints import (
    history_summary,
    identity_keys,
    is_history,
    row_digest,
)
from supervisor.store.base import CommitChain
from supervisor.store.postgres.open import migrate_postgres, open_postgres_store
from supervisor.store.postgres.store import PostgresStore
from supervisor.store.schema.tables import CURRENT_VERSION, REGISTRATION_COLUMNS
from tests.store.rowdata import STAMP_2, STAMP_3, registration

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _stores(url: str, count: int) -> AsyncIterator[list[PostgresStore]]:
    """``count`` stores on one database: supervisors of different hosts."""
    opened = [await open_postgres_store(url) for _ in range(count)]
    for store in opened:
        store.history.compact_every = 1
    try:
        yield opened
    finally:
        for store in opened:
            await store.close()


async def _agrees(store: PostgresStore) -> int:
    """Assert every history read of ``store`` equals a full read; the history count."""
    everything = await store.read_registrations()
    view = await store.read_registry_view()
    assert view.history == history_summary(everything)
    keys = {key for row in everything for key in identity_keys(row)}
    want = sorted(row_digest(r) for r in everything if is_history(r) and identity_keys(r) & keys)
    assert sorted(await store.read_history_scope(keys)) == want
    return view.history.count


async def _log_length(store: PostgresStore) -> int:
    (found,) = await store.read("SELECT count(*) FROM registry_history_changes")
    return int(found[0])


async def _retire(store: PostgresStore, identity: str) -> None:
    async with store.write() as tx:
        (row,) = await tx.registrations(worker_identities=[identity])
        assert await tx.retire_guarded(row, retired_at=STAMP_2, retired_by="t", reason="r")


async def test_a_v8_database_is_seeded_from_its_rows_at_v9(pg_url: str) -> None:
    await migrate_postgres(pg_url, target_version=8)
    conn = await asyncpg.connect(pg_url)
    try:
        marks = ", ".join(f"${i}" for i in range(1, len(REGISTRATION_COLUMNS) + 1))
        statement = (
            f"INSERT INTO worker_registrations ({', '.join(REGISTRATION_COLUMNS)}) VALUES ({marks})"
        )
        for index, status in enumerate(("active", "retired", "released", "active")):
            row = registration(f"wrk-{index}", status=status, pid=300 + index)
            await conn.execute(statement, *(row.get(c) for c in REGISTRATION_COLUMNS))
        # A v8 change to history that no trigger logged.
        await conn.execute(
            "UPDATE worker_registrations SET pid = 9 WHERE worker_identity = 'wrk-1'"
        )
    finally:
        await conn.close()
    async with _stores(pg_url, 1) as (store,):
        assert store.applied_migrations == tuple(range(9, CURRENT_VERSION + 1))
        assert await _agrees(store) == 2
        await _retire(store, "wrk-0")
        assert await _agrees(store) == 3


async def test_a_change_committed_after_a_later_one_is_folded(pg_url: str) -> None:
    async with _stores(pg_url, 2) as (a, b):
        await _agrees(b)
        async with a.write() as tx:
            # Takes the lower change id, and commits last.
            await tx.insert_registration(registration("wrk-a", status="retired", pid=1))
            async with b.write() as other:
                await other.insert_registration(registration("wrk-b", status="retired", pid=2))
            assert await _agrees(b) == 1
            async with b.write() as other:  # compacts what b folded, never a's change
                await other.insert_registration(registration("wrk-c", pid=3))
            assert await _agrees(b) == 1
            assert await b.read_history_scope({("worker_identity", "wrk-a")}) == []
        assert await _agrees(b) == 2
        assert await _agrees(a) == 2
        (digest,) = await b.read_history_scope({("worker_identity", "wrk-a")})
        assert digest == row_digest((await a.read_registrations())[0])


async def test_a_store_behind_another_hosts_compaction_starts_from_the_digest(
    pg_url: str,
) -> None:
    async with _stores(pg_url, 2) as (a, b):
        async with a.write() as tx:
            for index in range(4):
                await tx.insert_registration(registration(f"wrk-{index}", pid=10 + index))
        await _retire(a, "wrk-0")
        assert await _agrees(b) == 1  # b's cache: wrk-0's scope, at this horizon
        await _retire(a, "wrk-1")
        assert await _agrees(a) == 2
        await _retire(a, "wrk-2")  # a compacts past b's horizon first
        assert b.history.cache.through < a.history.cache.compacted_through
        assert await _log_length(a) < 3
        assert await _agrees(b) == 3
        assert await _agrees(a) == 3


async def test_heartbeats_log_nothing_and_truncate_empties_history(pg_url: str) -> None:
    async with _stores(pg_url, 1) as (store,):
        async with store.write() as tx:
            await tx.insert_registration(registration("wrk-1", pid=1))
            await tx.insert_registration(registration("wrk-2", pid=2, status="retired"))
        before = await _log_length(store)
        assert await store.submit_heartbeats([("wrk-1", STAMP_3)], CommitChain())
        assert await _log_length(store) == before
        conn = await asyncpg.connect(store._dsn)
        try:
            await conn.execute("TRUNCATE worker_registrations")
        finally:
            await conn.close()
        assert await _agrees(store) == 0


async def test_hosts_writing_at_once_agree_with_a_full_read(pg_url: str) -> None:
    async with _stores(pg_url, 2) as stores:

        async def host(store: PostgresStore, name: str) -> None:
            for index in range(12):
                identity = f"{name}-{index}"
                async with store.write() as tx:
                    await tx.insert_registration(
                        registration(identity, pid=index, session_id=f"sess-{index % 4}")
                    )
                if index % 2:
                    await _retire(store, identity)
                if index % 3 == 0:
                    await store.read_registry_view()
                    await store.read_history_scope({("session_id", f"sess-{index % 4}")})

        async with anyio.create_task_group() as group:
            for number, store in enumerate(stores):
                group.start_soon(host, store, f"h{number}")
        counts: list[Any] = [await _agrees(store) for store in stores]
        assert counts == [12, 12]
