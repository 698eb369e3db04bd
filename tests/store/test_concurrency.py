"""Two stores on one file: readers are never blocked, BEGIN IMMEDIATE serializes writers."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from supervisor.errors import StoreError
from supervisor.store.sqlite.open import sqlite_store
from supervisor.store.sqlite.store import SQLiteStore
from tests.store.rowdata import registration

pytestmark = pytest.mark.anyio


async def test_second_store_reads_committed_state_while_first_writes(
    store: SQLiteStore, db_path: Path
) -> None:
    async with store.write() as tx:
        await tx.insert_registration(registration("w-1"))
    async with store.write() as tx:
        await tx.insert_registration(registration("w-2"))
        # Opening needs no write lock when the schema is current, and reads under WAL
        # see the last commit, not the pending insert.
        async with sqlite_store(db_path) as other:
            assert other.applied_migrations == ()
            assert [r["worker_identity"] for r in await other.read_registrations()] == ["w-1"]
    async with sqlite_store(db_path) as other:
        assert len(await other.read_registrations()) == 2


async def test_second_writer_gives_up_after_busy_timeout(store: SQLiteStore, db_path: Path) -> None:
    async with sqlite_store(db_path, busy_timeout_ms=50) as other:
        async with store.write() as tx:
            await tx.insert_registration(registration("w-1"))
            with pytest.raises(StoreError, match="locked"):
                async with other.write() as other_tx:
                    await other_tx.insert_registration(registration("w-other"))
        # The refused writer holds no half-open transaction and works once the lock is free.
        async with other.write() as other_tx:
            await other_tx.insert_registration(registration("w-2"))
        assert [r["worker_identity"] for r in await other.read_registrations()] == ["w-1", "w-2"]


async def test_second_writer_waits_for_the_first_to_commit(
    store: SQLiteStore, db_path: Path
) -> None:
    async with sqlite_store(db_path, busy_timeout_ms=10_000) as other:
        seen_by_second: list[str] = []
        second_started = anyio.Event()

        async def second_writer() -> None:
            second_started.set()
            async with other.write() as tx:
                # BEGIN IMMEDIATE only returns once the first writer committed.
                seen_by_second.extend(r["worker_identity"] for r in await tx.registrations())
                await tx.insert_registration(registration("w-second"))

        async with anyio.create_task_group() as tg, store.write() as tx:
            await tx.insert_registration(registration("w-first"))
            tg.start_soon(second_writer)
            await second_started.wait()
            # Give the second BEGIN time to reach SQLite's busy wait; correctness of
            # the assertions below does not depend on this delay, only coverage does.
            await anyio.sleep(0.05)
        assert seen_by_second == ["w-first"]
    assert [r["worker_identity"] for r in await store.read_registrations()] == [
        "w-first",
        "w-second",
    ]
