"""Statement builders for the namespace health and incident link tables (portable SQL)."""

from __future__ import annotations

from functools import lru_cache

from supervisor.store.control_sql import insert_row
from supervisor.store.dialect import Dialect

__all__ = ["insert_returning", "update_by_key", "upsert_composite"]

# As in control_sql: table and column names are the schema's constants, values are bound.


@lru_cache(maxsize=16)
def upsert_composite(
    d: Dialect, table: str, keys: tuple[str, ...], columns: tuple[str, ...]
) -> str:
    """Insert, or replace every non-key column of the row with these ``keys``."""
    marks = d.params(len(columns))
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in keys)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
    )


@lru_cache(maxsize=16)
def insert_returning(d: Dialect, table: str, columns: tuple[str, ...], returning: str) -> str:
    """INSERT that answers the store-generated key (RETURNING: SQLite 3.35+, PostgreSQL)."""
    return f"{insert_row(d, table, columns)} RETURNING {returning}"


@lru_cache(maxsize=16)
def update_by_key(d: Dialect, table: str, key: str, columns: tuple[str, ...]) -> str:
    """Parameters: (key value, *column values)."""
    sets = ", ".join(f"{c} = {d.param(i)}" for i, c in enumerate(columns, start=2))
    return f"UPDATE {table} SET {sets} WHERE {key} = {d.param(1)}"
