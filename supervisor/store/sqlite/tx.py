"""SQLite write transaction: the WriteTx operations over the single aiosqlite write connection."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import aiosqlite
import anyio

from supervisor.errors import StoreError
from supervisor.policy.retirement.history import HistorySummary
from supervisor.store import rows as rowmap
from supervisor.store import sql
from supervisor.store.base import Row
from supervisor.store.dialect import SQLITE
from supervisor.store.history_cache import HistoryCache
from supervisor.store.host_leases import HostLeaseTx
from supervisor.store.schema import LEASE_COLUMNS, REGISTRATION_COLUMNS
from supervisor.store.sqlite_control import SQLiteControlTx
from supervisor.store.sqlite_exec import (
    begin_immediate,
    commit,
    execute,
    executemany,
    fetchall,
    rollback,
    submit,
)
from supervisor.store.sqlite_history import history_call, scope_rows_job, summary_job
from supervisor.store.stamps import require_stamp

__all__ = [
    "SQLiteWriteTx",
    "begin_immediate",
    "commit",
    "execute",
    "executemany",
    "fetchall",
    "rollback",
]


#: Position of worker_identity in rowmap.retire_params' tuple.
_RETIRE_IDENTITY_PARAM = 3


class _NotAllMatched(Exception):
    """A batched guarded retirement matched fewer rows than it was given."""


class SQLiteWriteTx:
    """One BEGIN IMMEDIATE transaction on the write connection (see base.WriteTx)."""

    def __init__(self, conn: aiosqlite.Connection, history: HistoryCache | None = None) -> None:
        self._conn = conn
        self._history = history or HistoryCache()
        self._open = True
        self._savepoints = 0

    def finish(self) -> None:
        """Called by the store when the transaction ends; later use is an error."""
        self._open = False

    def _live(self) -> aiosqlite.Connection:
        if not self._open:
            raise StoreError("write transaction already finished")
        if not self._conn.in_transaction:
            # With isolation_level=None a statement outside a transaction would
            # autocommit on its own, outside the write lock and outside any rollback.
            raise StoreError("transaction was rolled back by SQLite; refusing further writes")
        return self._conn

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """SAVEPOINT sN ... RELEASE; on exception ROLLBACK TO sN + RELEASE, then re-raise."""
        conn = self._live()
        self._savepoints += 1
        name = f"s{self._savepoints}"  # unique per transaction, so nesting is safe
        with anyio.CancelScope(shield=True):
            await execute(conn, f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            with anyio.CancelScope(shield=True):
                # If SQLite already discarded the whole transaction the savepoint is
                # gone too; the outer write() reports that, so just re-raise.
                if self._open and conn.in_transaction:
                    await execute(conn, f"ROLLBACK TO {name}")
                    await execute(conn, f"RELEASE {name}")
            raise
        with anyio.CancelScope(shield=True):
            await execute(self._live(), f"RELEASE {name}")

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

    async def max_fencing_epoch(self, *, client_instance_id: str, namespace: str) -> int:
        rows = await fetchall(
            self._live(), sql.max_fencing_epoch(SQLITE), (client_instance_id, namespace)
        )
        value = rows[0][0] if rows else None
        return int(value) if value is not None else 0

    async def active_by_pid(self, pid: int) -> list[Row]:
        rows = await fetchall(self._live(), sql.select_active_by_pid(SQLITE), (pid,))
        return rowmap.as_dicts(REGISTRATION_COLUMNS, rows)

    async def insert_registration(self, row: Mapping[str, Any]) -> None:
        columns, values = rowmap.registration_params(row)
        await execute(self._live(), sql.insert_registration(SQLITE, columns), values)

    async def touch_heartbeats(self, beats: Sequence[tuple[str, str]]) -> int:
        if not beats:
            return 0
        # One executemany for the whole batch: a single thread hop however many beats.
        # The statement binds ?1/?2 by number, so the pairs go in unchanged.
        return await executemany(self._live(), sql.touch_heartbeats(SQLITE), beats)

    async def set_status(
        self,
        worker_identity: str,
        *,
        expected_status: str,
        new_status: str,
        stamp_column: str | None,
        stamp: str | None,
    ) -> bool:
        params = rowmap.status_params(
            worker_identity,
            expected_status=expected_status,
            new_status=new_status,
            stamp_column=stamp_column,
            stamp=stamp,
        )
        statement = sql.set_status(SQLITE, stamp_column=stamp_column)
        return await execute(self._live(), statement, params) == 1

    async def retire_guarded(
        self, expected: Mapping[str, Any], *, retired_at: str, retired_by: str, reason: str
    ) -> bool:
        params = rowmap.retire_params(
            expected, retired_at=retired_at, retired_by=retired_by, reason=reason
        )
        return await execute(self._live(), sql.retire_guarded(SQLITE), params) == 1

    async def retire_guarded_many(
        self,
        expected: Sequence[Mapping[str, Any]],
        *,
        retired_at: str,
        retired_by: str,
        reason: str,
    ) -> list[bool]:
        params = [
            rowmap.retire_params(row, retired_at=retired_at, retired_by=retired_by, reason=reason)
            for row in expected
        ]
        if not params:
            return []
        if len({p[_RETIRE_IDENTITY_PARAM] for p in params}) != len(params):
            # The all-matched shortcut below counts rows; a repeated identity would
            # let one row's match stand in for another's.
            raise StoreError("retire_guarded_many needs distinct worker identities")
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

    async def leases(self, *, status: str | None = None) -> list[Row]:
        statement = sql.select_leases(SQLITE, by_status=status is not None)
        params = (status,) if status is not None else ()
        return rowmap.as_dicts(LEASE_COLUMNS, await fetchall(self._live(), statement, params))

    async def upsert_lease(self, lease: Mapping[str, Any]) -> None:
        columns, values = rowmap.lease_params(lease)
        await execute(self._live(), sql.upsert_lease(SQLITE, columns), values)

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

    async def append_audit(self, event: Mapping[str, Any]) -> None:
        await execute(self._live(), sql.insert_audit(SQLITE), rowmap.audit_params(event))

    def control(self) -> SQLiteControlTx:
        return SQLiteControlTx(self._live)

    def hosts(self) -> HostLeaseTx:
        return HostLeaseTx(self._live)
