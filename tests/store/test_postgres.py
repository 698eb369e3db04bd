"""Only on PostgreSQL: several supervisors on one database, row locks, aborted transactions."""

from __future__ import annotations

import anyio
import asyncpg
import pytest

from supervisor.errors import StoreError
from supervisor.store import CURRENT_VERSION
from supervisor.store.base import CommitChain
from supervisor.store.postgres.open import (
    REGISTRY_FILLFACTOR,
    migrate_postgres,
    open_postgres_store,
    postgres_store,
)
from supervisor.store.postgres.store import PostgresStore
from tests.store.rowdata import STAMP_1, STAMP_2, STAMP_3, registration

pytestmark = pytest.mark.anyio

RETIRE = {"retired_at": STAMP_3, "retired_by": "host-b", "reason": "host_lease_expired"}


async def _waiting_on_a_lock(url: str) -> int:
    """Backends of this database blocked on a row lock right now."""
    conn = await asyncpg.connect(url)
    try:
        value = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(value)
    finally:
        await conn.close()


async def _until_blocked(url: str) -> None:
    # Synchronizes on the server's own view of the waiter, not on elapsed time; there
    # is no event to wait for, the waiter is inside another connection's statement.
    while await _waiting_on_a_lock(url) == 0:  # noqa: ASYNC110
        await anyio.sleep(0.01)


async def test_supervisors_starting_together_migrate_once(pg_url: str) -> None:
    opened: list[PostgresStore] = []

    async def open_one() -> None:
        opened.append(await open_postgres_store(pg_url))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(open_one)
    try:
        applied = sorted(v for s in opened for v in s.applied_migrations)
        # Each version applied by exactly one of them, whoever won the advisory lock.
        assert applied == list(range(1, CURRENT_VERSION + 1))
    finally:
        for store in opened:
            await store.close()


async def test_a_newer_schema_is_refused(pg_url: str) -> None:
    await migrate_postgres(pg_url)
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute(
            "INSERT INTO schema_migrations (version, description, applied_at) "
            "VALUES ($1, 'from the future', $2)",
            CURRENT_VERSION + 1,
            STAMP_1,
        )
    finally:
        await conn.close()
    with pytest.raises(StoreError, match="newer than this supervisor"):
        await open_postgres_store(pg_url)


async def test_a_heartbeat_from_another_host_waits_for_a_locking_read_and_then_misses(
    pg_url: str,
) -> None:
    async with postgres_store(pg_url) as host_a, postgres_store(pg_url) as host_b:
        async with host_a.write() as tx:
            await tx.insert_registration(registration("w-1", last_heartbeat_at=STAMP_1))
        beat: list[bool] = []

        async def beat_from_a() -> None:
            beat.append(await host_a.submit_heartbeats([("w-1", STAMP_2)], CommitChain()))

        async with anyio.create_task_group() as tg, host_b.write() as tx:
            (row,) = await tx.registrations(worker_identities=["w-1"])
            tg.start_soon(beat_from_a)
            await _until_blocked(pg_url)
            # Host B retires what it read while host A's beat waits on the row lock.
            assert await tx.retire_guarded(row, **RETIRE) is True
        # The beat ran after the retirement committed: it matched no active row and
        # wrote nothing, so its caller judges it from the table.
        assert beat == [False]
        (stored,) = await host_a.read_registrations()
        assert (stored["status"], stored["last_heartbeat_at"]) == ("retired", STAMP_1)


async def test_a_retirement_waiting_on_a_heartbeat_sees_the_new_stamp_and_refuses(
    pg_url: str,
) -> None:
    async with postgres_store(pg_url) as host_a, postgres_store(pg_url) as host_b:
        async with host_a.write() as tx:
            await tx.insert_registration(registration("w-1", last_heartbeat_at=STAMP_1))
        (planned,) = await host_b.read_registrations()
        outcome: list[bool] = []

        async def retire_from_b() -> None:
            async with host_b.write() as tx:
                outcome.append(await tx.retire_guarded(planned, **RETIRE))

        async with anyio.create_task_group() as tg, host_a.write() as tx:
            assert await tx.touch_heartbeats([("w-1", STAMP_2)]) == 1
            tg.start_soon(retire_from_b)
            await _until_blocked(pg_url)
        # The guarded UPDATE re-checked the committed row: the worker beat, so no swap.
        assert outcome == [False]
        (stored,) = await host_a.read_registrations()
        assert (stored["status"], stored["last_heartbeat_at"]) == ("active", STAMP_2)


