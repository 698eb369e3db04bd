"""PostgreSQL store (asyncpg): one write connection, one read connection, versioned migrations."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from supervisor.errors import StoreError
from supervisor.store import rows as rowmap
from supervisor.store import sql
from supervisor.store.base import (
    ActiveChanges,
    CommitChain,
    RegistryView,
    Row,
    close_connections,
    row_key,
)
from supervisor.store.dialect import POSTGRESQL
from supervisor.store.host_leases import host_lease_rows, select_host_leases
from supervisor.store.observed_servers import observed_rows, select_observed_servers
from supervisor.store.portable_reads import PortableReads
from supervisor.store.postgres.beats import stamp_and_commit
from supervisor.store.postgres.connection import PgConnection, connect, redact_url, to_dollar_params
from supervisor.store.postgres.history import PgHistory, history_page
from supervisor.store.postgres.tx import PostgresWriteTx
from supervisor.store.schema.tables import (
    REGISTRATION_COLUMNS,
)

__all__ = ["PostgresStore"]

_T = TypeVar("_T")

_SELECT_ACTIVE = sql.select_registrations(POSTGRESQL, by_status=True, id_count=None)


class PostgresStore(PortableReads):
    """The PostgreSQL implementation of ``supervisor.store.base.Store``.

    Several supervisors (one per host) share the database; inside each, the registry
    writer actor is still the only writer, on ``_writer``. Write transactions run at
    READ COMMITTED and lock what they read (``SELECT ... FOR UPDATE``); the guarded
    ``UPDATE ... WHERE`` of every compare-and-swap re-checks the newest committed row,
    so a write of another host between read and write makes the swap fail, never
    succeed on stale data. Snapshots read on ``_reader`` (committed state only).
    """

    dialect: str = POSTGRESQL.name
    sql_dialect = POSTGRESQL

    def __init__(
        self,
        *,
        url: str,
        writer: PgConnection,
        reader: PgConnection,
        applied_migrations: tuple[int, ...],
        connect_timeout: float = 10.0,
    ) -> None:
        self.url = redact_url(url)
        self._dsn = url
        self._connect_timeout = connect_timeout
        #: Connections opened again after the server closed one (restart, failover).
        self.reconnects = 0
        self.applied_migrations = applied_migrations
        self._writer = writer
        self._reader = reader
        # asyncpg refuses overlapping operations on one connection.
        self._write_lock = anyio.Lock()
        self._read_lock = anyio.Lock()
        self._in_write = False
        self._last_job: asyncio.Future[bool] | None = None
        self._closed = False
        #: This store's fold of the shared history change log (postgres_history.py).
        self.history = PgHistory()

    def writer_backend_pid(self) -> int:
        """The server process serving the write connection (benchmarks read its CPU)."""
        return int(self._writer.raw.get_server_pid())

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store for {self.url} is closed")

    async def _fresh(self, conn: PgConnection) -> PgConnection:
        """``conn``, or a new connection if the server closed it (between transactions
        only, so nothing half-done is ever carried over to the new one)."""
        if not conn.raw.is_closed():
            return conn
        replacement = await connect(
            self._dsn, connect_timeout=self._connect_timeout, read_only=conn.read_only
        )
        self.reconnects += 1
        return replacement

    async def _read(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._check_open()
        async with self._read_lock:
            self._reader = await self._fresh(self._reader)
            return await self._reader.fetch(statement, params)

    async def read_registrations(self, *, status: str | None = None) -> list[Row]:
        statement = sql.select_registrations(
            POSTGRESQL, by_status=status is not None, id_count=None
        )
        rows = await self._read(statement, (status,) if status is not None else ())
        return rowmap.as_dicts(REGISTRATION_COLUMNS, rows)

    async def _snapshot(self, job: Callable[[PgConnection], Awaitable[_T]]) -> _T:
        """``job`` in one REPEATABLE READ read-only transaction on the read connection:
        every statement it runs sees the same committed state, whatever other hosts
        commit meanwhile."""
        self._check_open()
        async with self._read_lock:
            self._reader = await self._fresh(self._reader)
            conn = self._reader
            with anyio.CancelScope(shield=True):
                await conn.command("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                value = await job(conn)
            finally:
                # Nothing was written: ROLLBACK just ends the snapshot.
                with anyio.CancelScope(shield=True):
                    await conn.rollback_or_discard()
            return value

    async def read_registry_view(self) -> RegistryView:
        async def job(conn: PgConnection) -> RegistryView:
            active = await conn.fetch(_SELECT_ACTIVE, ("active",))
            history = await self.history.summary(conn)
            return RegistryView(rowmap.as_dicts(REGISTRATION_COLUMNS, active), history)

        return await self._snapshot(job)

    async def read_active_changes(self, cursor: int) -> ActiveChanges:
        # No kept view to say what changed: every take starts over (one full read).
        view = await self.read_registry_view()
        return ActiveChanges(
            cursor=cursor + 1,
            rows={row_key(index, row): row for index, row in enumerate(view.active)},
            complete=True,
            history=view.history,
        )

    async def read_history_scope(self, keys: Collection[tuple[str, str]]) -> list[bytes]:
        return await self._snapshot(partial(self.history.scope, keys=list(set(keys))))

    async def read_history(
        self, *, after: str | None = None, limit: int = 100, needle: str | None = None
    ) -> list[Row]:
        return await self._snapshot(
            partial(history_page, after=after, limit=max(0, limit), needle=needle)
        )

    async def read_active_processes(self) -> list[tuple[str, Any, Any, Any]]:
        rows = await self._read(sql.select_active_processes(POSTGRESQL))
        return [(str(r[0]), r[1], r[2], r[3]) for r in rows]

    async def read_host_leases(self) -> list[Row]:
        statement = to_dollar_params(select_host_leases(one=False))
        return host_lease_rows(await self._read(statement))

    async def read_observed_servers(self, host_id: str, *, live_only: bool = True) -> list[Row]:
        statement = to_dollar_params(select_observed_servers(live_only=live_only))
        return observed_rows(await self._read(statement, (host_id,)))

    async def read(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Any read-only query on the read connection (host leases, migrate, bench)."""
        return await self._read(statement, params)

    @asynccontextmanager
    async def write(self, *, durable: bool = True) -> AsyncIterator[PostgresWriteTx]:
        """One READ COMMITTED transaction; commit on clean exit, rollback on exception.
        Every commit is flushed (the server's default ``synchronous_commit = on``), so
        ``durable`` asks for nothing more here."""
        del durable
        async with self._write_lock:
            self._check_open()
            with anyio.CancelScope(shield=True):
                self._writer = await self._fresh(self._writer)
                try:
                    await self._writer.command("BEGIN")
                except StoreError:
                    # Whatever state the link is in, the next transaction gets a new one.
                    self._writer.discard()
                    raise
            self._in_write = True
            tx = PostgresWriteTx(self._writer, self.history)
            try:
                with anyio.CancelScope(shield=True):
                    # First, while the transaction is sure to be healthy (a body may
                    # swallow a failed statement, which aborts it): see postgres_history.
                    await self.history.compact(self._writer)
                await anyio.lowlevel.checkpoint_if_cancelled()
                yield tx
            except BaseException:
                tx.finish()
                self._in_write = False
                await self._rollback()
                raise
            tx.finish()
            self._in_write = False
            with anyio.CancelScope(shield=True):
                try:
                    status = await self._writer.command("COMMIT")
                except BaseException:
                    await self._rollback()
                    raise
            if status != "COMMIT":
                # A statement failed inside the body and the body swallowed it:
                # PostgreSQL then answers COMMIT with ROLLBACK. Never claim the writes.
                raise StoreError("transaction was rolled back by PostgreSQL; nothing committed")

    async def _rollback(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._writer.rollback_or_discard()

    def submit_heartbeats(
        self, beats: Sequence[tuple[str, str]], chain: CommitChain
    ) -> Awaitable[bool]:
        """See ``Store.submit_heartbeats``: jobs run one after another in submission order."""
        self._check_open()
        job = asyncio.ensure_future(self._beat_job(self._last_job, list(beats), chain))
        self._last_job = job
        return job

    async def _beat_job(
        self,
        previous: asyncio.Future[bool] | None,
        beats: list[tuple[str, str]],
        chain: CommitChain,
    ) -> bool:
        if previous is not None:
            # Its outcome belongs to its own caller; here it only has to be over.
            with contextlib.suppress(BaseException):
                await asyncio.shield(previous)
        if self._in_write:
            # Like the SQLite job: never write inside someone else's open transaction.
            chain.broken = True
            raise StoreError("a transaction is already open on the write connection")
        async with self._write_lock:
            self._check_open()
            self._writer = await self._fresh(self._writer)
            return await stamp_and_commit(self._writer, beats=beats, chain=chain)

    async def close(self) -> None:
        """Close both connections, even if one of them fails to close; safe to call again."""
        if self._closed:
            return
        self._closed = True
        await close_connections((self._reader, self._writer), f"the store for {self.url}")
