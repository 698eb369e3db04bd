"""Opening a SQLite store: connections with the store's pragmas, migrations, write checks."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import anyio.lowlevel
import anyio.to_thread

from supervisor.errors import StoreError, StoreUnwritable
from supervisor.store import sql
from supervisor.store.base import opened
from supervisor.store.dialect import SQLITE
from supervisor.store.history_cache import HistoryCache
from supervisor.store.migrations import run_migrations
from supervisor.store.schema.tables import (
    CURRENT_VERSION,
    SCHEMA_MIGRATIONS_DDL,
    Migration,
)
from supervisor.store.sqlite.connection import (
    check_submit_support,
    close_quietly,
    submit,
)
from supervisor.store.sqlite.history import (
    compact_job,
    history_call,
    summary_job,
)
from supervisor.store.sqlite.store import SQLiteStore
from supervisor.store.sqlite.tx import (
    begin_immediate,
    commit,
    execute,
    fetchall,
    rollback,
)
from supervisor.store.stamps import format_stamp

__all__ = ["fold_history_at_open", "migrate", "open_sqlite_store", "schema_version", "sqlite_store"]


async def fold_history_at_open(writer: aiosqlite.Connection, cache: HistoryCache) -> None:
    """Fold the change log once at open, so the first plan does not pay for it.

    The read needs no lock; the write lock is taken only when there is something
    to compact (a current schema with nothing pending opens without it).
    """
    base, changes = await history_call(submit(writer, partial(summary_job, since=-1)))
    summary = cache.advance(base, changes)
    if cache.through <= base[3]:
        cache.compacted_through = cache.through
        return
    await begin_immediate(writer)
    try:
        job = partial(compact_job, summary=summary, through=cache.through)
        await history_call(submit(writer, job))
    except BaseException:
        await rollback(writer)
        raise
    await commit(writer)
    cache.compacted_through = cache.through


async def _connect(path: Path, busy_timeout_ms: int, *, read_only: bool) -> aiosqlite.Connection:
    """Open one connection with the store's pragmas; never leaks it on failure."""
    pending = aiosqlite.connect(path, isolation_level=None)
    try:
        conn = await pending
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            await _join_failed_connect(pending)
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"cannot open SQLite database {path}: {exc}") from exc
        raise
    try:
        # busy_timeout first: the journal_mode switch itself may need to wait for a lock.
        await execute(conn, f"PRAGMA busy_timeout = {busy_timeout_ms:d}")
        if read_only:
            # Defence in depth: the read connection is for snapshots only.
            await execute(conn, "PRAGMA query_only = ON")
        else:
            mode = await fetchall(conn, "PRAGMA journal_mode = WAL")
            if not mode or str(mode[0][0]).lower() != "wal":
                # Without WAL the read connection would block the writer and vice versa.
                raise StoreError(f"cannot enable WAL on {path} (journal_mode={mode!r})")
            # FULL until a transaction says otherwise (``begin_immediate``): every commit
            # flushed before it is acknowledged, but for heartbeat stamps' (NORMAL: an
            # OS crash can lose the last of them, never corrupt the file).
            await execute(conn, "PRAGMA synchronous = FULL")
        await execute(conn, "PRAGMA foreign_keys = ON")
    except BaseException:
        with anyio.CancelScope(shield=True):
            await close_quietly(conn)
        raise
    return conn


async def _join_failed_connect(pending: aiosqlite.Connection) -> None:
    """Wait for the worker thread of a connection that failed to open.

    On a failed connect aiosqlite queues its own shutdown but does not wait for it; the
    thread then reports to the event loop later, and if that loop has closed meanwhile
    it dies with "Event loop is closed". Joining here (off the loop, bounded) keeps the
    failure contained in this call. ``_thread`` is aiosqlite-internal, hence getattr.
    """
    thread = getattr(pending, "_thread", None)
    if isinstance(thread, threading.Thread) and thread.is_alive():
        await anyio.to_thread.run_sync(thread.join, 5.0)


def _check_busy_timeout(busy_timeout_ms: int) -> None:
    # Formatted into a PRAGMA (pragmas take no parameters), so only a plain int may pass.
    if type(busy_timeout_ms) is not int or busy_timeout_ms < 0:
        raise StoreError(f"busy_timeout_ms must be a non-negative int, got {busy_timeout_ms!r}")