async def test_a_swallowed_statement_failure_is_never_reported_as_committed(
    pg_url: str,
) -> None:
    async with postgres_store(pg_url) as store:
        async with store.write() as tx:
            await tx.insert_registration(registration("w-1"))

        async def swallow_a_failure() -> None:
            async with store.write() as tx:
                await tx.insert_registration(registration("w-2"))
                with pytest.raises(StoreError, match=r"(?i)unique"):
                    await tx.insert_registration(registration("w-1"))

        with pytest.raises(StoreError, match="rolled back by PostgreSQL"):
            await swallow_a_failure()
        assert [r["worker_identity"] for r in await store.read_registrations()] == ["w-1"]


async def test_a_store_reconnects_between_transactions_after_the_server_drops_it(
    pg_url: str,
) -> None:
    async with postgres_store(pg_url) as store:
        async with store.write() as tx:
            await tx.insert_registration(registration("w-1"))
        admin = await asyncpg.connect(pg_url)
        try:
            # What a server restart or failover does to every session.
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        finally:
            await admin.close()
        # The transaction in flight when the link broke fails (or, if the loss was
        # already seen, runs on a new connection); nothing is retried behind its back.
        try:
            async with store.write() as tx:
                await tx.insert_registration(registration("w-2"))
        except StoreError:
            pass
        async with store.write() as tx:
            await tx.insert_registration(registration("w-3"))
        assert await store.submit_heartbeats([("w-3", STAMP_2)], CommitChain()) is True
        identities = {r["worker_identity"] for r in await store.read_registrations()}
        assert {"w-1", "w-3"} <= identities <= {"w-1", "w-2", "w-3"}
        assert store.reconnects >= 1


async def test_the_snapshot_connection_cannot_write(pg_url: str) -> None:
    async with postgres_store(pg_url) as store:
        async with store.write() as tx:
            await tx.insert_registration(registration("w-1"))
        with pytest.raises(StoreError, match="read-only"):
            await store.read("UPDATE worker_registrations SET status = 'retired'")
        assert [r["status"] for r in await store.read_registrations()] == ["active"]


async def _registry_options(url: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        value = await conn.fetchval(
            "SELECT reloptions FROM pg_class WHERE oid = to_regclass('worker_registrations')"
        )
        return list(value or [])
    finally:
        await conn.close()


async def test_the_registry_leaves_room_on_each_page_for_heartbeat_updates(pg_url: str) -> None:
    async with postgres_store(pg_url):
        pass
    assert await _registry_options(pg_url) == [f"fillfactor={REGISTRY_FILLFACTOR}"]


async def test_a_fillfactor_the_operator_chose_is_kept(pg_url: str) -> None:
    await migrate_postgres(pg_url)
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute("ALTER TABLE worker_registrations SET (fillfactor = 80)")
    finally:
        await conn.close()
    async with postgres_store(pg_url):
        pass
    assert await _registry_options(pg_url) == ["fillfactor=80"]


async def test_a_partial_migration_has_no_registry_to_tune(pg_url: str) -> None:
    assert await migrate_postgres(pg_url, target_version=0) == ()
    assert await _registry_options(pg_url) == []


@pytest.mark.parametrize("plans", ["force_custom_plan", "force_generic_plan"])
async def test_a_job_is_one_statement_that_fails_whole_when_a_row_is_not_active(
    pg_url: str, plans: str
) -> None:
    # Either kind of plan: the check must fail when run, never when planned.
    async with postgres_store(f"{pg_url}&plan_cache_mode={plans}") as store:
        async with store.write() as tx:
            for identity in ("w-1", "w-2"):
                await tx.insert_registration(registration(identity, last_heartbeat_at=STAMP_1))
            await tx.insert_registration(registration("gone", status="released"))
        for _ in range(8):
            assert await store.submit_heartbeats([("w-1", STAMP_2)], CommitChain()) is True
        chain = CommitChain()
        spoiled = [("gone", STAMP_3), ("w-1", STAMP_3), ("w-2", STAMP_3)]
        assert await store.submit_heartbeats(spoiled, chain) is False
        assert chain.broken
        stamps = {
            r["worker_identity"]: r["last_heartbeat_at"] for r in await store.read_registrations()
        }
        assert stamps == {"w-1": STAMP_2, "w-2": STAMP_1, "gone": STAMP_1}
        # Nothing left open on the write connection: the next job and transaction run.
        assert await store.submit_heartbeats([("w-2", STAMP_3)], CommitChain()) is True
        async with store.write() as tx:
            assert await tx.touch_heartbeats([("w-1", STAMP_3)]) == 1
