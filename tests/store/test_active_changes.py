"""``read_active_changes``: a kept count folds exactly what changed, on every store."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.store.base import ActiveChanges, Row, Store
from tests.store.rowdata import STAMP_3, change_every_way, raw_query, registration

pytestmark = pytest.mark.anyio


class _Mirror:
    """What a reader keeps from the feed: key -> row, as FleetTally keeps it."""

    def __init__(self) -> None:
        self.rows: dict[Any, Row] = {}
        self.cursor = 0
        self.last: ActiveChanges | None = None

    async def take(self, store: Store) -> ActiveChanges:
        taken = await store.read_active_changes(self.cursor)
        if taken.complete:
            self.rows = {}
        for key, row in taken.rows.items():
            if row is None:
                self.rows.pop(key, None)
            else:
                self.rows[key] = row
        self.cursor, self.last = taken.cursor, taken
        return taken

    def by_identity(self) -> dict[str, Row]:
        return {str(row["worker_identity"]): row for row in self.rows.values()}


async def _agrees(mirror: _Mirror, store: Store) -> None:
    await mirror.take(store)
    view = await store.read_registry_view()
    assert mirror.by_identity() == {str(r["worker_identity"]): r for r in view.active}
    assert mirror.last is not None
    assert mirror.last.history == view.history


async def test_every_kind_of_change_reaches_the_reader(store: Store) -> None:
    mirror = _Mirror()
    first = await mirror.take(store)
    assert first.complete
    assert not first.rows
    async with store.write() as tx:
        for identity in ("wrk-0", "wrk-1", "wrk-2", "wrk-3"):
            await tx.insert_registration(registration(identity))
    await _agrees(mirror, store)
    if store.dialect == "sqlite":
        # Only the four new rows, not a start over.
        assert mirror.last is not None
        assert not mirror.last.complete
        assert len(mirror.last.rows) == 4
    # A stamp in a write transaction, one through the heartbeat batches, a release.
    await change_every_way(store)
    await _agrees(mirror, store)
    assert sorted(mirror.by_identity()) == ["wrk-0", "wrk-1", "wrk-3"]
    assert mirror.by_identity()["wrk-3"]["last_heartbeat_at"] == STAMP_3
    if store.dialect == "sqlite":
        assert mirror.last is not None
        assert not mirror.last.complete
        # wrk-1 and wrk-3 restamped, wrk-2 gone: nothing else is handed over again.
        assert len(mirror.last.rows) == 3
        assert sum(row is None for row in mirror.last.rows.values()) == 1
    # Nothing changed: nothing to fold.
    await _agrees(mirror, store)
    if store.dialect == "sqlite":
        assert mirror.last is not None
        assert not mirror.last.complete
        assert not mirror.last.rows


async def test_a_stale_cursor_starts_over(store: Store) -> None:
    async with store.write() as tx:
        await tx.insert_registration(registration("wrk-0"))
    one, other = _Mirror(), _Mirror()
    await one.take(store)
    await other.take(store)  # another reader's take in between
    async with store.write() as tx:
        await tx.insert_registration(registration("wrk-1"))
    taken = await one.take(store)
    assert taken.complete
    assert sorted(one.by_identity()) == ["wrk-0", "wrk-1"]


async def test_a_change_by_another_connection_is_folded(store: Store, db_path: Any) -> None:
    # db_path makes this SQLite only: a hand-run UPDATE on the file, outside the writer.
    mirror = _Mirror()
    async with store.write() as tx:
        await tx.insert_registration(registration("wrk-0"))
        await tx.insert_registration(registration("wrk-1"))
    await mirror.take(store)
    raw_query(
        db_path,
        "UPDATE worker_registrations SET namespace = 'merger' WHERE worker_identity = 'wrk-1'",
    )
    raw_query(db_path, "DELETE FROM worker_registrations WHERE worker_identity = 'wrk-0'")
    await _agrees(mirror, store)
    assert mirror.last is not None
    assert not mirror.last.complete
    assert mirror.by_identity()["wrk-1"]["namespace"] == "merger"
