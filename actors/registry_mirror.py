"""An in-memory copy of ``worker_registrations`` that the registry writer keeps current."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from supervisor.store.base import Row, WriteTx

__all__ = ["MirrorJournal", "RegistryMirror"]

_ACTIVE = "active"


class MirrorJournal:
    """What one write transaction did to registrations, for the mirror to replay after commit.

    Rows whose change cannot be replayed exactly from the call's arguments
    (inserts, status changes, retirements: column affinity and defaults decide
    the stored value) are re-read inside the transaction by ``capture``, so
    the mirror holds exactly what the database will return. Heartbeats are
    replayed from their arguments: a text stamp on an active row is stored
    as given.
    """

    __slots__ = ("_beats", "_captured", "_touched")

    def __init__(self) -> None:
        self._touched: dict[str, None] = {}
        self._beats: list[tuple[str, str]] = []
        self._captured: list[Row] | None = None

    def touched(self, worker_identities: Iterable[str]) -> None:
        """Rows inserted or changed other than by a heartbeat; re-read at ``capture``."""
        for identity in worker_identities:
            self._touched[str(identity)] = None

    def heartbeats(self, beats: Sequence[tuple[str, str]]) -> None:
        """The ``(worker_identity, stamp)`` pairs given to ``WriteTx.touch_heartbeats``."""
        for identity, stamp in beats:
            if type(stamp) is str:
                self._beats.append((identity, stamp))
            else:
                # Not text: the column's affinity may store something else.
                self._touched[str(identity)] = None

    async def capture(self, tx: WriteTx) -> None:
        """Re-read the touched rows; the last statement of the transaction before commit."""
        ids = list(self._touched)
        self._captured = await tx.registrations(worker_identities=ids) if ids else []

    @property
    def captured(self) -> bool:
        return self._captured is not None


class RegistryMirror:
    """Committed registration rows by identity, replaced (never mutated) on change.

    Only the registry writer changes it, and only with what it committed, so
    a reader sees the state of some recent commit without touching the
    database. Rows handed out are shared: callers must not mutate them.
    """

    __slots__ = ("_order", "_rows", "version")

    def __init__(self) -> None:
        self._rows: dict[str, Row] | None = None
        # Sorted identities; only an insert changes the order, a heartbeat does not.
        self._order: list[str] | None = None
        #: Bumped on every change; lets a reader tell two states apart cheaply.
        self.version = 0

    @property
    def loaded(self) -> bool:
        return self._rows is not None

    def load(self, rows: Iterable[Row]) -> None:
        """Replace the whole state (at start-up, or after ``invalidate``)."""
        self._rows = {str(row["worker_identity"]): dict(row) for row in rows}
        self._order = None
        self.version += 1

    def invalidate(self) -> None:
        """Forget everything: a transaction's outcome is unknown, reload before trusting."""
        self._rows = None
        self._order = None
        self.version += 1

    async def ensure_loaded(self, tx: WriteTx) -> None:
        """Load from the writer's own transaction if the mirror was invalidated."""
        if self._rows is None:
            self.load(await tx.registrations())

    def journal(self) -> MirrorJournal:
        return MirrorJournal()

    def apply_committed_changes(self, journal: MirrorJournal) -> None:
        """Replay one committed transaction; call only after its commit succeeded."""
        rows = self._rows
        if rows is None:
            return
        if journal._captured is None:
            # Touched rows were never re-read: their stored values are unknown.
            if journal._touched:
                self.invalidate()
                return
            captured: list[Row] = []
        else:
            captured = journal._captured
        reread = set(journal._touched)
        for identity, stamp in journal._beats:
            # The UPDATE matches only active rows; a row whose status changed in
            # this transaction is re-read below instead.
            row = rows.get(identity)
            if identity not in reread and row is not None and row.get("status") == _ACTIVE:
                rows[identity] = {**row, "last_heartbeat_at": stamp}
        found = {str(row["worker_identity"]): row for row in captured}
        for identity in reread:
            fresh = found.get(identity)
            if fresh is None:
                # Gone only if its insert rolled back (rows are never deleted).
                if rows.pop(identity, None) is not None:
                    self._order = None
                continue
            if identity not in rows:
                self._order = None
            rows[identity] = dict(fresh)
        self.version += 1

    def rows(self) -> list[Row] | None:
        """Every row in ``worker_identity`` order (as the store reads them), or ``None``."""
        if self._rows is None:
            return None
        if self._order is None:
            self._order = sorted(self._rows)
        rows = self._rows
        return [rows[key] for key in self._order]

    def stats(self) -> dict[str, Any]:
        return {"loaded": self.loaded, "rows": len(self._rows or ()), "version": self.version}
