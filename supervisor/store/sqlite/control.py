"""SQLite control-plane operations on the write transaction's connection (see control_base)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aiosqlite

from supervisor.errors import StoreError
from supervisor.store import control_rows as rows
from supervisor.store import control_sql as sql
from supervisor.store.control_base import Row
from supervisor.store.dialect import SQLITE
from supervisor.store.schema.control import CONTROL_EVENT_COLUMNS
from supervisor.store.sql import MAX_IDS_PER_STATEMENT
from supervisor.store.sqlite.connection import execute, fetchall
from supervisor.store.sqlite.links import SQLiteLinkOps

__all__ = ["SQLiteControlTx"]

_SESSIONS = rows.TABLES["sessions"]
_ITEMS = rows.TABLES["work_items"]
_LEASES = rows.TABLES["leases"]
_ASSIGNMENTS = rows.TABLES["assignments"]
_LOCKS = rows.TABLES["terminal_locks"]


def _chunks(values: Sequence[str]) -> list[list[str]]:
    unique = list(dict.fromkeys(values))
    return [
        unique[i : i + MAX_IDS_PER_STATEMENT] for i in range(0, len(unique), MAX_IDS_PER_STATEMENT)
    ]


class SQLiteControlTx(SQLiteLinkOps):
    """Bound to one SQLiteWriteTx: ``live`` raises once that transaction has ended.

    Namespace health and incident link operations come from ``SQLiteLinkOps``.
    """

    def __init__(self, live: Callable[[], aiosqlite.Connection]) -> None:
        self._live = live

    async def _one(
        self, table: rows.Table, where: tuple[str, ...], params: Sequence[Any]
    ) -> Row | None:
        found = await fetchall(
            self._live(), sql.select_where(SQLITE, table.name, table.columns, where), params
        )
        if len(found) > 1:
            raise StoreError(f"{table.name}: more than one row matches {where}")
        return rows.as_dicts(table.columns, found)[0] if found else None

    async def _in(
        self, table: rows.Table, column: str, keys: Sequence[str], *, active_only: bool
    ) -> list[Any]:
        found: list[Any] = []
        for chunk in _chunks(keys):
            statement = sql.select_in(
                SQLITE,
                table.name,
                table.columns,
                column,
                len(chunk),
                active_only=active_only,
                order_by=table.key,
            )
            found.extend(await fetchall(self._live(), statement, chunk))
        return found

    async def _upsert(self, table: rows.Table, row: Mapping[str, Any]) -> None:
        columns, values = rows.row_params(table, row)
        await execute(self._live(), sql.upsert_row(SQLITE, table.name, table.key, columns), values)

    async def _insert(self, table: rows.Table, row: Mapping[str, Any]) -> None:
        columns, values = rows.row_params(table, row)
        await execute(self._live(), sql.insert_row(SQLITE, table.name, columns), values)

    async def _update(
        self,
        table: rows.Table,
        key_column: str,
        key: str,
        expected_status: str,
        changes: Mapping[str, Any],
    ) -> int:
        columns, values = rows.change_params(table, changes)
        statement = sql.update_guarded(SQLITE, table.name, key_column, columns)
        return await execute(self._live(), statement, (key, expected_status, *values))

    # --- sessions and work items -----------------------------------------------------

    async def session(self, session_id: str) -> Row | None:
        return await self._one(_SESSIONS, ("session_id",), (session_id,))

    async def put_session(self, row: Mapping[str, Any]) -> None:
        await self._upsert(_SESSIONS, row)

    async def work_items(self, keys: Sequence[str]) -> list[Row]:
        found = await self._in(_ITEMS, "work_item_key", keys, active_only=False)
        return rows.as_dicts(_ITEMS.columns, found)

    async def put_work_item(self, row: Mapping[str, Any]) -> None:
        await self._upsert(_ITEMS, row)

    # --- leases and assignments ------------------------------------------------------

    async def item_leases(self, keys: Sequence[str]) -> list[Row]:
        found = rows.as_dicts(
            _LEASES.columns, await self._in(_LEASES, "work_item_key", keys, active_only=True)
        )
        found.sort(key=lambda r: (str(r["acquired_at"] or ""), str(r["lease_id"])))
        return found

    async def lease(self, lease_id: str) -> Row | None:
        return await self._one(_LEASES, ("lease_id",), (lease_id,))

    async def insert_lease(self, row: Mapping[str, Any]) -> None:
        await self._insert(_LEASES, row)

    async def update_lease(
        self, lease_id: str, *, expected_status: str, changes: Mapping[str, Any]
    ) -> bool:
        return await self._update(_LEASES, "lease_id", lease_id, expected_status, changes) == 1

    async def assignment(self, *, work_item_key: str, session_id: str) -> Row | None:
        statement = sql.select_where(
            SQLITE,
            _ASSIGNMENTS.name,
            _ASSIGNMENTS.columns,
            ("work_item_key", "session_id"),
            active_only=True,
        )
        found = await fetchall(self._live(), statement, (work_item_key, session_id))
        return rows.assignment_rows(found)[0] if found else None

    async def assignment_by_lease(self, lease_id: str) -> Row | None:
        statement = sql.select_where(
            SQLITE, _ASSIGNMENTS.name, _ASSIGNMENTS.columns, ("lease_id",), order_by="created_at"
        )
        found = await fetchall(self._live(), statement, (lease_id,))
        return rows.assignment_rows(found)[-1] if found else None

    async def insert_assignment(self, row: Mapping[str, Any]) -> None:
        await self._insert(_ASSIGNMENTS, row)

    async def update_assignments(
        self, lease_ids: Sequence[str], *, expected_status: str, changes: Mapping[str, Any]
    ) -> int:
        total = 0
        for lease_id in dict.fromkeys(lease_ids):
            total += await self._update(
                _ASSIGNMENTS, "lease_id", lease_id, expected_status, changes
            )
        return total

    # --- terminal locks and events ---------------------------------------------------

    async def active_terminal_lock(self, *, remote: str, org: str, repo: str) -> Row | None:
        statement = sql.select_where(
            SQLITE, _LOCKS.name, _LOCKS.columns, ("remote", "org", "repo"), active_only=True
        )
        found = await fetchall(self._live(), statement, (remote, org, repo))
        return rows.as_dicts(_LOCKS.columns, found)[0] if found else None

    async def insert_terminal_lock(self, row: Mapping[str, Any]) -> None:
        await self._insert(_LOCKS, row)

    async def update_terminal_lock(
        self, lock_id: str, *, expected_status: str, changes: Mapping[str, Any]
    ) -> bool:
        return await self._update(_LOCKS, "lock_id", lock_id, expected_status, changes) == 1

    async def append_event(self, event: Mapping[str, Any]) -> None:
        statement = sql.insert_row(SQLITE, "control_events", rows.EVENT_INSERT_COLUMNS)
        await execute(self._live(), statement, rows.event_params(event))

    async def events(self, *, work_item_key: str | None = None, limit: int = 100) -> list[Row]:
        if limit < 0:
            raise StoreError(f"limit must be >= 0, got {limit}")
        by_item = work_item_key is not None
        statement = sql.select_events(SQLITE, CONTROL_EVENT_COLUMNS, by_item=by_item)
        params = (work_item_key, limit) if by_item else (limit,)
        newest_first = await fetchall(self._live(), statement, params)
        return rows.event_rows(reversed(newest_first))
