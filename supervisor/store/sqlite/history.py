"""The history digest on SQLite: fold the change log, look up scope rows, compact the log."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any, TypeVar

from supervisor.errors import StoreError
from supervisor.policy.retirement.history import HistorySummary
from supervisor.store import rows as rowmap
from supervisor.store.base import Row
from supervisor.store.history_cache import (
    Base,
    Change,
    Held,
    columns_for,
    probe_rows,
    scope_rows,
)
from supervisor.store.schema.history import CHANGE_COLUMNS
from supervisor.store.schema.tables import REGISTRATION_COLUMNS

__all__ = [
    "compact_job",
    "history_call",
    "history_page_job",
    "scope_job",
    "scope_rows_job",
    "summary_job",
    "view_job",
]

_REGISTRATIONS = ", ".join(REGISTRATION_COLUMNS)
_CHANGE_LIST = ", ".join(CHANGE_COLUMNS)
# The digest row and the changes after both the cached position and the compacted
# one (older ones are already in the digest row or in the cache), in one statement
# so both come from one snapshot even while the writer compacts.
_SELECT_DIGEST_AND_CHANGES = (
    "SELECT d.row_count, d.irregular_count, d.product, d.through_change_id, "
    f"c.change_id, c.sign, {', '.join('c.' + name for name in CHANGE_COLUMNS)} "
    "FROM registry_history_digest AS d LEFT JOIN registry_history_changes AS c "
    "ON c.change_id > max(?1, d.through_change_id) WHERE d.id = 1 ORDER BY c.change_id"
)
_CHUNK = 500
_T = TypeVar("_T")


async def history_call(pending: Awaitable[_T]) -> _T:
    """Await a job on a connection's thread; engine errors become ``StoreError``."""
    try:
        return await pending
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite history read failed: {exc}") from exc


def _digest_and_changes(raw: sqlite3.Connection, since: int) -> tuple[Base, list[Change]]:
    found = raw.execute(_SELECT_DIGEST_AND_CHANGES, (since,)).fetchall()
    if not found:
        raise sqlite3.DatabaseError("registry_history_digest has no row (schema damaged)")
    first = found[0]
    base = (int(first[0]), int(first[1]), str(first[2]), int(first[3]))
    # A digest without pending changes comes back as one row of NULL change columns.
    return base, [row[4:] for row in found if row[4] is not None]


_SELECT_POSITION = "SELECT max(change_id) FROM registry_history_changes"
#: Attempts at a read no history change overtook before giving up (fail closed).
_ATTEMPTS = 8


def _position(raw: sqlite3.Connection) -> Any:
    return raw.execute(_SELECT_POSITION).fetchone()[0]


def _consistent(raw: sqlite3.Connection, read: Callable[[], _T]) -> _T:
    """``read()`` such that no change to history committed while it ran.

    Each statement sees its own committed snapshot; a change to history always
    appends to the change log (whose largest id only grows), so an unchanged
    largest id before and after means the statements saw one history. No
    explicit transaction: the reader connection is shared with chunked reads
    that keep a cursor open across hops.
    """
    if raw.in_transaction:
        return read()  # the writer's own transaction is consistent already
    for _ in range(_ATTEMPTS):
        before = _position(raw)
        value = read()
        if _position(raw) == before:
            return value
    raise sqlite3.OperationalError("history kept changing during a read; try again")


def view_job(
    raw: sqlite3.Connection, since: int, read_active: Callable[[sqlite3.Connection], _T]
) -> tuple[_T, Base, list[Change]]:
    """Active rows (``read_active``), the digest row and the changes after ``since``,
    all from one read transaction.

    An explicit transaction rather than ``_consistent``: the active rows are
    read in several statements that must agree with each other, stamps
    included, which no change-log position can vouch for. A chunked read's
    cursor left open on this connection is no obstacle: it shares the snapshot,
    and COMMIT leaves it readable.
    """
    if raw.in_transaction:
        return read_active(raw), *_digest_and_changes(raw, since)
    raw.execute("BEGIN")
    try:
        active = read_active(raw)
        base, changes = _digest_and_changes(raw, since)
    finally:
        # Nothing was written: COMMIT and ROLLBACK both just end the snapshot.
        raw.execute("ROLLBACK")
    return active, base, changes


