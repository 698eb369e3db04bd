"""The SQLite store's cache of active rows, kept exact by the change log and a stamp pass."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from supervisor.store.base import Row
from supervisor.store.rows import dict_builder
from supervisor.store.schema import REGISTRATION_COLUMNS
from supervisor.store.schema_active import STAMP_COLUMN, active_trigger_sql

__all__ = ["ActiveCache", "active_job", "compact_active_job"]

_COLUMNS = ", ".join(REGISTRATION_COLUMNS)
_STAMP_INDEX = REGISTRATION_COLUMNS.index(STAMP_COLUMN)
# rowid breaks ties: worker_identity is a PRIMARY KEY, but a hand-run session can
# still insert several NULL identities, and their order must not depend on the path.
_ORDER = "ORDER BY worker_identity, rowid"
_SELECT_ALL = f"SELECT rowid, {_COLUMNS} FROM worker_registrations WHERE status = 'active' {_ORDER}"
_SELECT_STAMPS = f"SELECT rowid, {STAMP_COLUMN} FROM worker_registrations WHERE status = 'active'"
_SELECT_STAMPS_JSON = (
    f"SELECT json_group_array(rowid), json_group_array({STAMP_COLUMN}) "
    "FROM worker_registrations WHERE status = 'active'"
)
_SELECT_LOG = (
    "SELECT change_id, row_id FROM registry_active_changes WHERE change_id >= ?1 ORDER BY change_id"
)
_SELECT_POSITION = "SELECT max(change_id) FROM registry_active_changes"
_SELECT_TRIGGERS = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
    "AND tbl_name = 'worker_registrations' AND name LIKE 'registry_active_%'"
)
_CHUNK = 500
#: Changed rows above this share of the cache are re-read with one full pass instead.
_FULL_READ_SHARE = 4
_MIN_FULL_READ = 256


def _same(a: Any, b: Any) -> bool:
    """Equal value of the same type, as a fresh read would return it."""
    if a is b:
        return True
    if type(a) is not type(b) or a != b:
        return False
    # 0.0 == -0.0; a float is kept only if it prints the same.
    return type(a) is not float or repr(a) == repr(b)


def _same_row(row: Row, values: Sequence[Any]) -> bool:
    return all(map(_same, row.values(), values))


class ActiveCache:
    """The committed active rows by rowid, refreshed on the reader connection's thread.

    ``refresh`` runs inside one read transaction: it re-reads the rows the change
    log names (every insert, delete and update of any column but the heartbeat
    stamp, by any connection), then reads the stamp of every active row, which
    also catches what a log cannot (a rowid moved, a row gone), and copies the
    dict of each row whose stamp moved. Anything it cannot vouch for (no log,
    triggers not as expected, a gap in the log, the schema changed) makes it read
    every active row instead; a row equal to its cached dict keeps that dict.
    Dicts handed out are never changed afterwards: a change is a new dict.
    """

    __slots__ = ("compacted", "cookie", "logged", "moved", "order", "position", "rows", "seen")

    def __init__(self) -> None:
        self.rows: dict[int, Row] = {}
        #: The largest log entry folded (0: an empty log); -1 until a read with a log.
        self.position = -1
        #: The largest entry already deleted up to by ``compact_active_job``.
        self.compacted = -1
        #: ``PRAGMA schema_version`` the triggers were checked at; None before that.
        self.cookie: int | None = None
        #: The log and its triggers are as this version creates them.
        self.logged = False
        #: Rowids of ``rows`` in output order (worker_identity, then rowid).
        self.order: list[int] = []
        #: The last stamp pass: rowids and stamps in scan order, paired by position.
        self.seen: tuple[list[int], list[Any]] | None = None
        #: A re-read row changed its identity since ``order`` was computed.
        self.moved = False

    def refresh(self, raw: sqlite3.Connection) -> list[Row]:
        """The active rows in identity order; the caller holds one read transaction."""
        try:
            return self._refresh(raw)
        except BaseException:
            # Half-applied changes must not survive: start over with a full read.
            self.rows, self.order, self.seen = {}, [], None
            self.position, self.cookie = -1, None
            raise

    def _refresh(self, raw: sqlite3.Connection) -> list[Row]:
        cookie = int(raw.execute("PRAGMA schema_version").fetchone()[0])
        if cookie != self.cookie:
            # A schema change (a migration, a VACUUM that may renumber rowids, a
            # dropped trigger) voids everything the log promised.
            self.cookie, self.logged = cookie, _triggers_intact(raw)
            return self._full(raw)
        if not self.logged or self.position < 0:
            return self._full(raw)
        changed = self._changed_since(raw)
        if changed is None or len(changed) > max(
            _MIN_FULL_READ, len(self.rows) // _FULL_READ_SHARE
        ):
            # A gap, or so many changes that one pass is cheaper than lookups by rowid.
            return self._full(raw)
        self._reread(raw, changed)
        return self._stamp_pass(raw)

    def _changed_since(self, raw: sqlite3.Connection) -> set[int] | None:
        """Rowids logged after the folded position, or None if the log has a gap."""
        entries = raw.execute(_SELECT_LOG, (self.position,)).fetchall()
        # The folded entry itself is kept by compaction, so it must still be there;
        # ids are max + 1, so later ones follow it without holes.
        expect = self.position if self.position > 0 else 1
        changed: set[int] = set()
        for change_id, row_id in entries:
            if change_id != expect:
                return None
            if change_id > self.position:
                changed.add(int(row_id))
            expect += 1
        if self.position > 0 and not entries:
            return None
        if entries:
            self.position = int(entries[-1][0])
        return changed

    def _reread(self, raw: sqlite3.Connection, changed: set[int]) -> None:
        rows = self.rows
        build = dict_builder(REGISTRATION_COLUMNS)
        wanted = sorted(changed)
        found = dict(_fetch_values(raw, wanted))
        for rowid in wanted:
            values = found.get(rowid)
            old = rows.get(rowid)
            if values is None:
                rows.pop(rowid, None)  # gone or no longer active
            elif old is None or not _same_row(old, values):
                row = rows[rowid] = build(values)
                if old is not None and not _same(old["worker_identity"], row["worker_identity"]):
                    self.moved = True

    def _stamp_pass(self, raw: sqlite3.Connection) -> list[Row]:
        rowids, stamps = _read_stamps(raw)
        seen = self.seen
        if not self.moved and seen is not None and rowids == seen[0]:
            # Same rows in the same scan order as last time (a logged row that came
            # or went would change the list; one renamed sets ``moved``): only
            # stamps can differ from the cache, and comparing the two lists finds
            # them without a pass in Python. Re-read rows carry this snapshot's
            # stamp already, so a copy of one of them is merely redundant.
            rows, previous = self.rows, seen[1]
            if stamps != previous:
                for index, (new, old) in enumerate(zip(stamps, previous, strict=True)):
                    if new != old or type(new) is not type(old):
                        rowid = rowids[index]
                        rows[rowid] = {**rows[rowid], STAMP_COLUMN: new}
        else:
            self._regroup(raw, rowids, stamps)
        self.seen = (rowids, stamps)
        rows = self.rows
        return [rows[rowid] for rowid in self.order]

    def _regroup(self, raw: sqlite3.Connection, rowids: list[int], stamps: list[Any]) -> None:
        """Rebuild the cache for a changed set of rows (the slow path of a stamp pass)."""
        rows = self.rows
        kept: dict[int, Row] = {}
        missing: list[int] = []
        for rowid, stamp in zip(rowids, stamps, strict=True):
            row = rows.get(rowid)
            if row is None:
                # Active but not logged to this cache (a moved rowid): read it below.
                missing.append(rowid)
                continue
            if not _same(row[STAMP_COLUMN], stamp):
                row = {**row, STAMP_COLUMN: stamp}
            kept[rowid] = row
        kept.update(_fetch(raw, missing))
        if len(kept) != len(rowids):
            raise sqlite3.DatabaseError("an active row vanished inside one read transaction")
        order = self.order
        self.rows = kept
        if self.moved or len(order) != len(kept) or kept.keys() != set(order):
            self.order = _sorted(kept)
        self.moved = False

    def _full(self, raw: sqlite3.Connection) -> list[Row]:
        """Every active row, reusing each cached dict that still equals its row."""
        if self.logged:
            # Read first, in the same snapshot: later entries are what the next call folds.
            self.position = int(raw.execute(_SELECT_POSITION).fetchone()[0] or 0)
        else:
            self.position = -1
        rows = self.rows
        kept: dict[int, Row] = {}
        out: list[Row] = []
        build = dict_builder(REGISTRATION_COLUMNS)
        # Row by row from the cursor, not fetchall: the new tuples never all exist at once.
        for hit in raw.execute(_SELECT_ALL):
            rowid, values = int(hit[0]), hit[1:]
            row = rows.get(rowid)
            if row is None or not _same_row(row, values):
                row = build(values)
            kept[rowid] = row
            out.append(row)
        # The SQL order is the reference that later passes keep.
        self.rows, self.order, self.seen, self.moved = kept, list(kept), None, False
        return out


def _fetch_values(
    raw: sqlite3.Connection, rowids: list[int]
) -> Iterable[tuple[int, Sequence[Any]]]:
    """(rowid, column values) of each active row among ``rowids``, read in chunks."""
    wanted = sorted(rowids)
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        statement = (
            f"SELECT rowid, {_COLUMNS} FROM worker_registrations "
            f"WHERE status = 'active' AND rowid IN ({marks})"
        )
        for hit in raw.execute(statement, chunk):
            yield int(hit[0]), hit[1:]


def _fetch(raw: sqlite3.Connection, rowids: list[int]) -> Iterable[tuple[int, Row]]:
    """(rowid, row) of each active row among ``rowids``, read in chunks."""
    build = dict_builder(REGISTRATION_COLUMNS)
    for rowid, values in _fetch_values(raw, rowids):
        yield rowid, build(values)


def _read_stamps(raw: sqlite3.Connection) -> tuple[list[int], list[Any]]:
    """Rowid and stamp of every active row, as two lists paired by position.

    Two JSON arrays built by SQLite cost a third of fetching ten thousand rows one
    step at a time. They pair up because one aggregate pass fills both. A stamp
    column holds only NULL, TEXT (its TEXT affinity turns numbers into text; the
    store checks the declared type) or BLOB, which JSON refuses: then rows.
    """
    try:
        ids, stamps = raw.execute(_SELECT_STAMPS_JSON).fetchone()
    except sqlite3.OperationalError:
        found = raw.execute(_SELECT_STAMPS).fetchall()
        return [int(r[0]) for r in found], [r[1] for r in found]
    rowids: list[int] = json.loads(ids)
    values: list[Any] = json.loads(stamps)
    return rowids, values


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


def _sorted(rows: dict[int, Row]) -> list[int]:
    """Rowids in the order of ``ORDER BY worker_identity, rowid``."""
    return sorted(rows, key=lambda rowid: (_rank(rows[rowid]["worker_identity"]), rowid))


def _triggers_intact(raw: sqlite3.Connection) -> bool:
    """The log exists, its triggers are exactly the ones this version creates, and the
    table is as ``_rank`` and ``_read_stamps`` assume (TEXT identity and stamp, UTF-8)."""
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


def compact_active_job(raw: sqlite3.Connection, through: int) -> None:
    """Drop the log entries before ``through`` (inside the writer's open transaction).

    The entry at ``through`` stays, so new ids (max + 1) never restart below the
    folded position and a reader can tell its position is still there.
    """
    raw.execute("DELETE FROM registry_active_changes WHERE change_id < ?1", (through,))


def active_job(raw: sqlite3.Connection, cache: ActiveCache) -> list[Row]:
    """``cache.refresh`` in a read transaction of its own (see ``view_job`` for why)."""
    if raw.in_transaction:
        return cache.refresh(raw)
    raw.execute("BEGIN")
    try:
        return cache.refresh(raw)
    finally:
        raw.execute("ROLLBACK")
