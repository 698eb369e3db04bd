"""The SQL reads and schema checks behind the SQLite active-row cache."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from supervisor.store.base import Row
from supervisor.store.rows import dict_builder
from supervisor.store.schema.active import STAMP_COLUMN, active_trigger_sql
from supervisor.store.schema.stamps import BATCHES_DDL, LOG_KIND_COLUMN, stamp_trigger_sql
from supervisor.store.schema.tables import REGISTRATION_COLUMNS

__all__ = [
    "COLUMNS",
    "active_count",
    "fetch_rows",
    "fetch_stamps",
    "fetch_values",
    "log_intact",
    "sorted_rowids",
    "stamp_lists",
    "stamp_texts",
    "stamps_intact",
]

COLUMNS = ", ".join(REGISTRATION_COLUMNS)
_CHUNK = 500
_SELECT_STAMPS = f"SELECT rowid, {STAMP_COLUMN} FROM worker_registrations WHERE status = 'active'"
_SELECT_STAMPS_JSON = (
    f"SELECT json_group_array(rowid), json_group_array({STAMP_COLUMN}) "
    "FROM worker_registrations WHERE status = 'active'"
)
_COUNT = "SELECT count(*) FROM worker_registrations WHERE status = 'active'"
_SELECT_TRIGGERS = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
    "AND tbl_name = 'worker_registrations' AND name LIKE 'registry_active_%'"
)
_SELECT_STAMP_TRIGGERS = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'registry_stamp%'"
)


def _fetch_active(
    raw: sqlite3.Connection, columns: str, rowids: Iterable[int]
) -> Iterable[tuple[Any, ...]]:
    """(rowid, *columns) of each active row among ``rowids``, read in chunks."""
    wanted = sorted(rowids)
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        statement = (
            f"SELECT rowid, {columns} FROM worker_registrations "
            f"WHERE status = 'active' AND rowid IN ({marks})"
        )
        yield from raw.execute(statement, chunk)


def fetch_values(
    raw: sqlite3.Connection, rowids: Iterable[int]
) -> Iterable[tuple[int, Sequence[Any]]]:
    """(rowid, column values) of each active row among ``rowids``, read in chunks."""
    for hit in _fetch_active(raw, COLUMNS, rowids):
        yield int(hit[0]), hit[1:]


def fetch_rows(raw: sqlite3.Connection, rowids: Iterable[int]) -> Iterable[tuple[int, Row]]:
    """(rowid, row) of each active row among ``rowids``, read in chunks."""
    build = dict_builder(REGISTRATION_COLUMNS)
    for rowid, values in fetch_values(raw, rowids):
        yield rowid, build(values)


def fetch_stamps(raw: sqlite3.Connection, rowids: Iterable[int]) -> Iterable[tuple[int, Any]]:
    """(rowid, heartbeat stamp) of each active row among ``rowids``, read in chunks."""
    for rowid, stamp in _fetch_active(raw, STAMP_COLUMN, rowids):
        yield int(rowid), stamp


def active_count(raw: sqlite3.Connection) -> int:
    """How many rows are active (the status index alone answers it)."""
    return int(raw.execute(_COUNT).fetchone()[0])


def stamp_texts(raw: sqlite3.Connection) -> tuple[str, str] | None:
    """Rowid and stamp of every active row as two JSON arrays, paired by position (one
    aggregate pass fills both); None when a stamp is a BLOB, which JSON refuses.

    Two arrays built by SQLite cost a third of fetching ten thousand rows one step at
    a time, and comparing them with the last pass's as text costs nothing per row. A
    stamp column holds only NULL, TEXT (its TEXT affinity turns numbers into text;
    the store checks the declared type) or BLOB.
    """
    try:
        ids, stamps = raw.execute(_SELECT_STAMPS_JSON).fetchone()
    except sqlite3.OperationalError:
        return None
    return str(ids), str(stamps)


def stamp_lists(
    raw: sqlite3.Connection, texts: tuple[str, str] | None
) -> tuple[list[int], list[Any]]:
    """The rowids and stamps of ``stamp_texts``, or of the rows when it gave None."""
    if texts is None:
        found = raw.execute(_SELECT_STAMPS).fetchall()
        return [int(r[0]) for r in found], [r[1] for r in found]
    rowids: list[int] = json.loads(texts[0])
    stamps: list[Any] = json.loads(texts[1])
    return rowids, stamps


def _rank(value: Any) -> tuple[int, Any]:
    """SQLite's order of mixed storage classes (NULL, numbers, TEXT, BLOB), for BINARY.

    Python compares str by code point, which is the byte order of its UTF-8 (the
    database's encoding, checked with the triggers) that BINARY compares.
    """
    if value is None:
        return (0, 0)
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, bytes(value))


def sorted_rowids(rows: dict[int, Row]) -> list[int]:
    """Rowids in the order of ``ORDER BY worker_identity, rowid``."""
    return sorted(rows, key=lambda rowid: (_rank(rows[rowid]["worker_identity"]), rowid))


def log_intact(raw: sqlite3.Connection) -> bool:
    """The log exists, its triggers are exactly the ones this version creates, and the
    table is as ``_rank`` and ``stamp_texts`` assume (TEXT identity and stamp, UTF-8)."""
    info = raw.execute("SELECT name, type FROM pragma_table_info('worker_registrations')")
    declared = {str(name): str(kind).upper() for name, kind in info}
    if tuple(declared) != REGISTRATION_COLUMNS:
        return False
    if declared["worker_identity"] != "TEXT" or declared[STAMP_COLUMN] != "TEXT":
        return False
    if str(raw.execute("PRAGMA encoding").fetchone()[0]) != "UTF-8":
        return False
    log = raw.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'registry_active_changes'"
    ).fetchall()
    found = {str(name): str(text) for name, text in raw.execute(_SELECT_TRIGGERS)}
    return bool(log) and found == dict(active_trigger_sql(REGISTRATION_COLUMNS))


def stamps_intact(raw: sqlite3.Connection) -> bool:
    """Schema v10 is as this version creates it, so that every stamp write outside a
    journaled batch is logged, and every row deleted without a log entry (only a
    REPLACE does that) comes with a logged insert or update of the row replacing it.

    The second needs the primary key to be the table's only unique index: a unique
    index on another column would let an unlogged stamp write replace a row.
    """
    log = raw.execute("SELECT name FROM pragma_table_info('registry_active_changes')")
    kinds = [str(r[0]) for r in log]
    if kinds != ["change_id", "row_id", LOG_KIND_COLUMN]:
        return False
    table = raw.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'registry_stamp_batches'"
    ).fetchall()
    if [tuple(r) for r in table] != [(BATCHES_DDL,)]:
        return False
    found = {str(name): str(text) for name, text in raw.execute(_SELECT_STAMP_TRIGGERS)}
    if found != dict(stamp_trigger_sql()):
        return False
    unique = raw.execute(
        "SELECT origin FROM pragma_index_list('worker_registrations') WHERE \"unique\""
    ).fetchall()
    return [tuple(r) for r in unique] == [("pk",)]