def summary_job(raw: sqlite3.Connection, since: int) -> tuple[Base, list[Change]]:
    """The digest row and later changes (inside the caller's transaction if one is open)."""
    return _consistent(raw, lambda: _digest_and_changes(raw, since))


def _rows_where(
    raw: sqlite3.Connection, column: str, values: list[str]
) -> Iterable[tuple[int, Row]]:
    distinct = sorted(set(values))
    for start in range(0, len(distinct), _CHUNK):
        chunk = distinct[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        cursor = raw.execute(
            f"SELECT rowid, {_CHANGE_LIST} FROM worker_registrations "
            f"WHERE status <> 'active' AND {column} IN ({marks})",
            chunk,
        )
        for hit in cursor:
            yield hit[0], dict(zip(CHANGE_COLUMNS, hit[1:], strict=True))


def _probe(
    raw: sqlite3.Connection, keys: Collection[tuple[str, str]]
) -> dict[tuple[str, str], list[Held]]:
    """Historical rows carrying each key, straight from the table."""
    return probe_rows(_hits(raw, keys), keys)


def _hits(raw: sqlite3.Connection, keys: Collection[tuple[str, str]]) -> Iterable[tuple[int, Row]]:
    for column, values in columns_for(keys).items():
        yield from _rows_where(raw, column, values)


def scope_rows_job(raw: sqlite3.Connection, keys: Collection[tuple[str, str]]) -> list[Row]:
    """Historical rows (token columns) carrying any of ``keys``, each once."""
    return scope_rows(_hits(raw, keys), keys)


def scope_job(
    raw: sqlite3.Connection, since: int, keys: Collection[tuple[str, str]]
) -> tuple[Base, list[Change], dict[tuple[str, str], list[Held]]]:
    """The digest position and the rows for ``keys``, as of one history."""

    def read() -> tuple[Base, list[Change], dict[tuple[str, str], list[Held]]]:
        base, changes = _digest_and_changes(raw, since)
        return base, changes, _probe(raw, keys)

    return _consistent(raw, read)


def history_page_job(
    raw: sqlite3.Connection, after: str | None, limit: int, needle: str | None
) -> list[Row]:
    """Historical rows by identity after ``after``; ``needle`` narrows by substring first."""
    where = ["status <> 'active'"]
    params: list[Any] = []
    if after is not None:
        where.append("worker_identity > ?")
        params.append(after)
    if needle:
        # A superset (whitespace-padded spellings included); callers filter exactly.
        where.append("(instr(client_instance_id, ?) > 0 OR instr(namespace, ?) > 0)")
        params.extend([needle, needle])
    params.append(limit)
    statement = (
        f"SELECT {_REGISTRATIONS} FROM worker_registrations WHERE {' AND '.join(where)} "
        "ORDER BY worker_identity LIMIT ?"
    )
    return rowmap.as_dicts(REGISTRATION_COLUMNS, raw.execute(statement, params).fetchall())


def compact_job(raw: sqlite3.Connection, summary: HistorySummary, through: int) -> None:
    """Write a folded position to the digest row and drop the changes it covers.

    Runs inside the writer's open transaction. The change at ``through`` itself is
    kept, so new change ids (max + 1) never restart below the folded position.
    """
    raw.execute(
        "UPDATE registry_history_digest SET row_count = ?, irregular_count = ?, product = ?, "
        "through_change_id = ? WHERE id = 1 AND through_change_id < ?",
        (summary.count, summary.irregular_count, format(summary.product, "x"), through, through),
    )
    raw.execute("DELETE FROM registry_history_changes WHERE change_id < ?", (through,))
