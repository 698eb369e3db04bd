"""SQLite write transaction: the WriteTx operations over the single aiosqlite write connection."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import partial
from typing import Any

import aiosqlite

from supervisor.policy.retirement.history import HistorySummary
from supervisor.store import rows as rowmap
from supervisor.store import sql
from supervisor.store.base import Row
from supervisor.store.dialect import SQLITE
from supervisor.store.history_cache import HistoryCache
from supervisor.store.host_leases import HostLeaseTx
from supervisor.store.observed_servers import ObservedServersTx
from supervisor.store.schema.tables import LEASE_COLUMNS, REGISTRATION_COLUMNS
from supervisor.store.sqlite.connection import (
    begin_immediate,
    commit,
    execute,
    executemany,
    fetchall,
    rollback,
    submit,
)
from supervisor.store.sqlite.control import SQLiteControlTx
from supervisor.store.sqlite.history import history_call, scope_rows_job, summary_job
from supervisor.store.stamps import require_stamp
from supervisor.store.write_tx import PortableWriteTx

__all__ = [
    "SQLiteWriteTx",
    "begin_immediate",
    "commit",
    "execute",
    "executemany",
    "fetchall",
    "rollback",
]


class _NotAllMatched(Exception):
    """A batched guarded retirement matched fewer rows than it was given."""


class SQLiteWriteTx(PortableWriteTx[aiosqlite.Connection]):
    """One BEGIN IMMEDIATE transaction on the write connection (see base.WriteTx)."""

    dialect = SQLITE
    _ROLLBACK_TO = "ROLLBACK TO"
    _RELEASE = "RELEASE"
    _NOT_IN_TRANSACTION = "transaction was rolled back by SQLite; refusing further writes"

    def __init__(self, conn: aiosqlite.Connection, history: HistoryCache | None = None) -> None:
        super().__init__(conn)
        self._history = history or HistoryCache()

    def _in_transaction(self, conn: aiosqlite.Connection) -> bool:
        # With isolation_level=None a statement outside a transaction would
        # autocommit on its own, outside the write lock and outside any rollback.
        return conn.in_transaction

    async def _fetch(self, statement: str, params: Sequence[Any]) -> list[Sequence[Any]]:
        return await fetchall(self._live(), statement, params)

    async def _execute(self, statement: str, params: Sequence[Any]) -> int:
        return await execute(self._live(), statement, params)

    async def _command(self, conn: aiosqlite.Connection, statement: str) -> None:
        await execute(conn, statement)

    async def registrations(
        self, *, status: str | None = None, worker_identities: Sequence[str] | None = None
    ) -> list[Row]:
        conn = self._live()
        by_status = status is not None
        head: tuple[Any, ...] = (status,) if by_status else ()
        if worker_identities is None:
            statement = sql.select_registrations(SQLITE, by_status=by_status, id_count=None)
            return rowmap.as_dicts(REGISTRATION_COLUMNS, await fetchall(conn, statement, head))
        ids = list(dict.fromkeys(worker_identities))  # de-duplicate, keep order
        found: list[Sequence[Any]] = []
        for start in range(0, len(ids), sql.MAX_IDS_PER_STATEMENT):
            chunk = ids[start : start + sql.MAX_IDS_PER_STATEMENT]
            statement = sql.select_registrations(SQLITE, by_status=by_status, id_count=len(chunk))
            found.extend(await fetchall(conn, statement, (*head, *chunk)))
        result = rowmap.as_dicts(REGISTRATION_COLUMNS, found)
        result.sort(key=lambda row: row["worker_identity"])
        return result

    async def history_summary(self) -> HistorySummary:
        # Folded into a copy: this transaction's own changes may still roll back.
        cache = self._history
        base, changes = await history_call(
            submit(self._live(), partial(summary_job, since=cache.through))
        )
        scratch = HistoryCache()
        scratch.fold, scratch.through = cache.fold, cache.through
        return scratch.advance(base, changes)

    async def history_scope(self, keys: Collection[tuple[str, str]]) -> list[Row]:
        # Rows, not just texts: apply checks them one by one; a few, read directly.
        rows = await history_call(
            submit(self._live(), partial(scope_rows_job, keys=list(set(keys))))
        )
        return rows

    async def touch_heartbeats(self, beats: Sequence[tuple[str, str]]) -> int:
        if not beats:
            return 0
        # One executemany for the whole batch: a single thread hop however many beats.
        # The statement binds ?1/?2 by number, so the pairs go in unchanged.
        return await executemany(self._live(), sql.touch_heartbeats(SQLITE), beats)

    async def _retire_rows(
        self, params: list[tuple[Any, ...]], stamp: tuple[str, str, str]
    ) -> list[bool]:
        statement = sql.retire_guarded(SQLITE)
        try:
            async with self.savepoint():
                # Each UPDATE is keyed by the primary key, so it changes at most one
                # row: a total equal to the row count means every row matched.
                if await executemany(self._live(), statement, params) != len(params):
                    raise _NotAllMatched
        except _NotAllMatched:
            # Rolled back to the savepoint; redo row by row to learn which ones moved.
            return [await execute(self._live(), statement, p) == 1 for p in params]
        return [True] * len(params)

    async def expire_leases(self, *, now_stamp: str) -> list[Row]:
        require_stamp(now_stamp, "now_stamp")
        conn = self._live()
        # SELECT then UPDATE with the same predicate: both run under the write lock of
        # this transaction, so they see the same set, and the rows come back as they
        # were before the update (RETURNING would give the updated values).
        due = await fetchall(conn, sql.select_due_leases(SQLITE), (now_stamp,))
        if not due:
            return []
        await execute(conn, sql.expire_due_leases(SQLITE), (now_stamp,))
        return rowmap.as_dicts(LEASE_COLUMNS, due)

    def control(self) -> SQLiteControlTx:
        return SQLiteControlTx(self._live)

    def hosts(self) -> HostLeaseTx:
        return HostLeaseTx(self._live)

    def observed(self) -> ObservedServersTx:
        return ObservedServersTx(self._live)
