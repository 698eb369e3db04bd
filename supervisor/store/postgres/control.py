"""PostgreSQL control-plane operations: the portable control SQL of SQLite, run over asyncpg."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import aiosqlite

from supervisor.store.postgres.connection import PgConnection, to_dollar_params
from supervisor.store.sqlite.control import SQLiteControlTx

__all__ = ["PostgresControlTx", "sqlite_shaped"]


class _Cursor:
    """What sqlite.connection.execute reads from a cursor: the row count."""

    __slots__ = ("rowcount",)

    def __init__(self, rowcount: int) -> None:
        self.rowcount = rowcount


class _SQLiteShaped:
    """The two aiosqlite calls the control SQL goes through, answered by PostgreSQL.

    The control statements are portable by construction (schema_control.py's rules);
    only SQLite's ``?1`` placeholders need PostgreSQL's ``$1`` spelling.
    """

    __slots__ = ("_conn",)

    def __init__(self, conn: PgConnection) -> None:
        self._conn = conn

    async def execute(self, statement: str, params: Sequence[Any] = ()) -> _Cursor:
        return _Cursor(await self._conn.execute(to_dollar_params(statement), params))

    async def execute_fetchall(
        self, statement: str, params: Sequence[Any] = ()
    ) -> list[tuple[Any, ...]]:
        return await self._conn.fetch(to_dollar_params(statement), params)


def sqlite_shaped(live: Callable[[], PgConnection]) -> Callable[[], aiosqlite.Connection]:
    """``live`` as the aiosqlite-connection getter that sqlite.connection's helpers expect.

    They call exactly the two methods ``_SQLiteShaped`` has; the cast says so to mypy.
    """
    return cast("Callable[[], aiosqlite.Connection]", lambda: _SQLiteShaped(live()))


class PostgresControlTx(SQLiteControlTx):
    """The control-plane operations of one PostgreSQL write transaction.

    One implementation of the control SQL serves both engines, so a table or an
    operation added there is on PostgreSQL too, with the same validation and the same
    guarded (status compare-and-swap) updates; the partial unique indexes keep "one
    active lease per item" true across hosts.
    """

    def __init__(self, live: Callable[[], PgConnection]) -> None:
        super().__init__(sqlite_shaped(live))
