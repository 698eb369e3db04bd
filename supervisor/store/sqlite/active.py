"""The SQLite store's cache of active rows, kept exact by the change log and the beat journal."""

from __future__ import annotations

import sqlite3
from typing import Any

from supervisor.store.base import Row, row_key
from supervisor.store.change_feed import ChangeFeed
from supervisor.store.rows import dict_builder
from supervisor.store.schema.active import STAMP_COLUMN
from supervisor.store.schema.stamps import LOG_KIND_COLUMN
from supervisor.store.schema.tables import REGISTRATION_COLUMNS
from supervisor.store.sqlite.active_reads import (
    COLUMNS,
    active_count,
    fetch_rows,
    fetch_stamps,
    fetch_values,
    log_intact,
    sorted_rowids,
    stamp_lists,
    stamp_texts,
    stamps_intact,
)
from supervisor.store.sqlite.row_versions import same_row, same_value, stamped
from supervisor.store.stamp_journal import StampJournal, read_batch

__all__ = ["ActiveCache"]

# rowid breaks ties: worker_identity is a PRIMARY KEY, but a hand-run session can
# still insert several NULL identities, and their order must not depend on the path.
_ORDER = "ORDER BY worker_identity, rowid"
_SELECT_ALL = f"SELECT rowid, {COLUMNS} FROM worker_registrations WHERE status = 'active' {_ORDER}"
# The log after a position is counted in SQL, not fetched entry by entry: a heartbeat
# round written by another connection logs one entry per row.
_LOG_SPAN = (
    "SELECT count(*), min(change_id), max(change_id) "
    "FROM registry_active_changes WHERE change_id >= ?1"
)
_LOG_SPAN_KINDS = (
    f"SELECT count(*), min(change_id), max(change_id), count({LOG_KIND_COLUMN} IS 1 OR NULL) "
    "FROM registry_active_changes WHERE change_id >= ?1"
)
_LOG_ROWS = "SELECT DISTINCT row_id FROM registry_active_changes WHERE change_id > ?1"
_LOG_FULL_ROWS = f"{_LOG_ROWS} AND {LOG_KIND_COLUMN} IS NOT 1"
_LOG_STAMP_ROWS = f"{_LOG_ROWS} AND {LOG_KIND_COLUMN} IS 1"
_SELECT_POSITION = "SELECT max(change_id) FROM registry_active_changes"
#: Changed rows above this share of the cache are re-read with one full pass instead.
_FULL_READ_SHARE = 4
_MIN_FULL_READ = 256
#: Stamp-only log entries above this share of the cache: read every stamp instead (one
#: pass costs about as much as looking up an eighth of the rows by rowid, cold).
_STAMP_READ_SHARE = 8
#: Journal room beyond one beat per cached row (rows registered between two views).
_JOURNAL_SLACK = 1024


