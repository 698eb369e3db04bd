"""PostgreSQL control-plane operations: the portable control SQL of SQLite, run over asyncpg."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from supervisor.store.postgres_exec import PgConnection, to_dollar_params
from supervisor.store.sqlite_control import SQLiteControlTx

__all__ = ["PostgresControlTx"]


class _Cursor:
    """What sqlite_exec.execute reads from a cursor: the row count."""

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


class PostgresControlTx(SQLiteControlTx):
    """The control-plane operations of one PostgreSQL write transaction.

    One implementation of the control SQL serves both engines, so a table or an
    operation added there is on PostgreSQL too, with the same validation and the same
    guarded (status compare-and-swap) updates; the partial unique indexes keep "one
    active lease per item" true across hosts.
    """

    def __init__(self, live: Callable[[], PgConnection]) -> None:
        # The parent only passes the connection on to sqlite_exec's helpers, which call
        # exactly the two methods _SQLiteShaped has.
        super().__init__(cast(Any, lambda: _SQLiteShaped(live())))
