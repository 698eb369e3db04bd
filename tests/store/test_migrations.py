"""Schema migrations: fresh databases, in-place upgrade of a v1 registry, idempotent reopen."""

from __future__ import annotations

import gc
import sqlite3
import warnings
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

from supervisor.errors import StoreError
from supervisor.store import CURRENT_VERSION, REGISTRATION_COLUMNS
from supervisor.store.schema.tables import MIGRATIONS, V1_REGISTRATION_COLUMNS
from supervisor.store.sqlite.open import migrate, open_sqlite_store, sqlite_store
from tests.store.rowdata import raw_query, registration

pytestmark = pytest.mark.anyio

NEW_IN_V2 = tuple(c for c in REGISTRATION_COLUMNS if c not in V1_REGISTRATION_COLUMNS)


def table_columns(path: Path, table: str) -> list[str]:
    return [row[1] for row in raw_query(path, f"PRAGMA table_info({table})")]


def tables(path: Path) -> set[str]:
    return {row[0] for row in raw_query(path, "SELECT name FROM sqlite_master WHERE type='table'")}


def v1_rows() -> list[dict[str, Any]]:
    """Several legacy rows with distinct values, including NULLs, ints and non-round floats."""
    rows = []
    for i, status in enumerate(("active", "released", "superseded", "active")):
        full = registration(f"legacy-{i}", status=status, pid=1000 + i, fencing_epoch=2**40 + i)
        row = {c: full[c] for c in V1_REGISTRATION_COLUMNS}
        row["heartbeat_ttl_seconds"] = 0.1 * (i + 1)
        rows.append(row)
    rows[3]["session_id"] = None
    rows[3]["live_revision"] = None
    return rows


def insert_raw(path: Path, rows: list[dict[str, Any]]) -> None:
    columns = list(rows[0])
    statement = (
        f"INSERT INTO worker_registrations ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})"
    )
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executemany(statement, [tuple(r[c] for c in columns) for r in rows])


def test_current_version_is_last_migration() -> None:
    assert CURRENT_VERSION == 11
    assert [m.version for m in MIGRATIONS] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert len(set(REGISTRATION_COLUMNS)) == len(REGISTRATION_COLUMNS)


async def test_fresh_database_migrates_to_current_and_records_each_step(db_path: Path) -> None:
    async with sqlite_store(db_path) as store:
        assert store.applied_migrations == (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
        assert store.dialect == "sqlite"
    ledger = raw_query(db_path, "SELECT version, description, applied_at FROM schema_migrations")
    assert [row[0] for row in ledger] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert all(row[1] and row[2] for row in ledger)
    assert {"worker_registrations", "leases", "audit_events", "schema_migrations"} <= tables(
        db_path
    )
    assert table_columns(db_path, "worker_registrations") == list(REGISTRATION_COLUMNS)


async def test_migrate_to_v1_builds_only_the_previous_schema(db_path: Path) -> None:
    assert await migrate(db_path, 1) == (1,)
    assert table_columns(db_path, "worker_registrations") == list(V1_REGISTRATION_COLUMNS)
    assert "leases" not in tables(db_path)
    assert "audit_events" not in tables(db_path)
    indexes = {
        row[0]
        for row in raw_query(
            db_path, "SELECT name FROM sqlite_master WHERE type='index' AND name LIKE 'idx_%'"
        )
    }
    assert indexes == {
        "idx_worker_registrations_status",
        "idx_worker_registrations_client_instance_id",
        "idx_worker_registrations_session_id",
    }
    assert await migrate(db_path, 1) == ()


async def test_v1_database_upgrades_in_place_keeping_every_row(db_path: Path) -> None:
    await migrate(db_path, 1)
    legacy = v1_rows()
    insert_raw(db_path, legacy)

    async with sqlite_store(db_path) as store:
        assert store.applied_migrations == (2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
        upgraded = await store.read_registrations()

    assert len(upgraded) == len(legacy)
    by_id = {row["worker_identity"]: row for row in upgraded}
    for old in legacy:
        new = by_id[old["worker_identity"]]
        for column, value in old.items():
            assert new[column] == value, column
            assert type(new[column]) is type(value), column
        assert all(new[column] is None for column in NEW_IN_V2)
    assert table_columns(db_path, "worker_registrations") == list(REGISTRATION_COLUMNS)
    versions = [r[0] for r in raw_query(db_path, "SELECT version FROM schema_migrations")]
    assert versions == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]


async def test_reopening_an_up_to_date_database_runs_nothing(db_path: Path) -> None:
    async with sqlite_store(db_path):
        pass
    before = raw_query(db_path, "SELECT * FROM schema_migrations ORDER BY version")
    async with sqlite_store(db_path) as store:
        assert store.applied_migrations == ()
    assert await migrate(db_path) == ()
    assert raw_query(db_path, "SELECT * FROM schema_migrations ORDER BY version") == before


async def test_wal_mode_is_on(db_path: Path) -> None:
    async with sqlite_store(db_path):
        assert raw_query(db_path, "PRAGMA journal_mode") == [("wal",)]


async def test_newer_schema_is_refused_and_nothing_leaks(db_path: Path) -> None:
    async with sqlite_store(db_path):
        pass
    raw_query(db_path, "INSERT INTO schema_migrations VALUES (99, 'future', NULL)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(StoreError, match="newer"):
            await open_sqlite_store(db_path)
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


@pytest.mark.parametrize("target", [-1, CURRENT_VERSION + 1])
async def test_migrate_rejects_unknown_target(db_path: Path, target: int) -> None:
    with pytest.raises(StoreError, match="target_version"):
        await migrate(db_path, target)


async def test_unopenable_path_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        await open_sqlite_store(tmp_path / "missing-dir" / "registry.db")


async def test_bad_busy_timeout_is_refused(db_path: Path) -> None:
    with pytest.raises(StoreError, match="busy_timeout_ms"):
        await open_sqlite_store(db_path, busy_timeout_ms=-1)
    assert not await anyio.Path(db_path).exists()


async def test_close_releases_both_connections_and_is_idempotent(db_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = await open_sqlite_store(db_path)
        await store.close()
        await store.close()
        del store
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


async def test_closed_store_refuses_use(db_path: Path) -> None:
    store = await open_sqlite_store(db_path)
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.read_registrations()
    with pytest.raises(StoreError, match="closed"):
        async with store.write():
            pass