class ActiveCache:
    """The committed active rows by rowid, refreshed on the reader connection's thread.

    ``refresh`` runs inside one read transaction. It re-reads the rows the change
    log names (every insert, delete and update of any column but the heartbeat
    stamp, by any connection; schema v8). Stamps come from the store's own writer,
    which journals each heartbeat batch it commits (``StampJournal``), and from the
    log, which names every row stamped outside such a batch (schema v10). When the
    batch counter shows a batch this store did not journal, or v10 is not as this
    version creates it, a stamp pass reads the stamp of every active row instead,
    which also catches what a log cannot (a row gone without a logged delete).
    Anything the log cannot vouch for (no log, triggers not as expected, a gap in
    the log, the schema changed) makes it read every active row; a row equal to its
    cached dict keeps that dict. Dicts handed out are never changed afterwards: a
    change is a new dict.
    """

    __slots__ = (
        "batch",
        "by_identity",
        "compacted",
        "cookie",
        "feed",
        "journal",
        "listed",
        "logged",
        "moved",
        "order",
        "position",
        "rows",
        "seen",
        "stamped",
    )

    def __init__(self, journal: StampJournal | None = None) -> None:
        self.rows: dict[int, Row] = {}
        #: The largest log entry folded (0: an empty log); -1 until a read with a log.
        self.position = -1
        #: The largest entry already deleted up to by ``compact_active_job``.
        self.compacted = -1
        #: ``PRAGMA schema_version`` the triggers were checked at; None before that.
        self.cookie: int | None = None
        #: The log and its triggers are as this version creates them.
        self.logged = False
        #: Schema v10 (batch counter, stamp trigger) is too, so the journal can be used.
        self.stamped = False
        #: The writer's journal of committed heartbeat batches.
        self.journal = journal if journal is not None else StampJournal()
        #: The batch number the stamps are current with; -1 when unknown.
        self.batch = -1
        #: Rowids of ``rows`` in output order (worker_identity, then rowid).
        self.order: list[int] = []
        #: worker_identity to rowid for journaled stamps; None until needed again.
        self.by_identity: dict[Any, int] | None = None
        #: The last stamp pass's JSON arrays (``stamp_texts``), kept as text: a third of
        #: the memory of the lists, and compared without decoding. None once stamps
        #: moved any other way.
        self.seen: tuple[str, str] | None = None
        #: A row came, went or changed its identity since ``order`` was computed.
        self.moved = False
        #: ``rows`` in ``order`` as last handed out (copied out); None once either moved.
        self.listed: list[Row] | None = None
        #: Every row put or dropped, by ``row_key``, for the reader that keeps counts.
        self.feed: ChangeFeed[Any, Row | None] = ChangeFeed(lambda: len(self.rows))

    def _put(self, rowid: int, row: Row) -> None:
        old = self.rows.get(rowid)
        self.rows[rowid] = row
        self._noted(rowid, old, row)

    def _drop(self, rowid: int) -> None:
        self._noted(rowid, self.rows.pop(rowid), None)

    def _noted(self, rowid: int, old: Row | None, new: Row | None) -> None:
        """Tell the feed, by row key: a row whose identity changed is two keys."""
        feed = self.feed
        if new is not None:
            feed.note(row_key(rowid, new), new)
        if old is not None and (new is None or row_key(rowid, old) != row_key(rowid, new)):
            feed.note(row_key(rowid, old), None)

    def refresh(self, raw: sqlite3.Connection) -> list[Row]:
        """The active rows in identity order; the caller holds one read transaction."""
        self._refresh_kept(raw)
        listed = self.listed
        if listed is None:
            rows = self.rows
            listed = self.listed = [rows[rowid] for rowid in self.order]
        # A new list each call; copying the kept one costs no lookup per row.
        return listed.copy()

    def changes(
        self, raw: sqlite3.Connection, cursor: int
    ) -> tuple[int, dict[Any, Row | None], bool]:
        """The rows put or dropped since the take that returned ``cursor`` (by
        ``row_key``), or every row with True when the feed cannot say; the caller holds
        one read transaction."""
        self._refresh_kept(raw)
        taken = self.feed.take(cursor)
        if taken.changes is None:
            every: dict[Any, Row | None] = {
                row_key(rowid, row): row for rowid, row in self.rows.items()
            }
            return taken.cursor, every, True
        return taken.cursor, taken.changes, False

    def _refresh_kept(self, raw: sqlite3.Connection) -> None:
        try:
            self._refresh(raw)
        except BaseException:
            # Half-applied changes must not survive: start over with a full read.
            self.rows, self.order, self.seen, self.by_identity = {}, [], None, None
            self.position, self.cookie, self.batch, self.listed = -1, None, -1, None
            self.feed.lose()
            raise
        # Room for one round of beats while a position exists to fold them from.
        self.journal.capacity = len(self.rows) + _JOURNAL_SLACK if self.batch >= 0 else 0

    def _refresh(self, raw: sqlite3.Connection) -> None:
        cookie = int(raw.execute("PRAGMA schema_version").fetchone()[0])
        if cookie != self.cookie:
            # A schema change (a migration, a VACUUM that may renumber rowids, a
            # dropped trigger or index) voids everything the log promised.
            self.cookie, self.logged = cookie, log_intact(raw)
            self.stamped = self.logged and stamps_intact(raw)
            self._full(raw)
            return
        if not self.logged or self.position < 0:
            self._full(raw)
            return
        changed = self._changed_since(raw)
        if changed is None or len(changed[0]) > max(
            _MIN_FULL_READ, len(self.rows) // _FULL_READ_SHARE
        ):
            # A gap, or so many changes that one pass is cheaper than lookups by rowid.
            self._full(raw)
            return
        full, stamp_only = changed
        self._reread(raw, full)
        if stamp_only is None or not (self.stamped and self._fold_stamps(raw, full, stamp_only)):
            self._stamp_pass(raw)
        elif self.moved:
            self.order, self.moved, self.listed = sorted_rowids(self.rows), False, None

    def _changed_since(self, raw: sqlite3.Connection) -> tuple[set[int], set[int] | None] | None:
        """Rowids logged after the folded position: rows changed, and rows only stamped
        (None when too many to read one by one); None if the log has a gap."""
        span = _LOG_SPAN_KINDS if self.stamped else _LOG_SPAN
        count, first, last, *kinds = raw.execute(span, (self.position,)).fetchone()
        after = self.position
        if count == 0:
            return None if after > 0 else (set(), set())
        # The folded entry itself is kept by compaction, so it must still be there;
        # ids are max + 1, so later ones follow it without holes.
        if first != (after if after > 0 else 1) or last - first + 1 != count:
            return None
        self.position = int(last)
        if not self.stamped:
            return {int(r) for (r,) in raw.execute(_LOG_ROWS, (after,))}, set()
        full = {int(r) for (r,) in raw.execute(_LOG_FULL_ROWS, (after,))}
        if kinds[0] > max(_MIN_FULL_READ, len(self.rows) // _STAMP_READ_SHARE):
            return full, None
        return full, {int(r) for (r,) in raw.execute(_LOG_STAMP_ROWS, (after,))}

    def _reshaped(self) -> None:
        self.moved, self.by_identity, self.listed = True, None, None

    def _reread(self, raw: sqlite3.Connection, changed: set[int]) -> None:
        rows = self.rows
        build = dict_builder(REGISTRATION_COLUMNS)
        found = dict(fetch_values(raw, changed))
        for rowid in sorted(changed):
            values = found.get(rowid)
            old = rows.get(rowid)
            if values is None:
                if old is not None:
                    self._drop(rowid)  # gone or no longer active
                    self._reshaped()
            elif old is None or not same_row(old, values):
                if old is not None:
                    # Keep the old row's objects for unchanged values: they are shared
                    # with the rows read along with it, a new read's are not.
                    kept = zip(old.values(), values, strict=True)
                    values = [a if same_value(a, b) else b for a, b in kept]
                row = build(values)
                self._put(rowid, row)
                self.listed = None
                if old is None or not same_value(old["worker_identity"], row["worker_identity"]):
                    self._reshaped()

    def _index(self) -> dict[Any, int]:
        index = self.by_identity
        if index is None:
            index = {row["worker_identity"]: rowid for rowid, row in self.rows.items()}
            self.by_identity = index
        return index

    def _fold_stamps(self, raw: sqlite3.Connection, full: set[int], stamp_only: set[int]) -> bool:
        """Bring every stamp up to date from the journal and the stamp-only log entries;
        False when they cannot vouch for every stamp (then the stamp pass must run).

        Sound because every stamp write is logged unless a batch switched the log off
        for its own rows, and a batch counts itself: each batch number since the last
        fold being one this store journaled means no stamp write is unaccounted for.
        Whole re-read rows (``full``) carry this snapshot's stamp; the others have had
        no logged change, so their rowid, identity and status are as cached, and a
        journaled identity names the row it stamped. Stamp-only entries are read from
        this snapshot after the journal, so they win over an older journaled stamp.
        """
        through = read_batch(raw)
        if through is None or self.batch < 0:
            return False
        batches = self.journal.take(self.batch, through)
        if batches is None:
            return False
        rows = self.rows
        stamp_only -= full
        # Stamps now move outside the stamp pass, whose shortcut compares with ``seen``.
        self.seen = None
        if batches:
            latest: dict[str, str] = {}
            for beats in batches:
                latest.update(beats)
            index = self._index()
            for identity, stamp in latest.items():
                rowid = index.get(identity)
                if rowid is None or rowid in full:
                    continue  # no longer active, or re-read from this snapshot
                row = rows[rowid]
                old = row[STAMP_COLUMN]
                # Journaled stamps are str (``journaled``), so equal means the same value.
                if old.__class__ is not str or old != stamp:
                    row = row.copy()  # a copy keeps the key table: cheaper than {**row}
                    row[STAMP_COLUMN] = stamp  # the writer's object, shared by its flush
                    self._put(rowid, row)
                    self.listed = None
        if stamp_only:
            found = dict(fetch_stamps(raw, stamp_only))
            share: dict[Any, Any] = {}
            for rowid in stamp_only:
                cached = rows.get(rowid)
                if (cached is not None) != (rowid in found):
                    return False  # came or went without a logged change: not as promised
                if cached is not None and not same_value(cached[STAMP_COLUMN], found[rowid]):
                    self._put(rowid, stamped(cached, found[rowid], share))
                    self.listed = None
        # A REPLACE deletes the row it replaces unlogged, but the row replacing it is
        # logged (v10 allows no unique index but the primary key): count only then.
        if full and active_count(raw) != len(rows):
            return False
        self.batch = through
        return True

    def _mark_batch(self, raw: sqlite3.Connection) -> None:
        """The batch number this snapshot's stamps are current with, after a pass that
        read every stamp (or every row); older journaled batches are dropped."""
        number = read_batch(raw) if self.stamped else None
        self.batch = -1 if number is None else number
        if number is not None:
            self.journal.drop_through(number)

    def _stamp_pass(self, raw: sqlite3.Connection) -> None:
        self._mark_batch(raw)
        texts = stamp_texts(raw)
        if texts is not None and texts == self.seen and not self.moved:
            # Same rows in the same scan order with the same stamps as at the last
            # pass (a logged row that came or went changes the text, one renamed sets
            # ``moved``), and no stamp moved otherwise since (that clears ``seen``).
            # Re-read rows carry this snapshot's values already.
            return
        rowids, stamps = stamp_lists(raw, texts)
        self._regroup(raw, rowids, stamps)
        self.seen = texts

    def _regroup(self, raw: sqlite3.Connection, rowids: list[int], stamps: list[Any]) -> None:
        """Bring the cache to the active rows and stamps of one stamp pass."""
        rows = self.rows
        missing: list[int] = []
        share: dict[Any, Any] = {}
        for rowid, stamp in zip(rowids, stamps, strict=True):
            row = rows.get(rowid)
            if row is None:
                # Active but not logged to this cache (a moved rowid): read it below.
                missing.append(rowid)
            elif not same_value(row[STAMP_COLUMN], stamp):
                self._put(rowid, stamped(row, stamp, share))
                self.listed = None
        if missing or len(rows) != len(rowids):
            # Rows came or went without a logged change (a REPLACE, a moved rowid).
            active = set(rowids)
            for rowid in [rowid for rowid in rows if rowid not in active]:
                self._drop(rowid)
            for rowid, row in fetch_rows(raw, missing):
                self._put(rowid, row)
            if len(rows) != len(rowids):
                raise sqlite3.DatabaseError("an active row vanished inside one read transaction")
            self._reshaped()
        if self.moved:
            self.order, self.moved, self.listed = sorted_rowids(rows), False, None

    def _full(self, raw: sqlite3.Connection) -> None:
        """Every active row, reusing each cached dict that still equals its row."""
        if self.logged:
            # Read first, in the same snapshot: later entries are what the next call folds.
            self.position = int(raw.execute(_SELECT_POSITION).fetchone()[0] or 0)
        else:
            self.position = -1
        self._mark_batch(raw)
        rows = self.rows
        kept: dict[int, Row] = {}
        out: list[Row] = []
        build = dict_builder(REGISTRATION_COLUMNS)
        # Row by row from the cursor, not fetchall: the new tuples never all exist at once.
        for hit in raw.execute(_SELECT_ALL):
            rowid, values = int(hit[0]), hit[1:]
            row = rows.get(rowid)
            if row is None or not same_row(row, values):
                row = build(values)
            kept[rowid] = row
            out.append(row)
        for rowid, row in kept.items():
            old = rows.get(rowid)
            if old is not row:
                self._noted(rowid, old, row)
        for rowid in rows.keys() - kept.keys():
            self._noted(rowid, rows[rowid], None)
        # The SQL order is the reference that later passes keep.
        self.rows, self.order, self.seen, self.moved = kept, list(kept), None, False
        self.by_identity, self.listed = None, out
