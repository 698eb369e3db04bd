"""Opening a PostgreSQL store: migrations under an advisory lock, then the two connections."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel

from supervisor.errors import StoreError
from supervisor.store import sql
from supervisor.store.base import opened
from supervisor.store.dialect import POSTGRESQL
from supervisor.store.migrations import run_migrations
from supervisor.store.postgres.connection import PgConnection, connect
from supervisor.store.postgres.store import PostgresStore
from supervisor.store.schema.tables import (
    CURRENT_VERSION,
    SCHEMA_MIGRATIONS_DDL,
    Migration,
)
from supervisor.store.stamps import format_stamp

__all__ = [
    "REGISTRY_FILLFACTOR",
    "migrate_postgres",
    "open_postgres_store",
    "postgres_schema_version",
    "postgres_store",
]

#: Advisory lock key serializing migrations of supervisors that start together.
_MIGRATION_LOCK = 0x666C656574  # "fleet"

#: Percent of each registry page filled by inserts. Every heartbeat writes a new version
#: of its row; with room left on the row's page that is a HOT update (no index entry in
#: any of the table's six indexes, about one WAL record). Packed pages (the default 100)
#: made most stamps non-HOT: 6-8 WAL records per beat and three times the server CPU.
REGISTRY_FILLFACTOR = 50

_RELOPTIONS = "SELECT reloptions FROM pg_class WHERE oid = to_regclass('worker_registrations')"


async def postgres_schema_version(conn: PgConnection) -> int:
    """Highest applied migration version (0 for an empty database)."""
    found = await conn.fetch("SELECT to_regclass('schema_migrations') IS NOT NULL")
    if not found or not found[0][0]:
        return 0
    rows = await conn.fetch("SELECT MAX(version) FROM schema_migrations")
    value = rows[0][0]
    return int(value) if value is not None else 0


class _PgMigrationConn:
    """The PostgreSQL side of ``schema.MigrationConn``, on the migrating connection."""

    dialect = POSTGRESQL

    def __init__(self, conn: PgConnection) -> None:
        self._conn = conn

    async def query(self, statement: str, params: Sequence[Any] = ()) -> list[Sequence[Any]]:
        return list(await self._conn.fetch(POSTGRESQL.render(statement), params))

    async def run(self, statement: str, params: Sequence[Any] = ()) -> None:
        await self._conn.execute(POSTGRESQL.render(statement), params)

    async def table_columns(self, table: str) -> list[str]:
        found = await self._conn.fetch(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
            (table,),
        )
        return [str(row[0]) for row in found]


async def _apply(conn: PgConnection, migration: Migration) -> bool:
    """One migration in its own transaction; False if another supervisor already did it."""
    with anyio.CancelScope(shield=True):
        await conn.command("BEGIN")
        try:
            # Serializes supervisors that start at the same moment; released at COMMIT.
            await conn.fetch("SELECT pg_advisory_xact_lock($1)", (_MIGRATION_LOCK,))
            await conn.command(SCHEMA_MIGRATIONS_DDL)
            done = await conn.fetch(
                "SELECT 1 FROM schema_migrations WHERE version = $1", (migration.version,)
            )
            if not done:
                for statement in migration.statements:
                    await conn.command(POSTGRESQL.render(statement))
                if migration.hook is not None:
                    await migration.hook(_PgMigrationConn(conn))
                # Bookkeeping time, not protocol time.
                applied_at = format_stamp(datetime.now(UTC))
                await conn.execute(
                    sql.record_migration(POSTGRESQL),
                    (migration.version, migration.description, applied_at),
                )
        except BaseException:
            await conn.rollback_or_discard()
            raise
        await conn.command("COMMIT")
    return not done


async def _migrate_connection(conn: PgConnection, target_version: int) -> tuple[int, ...]:
    if not 0 <= target_version <= CURRENT_VERSION:
        raise StoreError(f"target_version must be in 0..{CURRENT_VERSION}, got {target_version}")
    applied = await run_migrations(
        await postgres_schema_version(conn), target_version, partial(_apply, conn)
    )
    await _leave_room_for_heartbeats(conn)
    return applied


async def _leave_room_for_heartbeats(conn: PgConnection) -> None:
    """Give the registry table ``REGISTRY_FILLFACTOR`` unless it has a fillfactor already.

    A storage parameter, not schema: no version of its own, and a value an operator set
    is kept. It shapes pages written from now on (new rows, non-HOT updates); existing
    packed pages gain room as their rows move. ``ALTER TABLE ... SET`` takes a lock that
    reads and writes do not wait for, so a supervisor starting beside busy ones is fine.
    """
    found = await conn.fetch(_RELOPTIONS)
    if not found:
        return  # not created yet (a migration target below version 1)
    options = found[0][0] or []
    if any(str(option).startswith("fillfactor=") for option in options):
        return
    await conn.command(f"ALTER TABLE worker_registrations SET (fillfactor = {REGISTRY_FILLFACTOR})")


async def migrate_postgres(
    url: str, target_version: int = CURRENT_VERSION, *, connect_timeout: float = 10.0
) -> tuple[int, ...]:
    """Bring the database at ``url`` up to ``target_version``; return the versions applied."""
    conn = await connect(url, connect_timeout=connect_timeout)
    try:
        return await _migrate_connection(conn, target_version)
    finally:
        await conn.close()


async def open_postgres_store(url: str, *, connect_timeout: float = 10.0) -> PostgresStore:
    """Connect, migrate, and return the store; the caller must ``close()`` it."""
    writer = await connect(url, connect_timeout=connect_timeout)
    try:
        applied = await _migrate_connection(writer, CURRENT_VERSION)
        reader = await connect(url, connect_timeout=connect_timeout, read_only=True)
    except BaseException:
        await writer.close()
        raise
    return PostgresStore(
        url=url,
        writer=writer,
        reader=reader,
        applied_migrations=applied,
        connect_timeout=connect_timeout,
    )


def postgres_store(
    url: str, *, connect_timeout: float = 10.0
) -> AbstractAsyncContextManager[PostgresStore]:
    """``async with postgres_store(url) as store:`` — open, migrate, and always close."""
    return opened(partial(open_postgres_store, url, connect_timeout=connect_timeout))
