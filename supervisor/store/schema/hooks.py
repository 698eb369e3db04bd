"""What a migration hook sees inside its migration's transaction, and its engine gate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from supervisor.errors import StoreError
from supervisor.store.dialect import POSTGRESQL, SQLITE, Dialect

__all__ = ["MigrationConn", "runs_on"]

#: The engines a schema knows; a hook for one of them does nothing on the other.
_ENGINES = frozenset({SQLITE.name, POSTGRESQL.name})


class MigrationConn(Protocol):
    """What a migration hook may do inside its migration's transaction."""

    dialect: Dialect

    async def query(self, statement: str, params: Sequence[Any] = ()) -> list[Sequence[Any]]: ...

    async def run(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Execute one statement (dialect tokens rendered)."""
        ...

    async def table_columns(self, table: str) -> list[str]:
        """The table's column names, [] when there is no such table."""
        ...


def runs_on(conn: MigrationConn, engine: Dialect, what: str) -> bool:
    """Whether a hook that builds ``what`` for ``engine`` alone has work on ``conn``: False
    on the other known engine, which needs nothing of it; an engine no schema knows is
    refused (StoreError), so a migration never half-applies there."""
    name = conn.dialect.name
    if name not in _ENGINES:
        raise StoreError(f"no {what} for {name}")
    return name == engine.name