async def schema_version(conn: aiosqlite.Connection) -> int:
    """Highest applied migration version (0 for an empty database)."""
    found = await fetchall(
        conn, "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    )
    if not found:
        return 0
    rows = await fetchall(conn, "SELECT MAX(version) FROM schema_migrations")
    value = rows[0][0]
    return int(value) if value is not None else 0


class _MigrationConn:
    """The SQLite side of ``schema.MigrationConn``, on the migrating connection."""

    dialect = SQLITE

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def query(self, statement: str, params: Sequence[Any] = ()) -> list[Sequence[Any]]:
        return await fetchall(self._conn, SQLITE.render(statement), params)

    async def run(self, statement: str, params: Sequence[Any] = ()) -> None:
        await execute(self._conn, SQLITE.render(statement), params)

    async def table_columns(self, table: str) -> list[str]:
        found = await fetchall(self._conn, "SELECT name FROM pragma_table_info(?1)", (table,))
        return [str(row[0]) for row in found]


async def _apply(conn: aiosqlite.Connection, migration: Migration) -> bool:
    """Apply one migration in its own transaction; False if someone else already did."""
    await begin_immediate(conn)
    try:
        await execute(conn, SCHEMA_MIGRATIONS_DDL)
        # Re-check under the write lock: another process opening the same file may
        # have applied this version between our version read and our BEGIN.
        done = await fetchall(
            conn, "SELECT 1 FROM schema_migrations WHERE version = ?1", (migration.version,)
        )
        if not done:
            for statement in migration.statements:
                await execute(conn, SQLITE.render(statement))
            if migration.hook is not None:
                await migration.hook(_MigrationConn(conn))
            # Bookkeeping time, not protocol time: no Clock is involved in migrations.
            applied_at = format_stamp(datetime.now(UTC))
            await execute(
                conn,
                sql.record_migration(SQLITE),
                (migration.version, migration.description, applied_at),
            )
    except BaseException:
        await rollback(conn)
        raise
    await commit(conn)
    return not done


async def _migrate_connection(conn: aiosqlite.Connection, target_version: int) -> tuple[int, ...]:
    if not 0 <= target_version <= CURRENT_VERSION:
        # Checked before reading the version, so a bad target never touches the file.
        raise StoreError(f"target_version must be in 0..{CURRENT_VERSION}, got {target_version}")
    return await run_migrations(await schema_version(conn), target_version, partial(_apply, conn))


async def migrate(
    path: str | Path, target_version: int = CURRENT_VERSION, *, busy_timeout_ms: int = 5000
) -> tuple[int, ...]:
    """Bring the database at ``path`` up to ``target_version``; return the versions applied.

    Never downgrades: a database already at or past the target is left alone.
    """
    _check_busy_timeout(busy_timeout_ms)
    conn = await _connect(Path(path), busy_timeout_ms, read_only=False)
    try:
        return await _migrate_connection(conn, target_version)
    finally:
        with anyio.CancelScope(shield=True):
            await close_quietly(conn)


async def open_sqlite_store(path: str | Path, *, busy_timeout_ms: int = 5000) -> SQLiteStore:
    """Open (creating if needed) and migrate the database; the caller must ``close()`` it."""
    _check_busy_timeout(busy_timeout_ms)
    db_path = Path(path)
    _check_writable(db_path)
    try:
        writer = await _connect(db_path, busy_timeout_ms, read_only=False)
        try:
            check_submit_support(writer)
            applied = await _migrate_connection(writer, CURRENT_VERSION)
            # Opened after migrating so it never caches a pre-migration schema.
            reader = await _connect(db_path, busy_timeout_ms, read_only=True)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await close_quietly(writer)
            raise
    except StoreError as exc:
        cause = exc.__cause__
        # A missing directory is a different mistake, and its error says so already.
        if (
            isinstance(cause, sqlite3.Error)
            and cause.sqlite_errorcode & 0xFF in _UNWRITABLE
            and db_path.parent.is_dir()
        ):
            raise StoreUnwritable(_unwritable_detail(db_path, str(cause))) from exc
        raise
    store = SQLiteStore(path=db_path, writer=writer, reader=reader, applied_migrations=applied)
    try:
        await fold_history_at_open(writer, store._history)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await store.close()
        raise
    return store


#: SQLite's primary result codes for a file that cannot be written or created here.
_UNWRITABLE = frozenset({sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM})


def _check_writable(path: Path) -> None:
    """Refuse at start-up, not at the first heartbeat, a database this process cannot
    write: SQLite opens a read-only file without complaint and fails every write later.

    Asked of the OS rather than by a write, so opening still takes no write lock.
    The directory matters too: SQLite creates the ``-wal`` and ``-shm`` files there.
    """
    if str(path) == ":memory:" or not path.parent.is_dir():
        return  # nothing on disk, or a missing directory the connect reports itself
    problem = None
    if path.exists():
        try:
            os.close(os.open(path, os.O_RDWR))
        except OSError as exc:
            problem = f"the file cannot be opened for writing ({exc.strerror or exc})"
    if problem is None and not os.access(path.parent, os.W_OK | os.X_OK):
        problem = "its directory is not writable"
    if problem is not None:
        raise StoreUnwritable(_unwritable_detail(path, problem))


def _unwritable_detail(path: Path, problem: str) -> str:
    return (
        f"registry database {path} cannot be written: {problem}; the supervisor needs "
        f"write access to the file and to its directory {path.parent}, where SQLite "
        f"keeps {path.name}-wal and {path.name}-shm"
    )


def sqlite_store(
    path: str | Path, *, busy_timeout_ms: int = 5000
) -> AbstractAsyncContextManager[SQLiteStore]:
    """``async with sqlite_store(path) as store:`` — open, migrate, and always close."""
    return opened(partial(open_sqlite_store, path, busy_timeout_ms=busy_timeout_ms))
