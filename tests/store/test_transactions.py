"""write() and savepoint(): commit, rollback, partial failure and cancellation."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from supervisor.errors import StoreError
from supervisor.store import Store, WriteTx
from supervisor.store.sqlite.store import SQLiteStore
from tests.store.rowdata import STAMP_1, STAMP_2, lease, raw_query, registration

pytestmark = pytest.mark.anyio


def as_store(store: SQLiteStore) -> Store:
    """Static check (mypy) that the SQLite store satisfies the engine-neutral protocol."""
    return store


async def identities(store: Store) -> list[str]:
    return [row["worker_identity"] for row in await store.read_registrations()]


async def test_sqlite_store_satisfies_the_protocol(store: SQLiteStore) -> None:
    generic = as_store(store)
    async with generic.write() as tx:
        checked: WriteTx = tx
        await checked.insert_registration(registration("w-1"))
    assert await identities(generic) == ["w-1"]


async def test_clean_exit_commits(store: SQLiteStore) -> None:
    async with store.write() as tx:
        await tx.insert_registration(registration("w-1"))
        await tx.upsert_lease(lease("l-1"))
        await tx.append_audit({"at": STAMP_1, "action": "register"})
        # Reads inside the transaction see its own writes; the read connection does not.
        assert [r["worker_identity"] for r in await tx.registrations()] == ["w-1"]
        assert await store.read_registrations() == []
    assert await identities(store) == ["w-1"]
    assert [r["lease_id"] for r in await store.read_leases()] == ["l-1"]
    assert [e["action"] for e in await store.read_audit()] == ["register"]


async def test_exception_rolls_back_everything_and_is_reraised(store: SQLiteStore) -> None:
    async with store.write() as tx:
        await tx.insert_registration(registration("w-keep"))

    class Boom(Exception):
        pass

    async def failing_batch() -> None:
        async with store.write() as tx:
            await tx.insert_registration(registration("w-1"))
            assert await tx.touch_heartbeats([("w-keep", STAMP_2)]) == 1
            await tx.upsert_lease(lease("l-1"))
            await tx.append_audit({"at": STAMP_1, "action": "register"})
            raise Boom

    with pytest.raises(Boom):
        await failing_batch()

    assert await identities(store) == ["w-keep"]
    assert (await store.read_registrations())[0]["last_heartbeat_at"] == STAMP_1
    assert await store.read_leases() == []
    assert await store.read_audit() == []
    # The connection is out of the failed transaction and takes new work.
    async with store.write() as tx:
        await tx.insert_registration(registration("w-2"))
    assert await identities(store) == ["w-2", "w-keep"]


async def test_failed_savepoint_undoes_only_its_own_writes(store: SQLiteStore) -> None:
    async def duplicate_message(tx: WriteTx) -> None:
        async with tx.savepoint():
            await tx.insert_registration(registration("w-2"))
            await tx.append_audit({"at": STAMP_1, "action": "doomed"})
            await tx.insert_registration(registration("w-1"))  # duplicate key

    async def buggy_handler(tx: WriteTx) -> None:
        async with tx.savepoint():
            await tx.insert_registration(registration("w-4"))
            raise ValueError("handler bug")

    async with store.write() as tx:
        await tx.insert_registration(registration("w-1"))
        with pytest.raises(StoreError):
            await duplicate_message(tx)
        async with tx.savepoint():
            await tx.insert_registration(registration("w-3"))
        with pytest.raises(ValueError, match="handler bug"):
            await buggy_handler(tx)
        await tx.append_audit({"at": STAMP_1, "action": "kept"})
    assert await identities(store) == ["w-1", "w-3"]
    assert [e["action"] for e in await store.read_audit()] == ["kept"]


async def test_nested_savepoints_are_independent(store: SQLiteStore) -> None:
    async def inner(tx: WriteTx) -> None:
        async with tx.savepoint():
            await tx.insert_registration(registration("inner"))
            raise RuntimeError

    async with store.write() as tx, tx.savepoint():
        await tx.insert_registration(registration("outer"))
        with pytest.raises(RuntimeError):
            await inner(tx)
        await tx.insert_registration(registration("after-inner"))
    assert await identities(store) == ["after-inner", "outer"]


async def test_unknown_column_raises_and_writes_nothing(store: SQLiteStore) -> None:
    async with store.write() as tx:
        await tx.insert_registration(registration("w-ok"))
        with pytest.raises(StoreError, match="bogus"):
            await tx.insert_registration({**registration("w-bad"), "bogus": 1})
    assert await identities(store) == ["w-ok"]


async def test_transaction_object_is_dead_after_exit(store: SQLiteStore) -> None:
    async with store.write() as tx:
        pass
    with pytest.raises(StoreError, match="finished"):
        await tx.insert_registration(registration("late"))


async def test_cancel_after_body_finished_still_commits(store: SQLiteStore) -> None:
    with anyio.CancelScope() as scope:
        async with store.write() as tx:
            await tx.insert_registration(registration("w-1"))
            scope.cancel()  # the body has no further checkpoint: commit is shielded
    assert scope.cancel_called
    assert await identities(store) == ["w-1"]
    async with store.write() as tx:  # the write connection is not left inside a transaction
        await tx.insert_registration(registration("w-2"))
    assert await identities(store) == ["w-1", "w-2"]


async def test_cancel_while_commit_is_in_flight_leaves_a_consistent_db(
    store: SQLiteStore,
) -> None:
    body_done = anyio.Event()
    beats = [(f"w-{i}", STAMP_2) for i in range(500)]

    async def writer() -> None:
        async with store.write() as tx:
            for worker, _ in beats[:50]:
                await tx.insert_registration(registration(worker))
            await tx.touch_heartbeats(beats)
            body_done.set()  # no checkpoint until __aexit__ awaits the COMMIT

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        await body_done.wait()
        tg.cancel_scope.cancel()  # lands while the writer awaits its shielded COMMIT

    rows = await store.read_registrations()
    assert len(rows) == 50
    assert {row["last_heartbeat_at"] for row in rows} == {STAMP_2}
    async with store.write() as tx:
        await tx.insert_registration(registration("after"))
    assert len(await store.read_registrations()) == 51


async def test_cancel_inside_body_rolls_back(store: SQLiteStore) -> None:
    with anyio.CancelScope() as scope:
        async with store.write() as tx:
            await tx.insert_registration(registration("w-1"))
            scope.cancel()
            await anyio.lowlevel.checkpoint()  # Cancelled is raised inside the body
            await tx.insert_registration(registration("never"))
    assert scope.cancelled_caught
    assert await store.read_registrations() == []
    async with store.write() as tx:
        await tx.insert_registration(registration("w-2"))
    assert await identities(store) == ["w-2"]


async def test_cancelled_before_begin_runs_no_body(store: SQLiteStore) -> None:
    ran = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        async with store.write() as tx:
            ran = True
            await tx.insert_registration(registration("w-1"))
    assert not ran
    assert await store.read_registrations() == []


async def test_sqlite_level_abort_is_reported_not_autocommitted(
    store: SQLiteStore, db_path: Path
) -> None:
    """If SQLite discards the transaction itself, later writes must not autocommit."""

    async def engine_abort_then_write() -> None:
        async with store.write() as tx:
            await tx.insert_registration(registration("w-1"))
            # Simulate an engine-side abort (as after SQLITE_FULL / IOERR).
            await store._writer.execute("ROLLBACK")
            await tx.insert_registration(registration("w-2"))

    async def engine_abort_then_commit() -> None:
        async with store.write():
            await store._writer.execute("ROLLBACK")

    with pytest.raises(StoreError, match="rolled back by SQLite"):
        await engine_abort_then_write()
    assert await store.read_registrations() == []
    with pytest.raises(StoreError, match="nothing was committed"):
        await engine_abort_then_commit()
    assert raw_query(db_path, "SELECT COUNT(*) FROM worker_registrations") == [(0,)]
