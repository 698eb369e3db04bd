"""SQLite store: WAL database, one write connection, one read connection, versioned migrations."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Collection, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import anyio.lowlevel
import anyio.to_thread

from supervisor.errors import StoreError
from supervisor.store import rows as rowmap
from supervisor.store import sql
from supervisor.store.base import ActiveChanges, CommitChain, RegistryView, Row, close_connections
from supervisor.store.dialect import SQLITE
from supervisor.store.history_cache import HistoryCache, scope_digests
from supervisor.store.host_leases import host_lease_rows, select_host_leases
from supervisor.store.observed_servers import observed_rows, select_observed_servers
from supervisor.store.portable_reads import PortableReads
from supervisor.store.schema.tables import (
    REGISTRATION_COLUMNS,
)
from supervisor.store.sqlite.active import ActiveCache
from supervisor.store.sqlite.active_jobs import active_job, compact_active_job
from supervisor.store.sqlite.beats import stamp_and_commit
from supervisor.store.sqlite.connection import (
    fetch_in_chunks,
    fetch_job,
    submit,
)
from supervisor.store.sqlite.history import (
    compact_job,
    history_call,
    history_page_job,
    scope_job,
    view_job,
)
from supervisor.store.sqlite.tx import (
    SQLiteWriteTx,
    begin_immediate,
    commit,
    fetchall,
    rollback,
)
from supervisor.store.stamp_journal import StampJournal

__all__ = ["SQLiteStore"]


class SQLiteStore(PortableReads):
    """The SQLite implementation of ``supervisor.store.base.Store``.

    Writes go through one connection in autocommit mode (``isolation_level=None``): the
    store itself issues BEGIN IMMEDIATE / COMMIT / ROLLBACK, so no driver-level
    implicit transaction can interleave. Reads for snapshots use a second,
    ``query_only`` connection; under WAL it sees the last committed state and never
    blocks, nor is blocked by, the writer.
    """

    dialect: str = SQLITE.name
    sql_dialect = SQLITE

    def __init__(
        self,
        *,
        path: Path,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
        applied_migrations: tuple[int, ...],
    ) -> None:
        self.path = path
        # Versions this open() applied; empty when the database was already current.
        self.applied_migrations = applied_migrations
        self._writer = writer
        self._reader = reader
        # Several tasks may hold a reference to the store; transactions on the one
        # write connection must not interleave (a second BEGIN inside the first fails).
        self._write_lock = anyio.Lock()
        self._closed = False
        self._history = HistoryCache()
        # Filled by the writer's heartbeat batches, folded by the reader's active cache.
        self._stamps = StampJournal()
        self._active = ActiveCache(self._stamps)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store for {self.path} is closed")

    async def _read(self, statement: str, params: tuple[Any, ...]) -> list[Any]:
        self._check_open()
        return await fetchall(self._reader, statement, params)

    async def read_registrations(self, *, status: str | None = None) -> list[Row]:
        if status == "active":
            # The same rows in the same order as the SELECT below, from the view's cache.
            self._check_open()
            job = partial(active_job, cache=self._active)
            return await fetch_job(submit(self._reader, job))
        statement = sql.select_registrations(SQLITE, by_status=status is not None, id_count=None)
        rows = await self._read(statement, (status,) if status is not None else ())
        return rowmap.as_dicts(REGISTRATION_COLUMNS, rows)

    async def read_registry_view(self) -> RegistryView:
        self._check_open()
        job = partial(view_job, since=self._history.through, read_active=self._active.refresh)
        active, base, changes = await history_call(submit(self._reader, job))
        return RegistryView(active=active, history=self._history.advance(base, changes))

    async def read_active_changes(self, cursor: int) -> ActiveChanges:
        self._check_open()
        read = partial(self._active.changes, cursor=cursor)
        job = partial(view_job, since=self._history.through, read_active=read)
        (taken, rows, complete), base, changes = await history_call(submit(self._reader, job))
        history = self._history.advance(base, changes)
        return ActiveChanges(cursor=taken, rows=rows, complete=complete, history=history)

    async def read_history_scope(self, keys: Collection[tuple[str, str]]) -> list[bytes]:
        self._check_open()
        base, changes, found = await history_call(
            submit(self._reader, partial(scope_job, since=self._history.through, keys=set(keys)))
        )
        self._history.advance(base, changes)
        return scope_digests(found)

    async def read_history(
        self, *, after: str | None = None, limit: int = 100, needle: str | None = None
    ) -> list[Row]:
        self._check_open()
        return await history_call(
            submit(
                self._reader,
                partial(history_page_job, after=after, limit=max(0, limit), needle=needle),
            )
        )

    async def read_active_processes(self) -> list[tuple[str, Any, Any, Any]]:
        # Plain tuples of four columns: a sweep of a large fleet must not pay for
        # thirty-odd columns and a dict per row on the event loop.
        self._check_open()
        return await fetch_in_chunks(
            self._reader, sql.select_active_processes(SQLITE), convert=_process_tuple
        )

    async def read_host_leases(self) -> list[Row]:
        return host_lease_rows(await self._read(select_host_leases(one=False), ()))

    async def read_observed_servers(self, host_id: str, *, live_only: bool = True) -> list[Row]:
        statement = select_observed_servers(live_only=live_only)
        return observed_rows(await self._read(statement, (host_id,)))

    @asynccontextmanager
    async def write(self, *, durable: bool = True) -> AsyncIterator[SQLiteWriteTx]:
        """One BEGIN IMMEDIATE transaction; commit on clean exit, rollback on exception.
        A ``durable`` commit is flushed to disk before it returns (see ``begin_immediate``)."""
        async with self._write_lock:
            self._check_open()
            await begin_immediate(self._writer, durable=durable)
            tx = SQLiteWriteTx(self._writer, self._history)
            try:
                # A caller cancelled while waiting for the lock should not run its body.
                await anyio.lowlevel.checkpoint_if_cancelled()
                yield tx
            except BaseException:
                tx.finish()
                await rollback(self._writer)
                raise
            tx.finish()
            through = await self._compact_history()
            folded = await self._compact_active()
            await commit(self._writer)
            if folded is not None:
                self._active.compacted = folded
            if through is not None:
                self._history.compacted_through = through

    async def _compact_history(self) -> int | None:
        """Write the cached fold into the digest row (inside the open write transaction).

        Only changes a reader has already folded are compacted, so this costs a
        statement or two and no hashing; the log stays short without the writer
        ever folding on its own.
        """
        cache = self._history
        if cache.fold is None or cache.through <= cache.compacted_through:
            return None
        summary, through = cache.fold.summary(), cache.through
        await history_call(
            submit(self._writer, partial(compact_job, summary=summary, through=through))
        )
        return through

    async def _compact_active(self) -> int | None:
        """Drop the active-row log entries the cache has folded (inside the open write
        transaction), so the log stays as short as the changes between two views."""
        folded = self._active.position
        if folded <= max(self._active.compacted, 0):
            return None
        await history_call(submit(self._writer, partial(compact_active_job, through=folded)))
        return folded

    def submit_heartbeats(
        self, beats: Sequence[tuple[str, str]], chain: CommitChain
    ) -> Awaitable[bool]:
        """See ``Store.submit_heartbeats``: one thread hop for BEGIN, the batch and COMMIT."""
        self._check_open()
        job = partial(stamp_and_commit, beats=list(beats), chain=chain, journal=self._stamps)
        return submit(self._writer, job)

    async def close(self) -> None:
        """Close both connections, even if one of them fails to close."""
        if self._closed:
            return
        self._closed = True
        await close_connections((self._reader, self._writer), f"the store for {self.path}")


def _process_tuple(r: Sequence[Any]) -> tuple[str, Any, Any, Any]:
    return (str(r[0]), r[1], r[2], r[3])
