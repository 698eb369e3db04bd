"""Statement builders for the control-plane tables: portable SQL with numbered parameters."""

from __future__ import annotations

from functools import lru_cache

from supervisor.store.dialect import Dialect

__all__ = [
    "insert_row",
    "select_events",
    "select_in",
    "select_where",
    "update_guarded",
    "upsert_row",
]

# Table and column names reaching these builders are the schema's own constants (the
# row mapping refuses any other key first), never caller text; values are always bound.


@lru_cache(maxsize=64)
def insert_row(d: Dialect, table: str, columns: tuple[str, ...]) -> str:
    """INSERT of exactly ``columns``; a duplicate key fails rather than overwrites."""
    marks = d.params(len(columns))
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"


@lru_cache(maxsize=64)
def upsert_row(d: Dialect, table: str, key: str, columns: tuple[str, ...]) -> str:
    """Insert, or update only the given columns of the row with this ``key``.

    ``columns`` starts with ``key`` and holds every NOT NULL column (both engines check
    them on the would-be inserted row before resolving the conflict).
    """
    marks = d.params(len(columns))
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != key)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
        f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
    )


@lru_cache(maxsize=64)
def select_where(
    d: Dialect,
    table: str,
    columns: tuple[str, ...],
    where: tuple[str, ...],
    *,
    active_only: bool = False,
    order_by: str = "",
) -> str:
    """Rows whose ``where`` columns equal parameters 1..n, optionally only active ones."""
    clauses = [f"{column} = {d.param(i)}" for i, column in enumerate(where, start=1)]
    if active_only:
        clauses.append("status = 'active'")
    clause = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    order = f" ORDER BY {order_by}" if order_by else ""
    return f"SELECT {', '.join(columns)} FROM {table}{clause}{order}"


@lru_cache(maxsize=64)
def select_in(
    d: Dialect,
    table: str,
    columns: tuple[str, ...],
    column: str,
    count: int,
    *,
    active_only: bool = False,
    order_by: str = "",
) -> str:
    """Rows whose ``column`` is one of ``count`` parameters."""
    marks = d.params(count)
    extra = " AND status = 'active'" if active_only else ""
    order = f" ORDER BY {order_by}" if order_by else ""
    return f"SELECT {', '.join(columns)} FROM {table} WHERE {column} IN ({marks}){extra}{order}"


@lru_cache(maxsize=64)
def update_guarded(d: Dialect, table: str, key: str, columns: tuple[str, ...]) -> str:
    """Change ``columns`` only while the row's status is still the expected one.

    Parameters: (key value, expected status, *column values). The status guard makes
    each transition a compare-and-swap, also across supervisors sharing one database.
    """
    sets = ", ".join(f"{c} = {d.param(i)}" for i, c in enumerate(columns, start=3))
    return f"UPDATE {table} SET {sets} WHERE {key} = {d.param(1)} AND status = {d.param(2)}"


@lru_cache(maxsize=8)
def select_events(d: Dialect, columns: tuple[str, ...], *, by_item: bool) -> str:
    """Newest control events first; parameters: [work_item_key,] limit."""
    where = f" WHERE work_item_key = {d.param(1)}" if by_item else ""
    limit = d.param(2 if by_item else 1)
    return (
        f"SELECT {', '.join(columns)} FROM control_events{where} "
        f"ORDER BY event_id DESC LIMIT {limit}"
    )
