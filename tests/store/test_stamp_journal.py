"""Journaled heartbeat batches: folded without reading every stamp, distrusted when in doubt."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, cast

import pytest

from supervisor.store.base import CommitChain
from supervisor.store.schema.stamps import stamp_trigger_sql
from supervisor.store.schema.tables import CURRENT_VERSION
from supervisor.store.sqlite import active as sqlite_active
from supervisor.store.sqlite import active_reads as sqlite_active_reads
from supervisor.store.sqlite.open import migrate, sqlite_store
from supervisor.store.sqlite.store import SQLiteStore
from supervisor.store.stamp_journal import StampJournal
from tests.store.rowdata import STAMP_2, STAMP_3, raw_query, registration
from tests.store.test_active_cache import fresh_active, typed

pytestmark = [pytest.mark.anyio, pytest.mark.sqlite_only]

_IDS = [f"wrk-{index}" for index in range(6)]
_BUMP = "UPDATE registry_stamp_batches SET batch = batch + 1, unlogged = 1"


def _raw(path: Path, *statements: str | tuple[str, tuple[Any, ...]]) -> None:
    """Statements in one autocommitted session each, as a hand-run sqlite3 would."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for statement in statements:
            text, params = statement if isinstance(statement, tuple) else (statement, ())
            conn.execute(text, params)


@pytest.fixture
def stamp_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the view's passes over every active stamp."""
    calls: list[int] = []
    real = sqlite_active_reads.stamp_texts

    def counted(raw: sqlite3.Connection) -> tuple[str, str] | None:
        calls.append(1)
        return real(raw)

    monkeypatch.setattr(sqlite_active, "stamp_texts", counted)
    return calls


async def _fleet(store: SQLiteStore) -> list[dict[str, Any]]:
    async with store.write() as tx:
        for identity in _IDS:
            await tx.insert_registration(registration(identity))
    return (await store.read_registry_view()).active


async def _exact(store: SQLiteStore, path: Path) -> list[dict[str, Any]]:
    active = (await store.read_registry_view()).active
    assert typed(active) == typed(fresh_active(path))
    return active


async def test_own_batches_are_folded_without_reading_every_stamp(
    db_path: Path, stamp_passes: list[int]
) -> None:
    async with sqlite_store(db_path) as store:
        before = await _fleet(store)
        assert await store.submit_heartbeats(
            [("wrk-1", STAMP_2), ("wrk-4", STAMP_2)], CommitChain()
        )
        assert await store.submit_heartbeats([("wrk-4", STAMP_3)], CommitChain())
        # The same stamp again is no change: the row keeps its dict.
        assert await store.submit_heartbeats(
            [("wrk-5", before[5]["last_heartbeat_at"])], CommitChain()
        )
        after = await _exact(store, db_path)
        assert [a is b for a, b in zip(before, after, strict=True)] == [
            True,
            False,
            True,
            True,
            False,
            True,
        ]
        assert (after[1]["last_heartbeat_at"], after[4]["last_heartbeat_at"]) == (STAMP_2, STAMP_3)
        assert all(a is b for a, b in zip(after, await _exact(store, db_path), strict=True))
        assert stamp_passes == []
        assert raw_query(db_path, "SELECT batch, unlogged FROM registry_stamp_batches") == [(3, 0)]


async def test_stamps_written_elsewhere_are_logged_and_read_alone(
    db_path: Path, stamp_passes: list[int]
) -> None:
    async with sqlite_store(db_path) as store:
        before = await _fleet(store)
        _raw(
            db_path,
            ("UPDATE worker_registrations SET last_heartbeat_at = ? WHERE rowid = 3", (STAMP_2,)),
        )
        async with store.write() as tx:
            await tx.touch_heartbeats([("wrk-0", STAMP_3)])
        after = await _exact(store, db_path)
        assert [a is b for a, b in zip(before, after, strict=True)] == [
            False,
            True,
            False,
            True,
            True,
            True,
        ]
        assert stamp_passes == []


async def test_a_rewritten_row_wins_over_an_older_journaled_stamp(db_path: Path) -> None:
    async with sqlite_store(db_path) as store:
        await _fleet(store)
        assert await store.submit_heartbeats([("wrk-2", STAMP_2)], CommitChain())
        _raw(
            db_path,
            (
                "UPDATE worker_registrations SET pid = 99, last_heartbeat_at = ? "
                "WHERE worker_identity = 'wrk-2'",
                (STAMP_3,),
            ),
        )
        assert (await _exact(store, db_path))[2]["pid"] == 99
        assert await store.submit_heartbeats([("wrk-3", STAMP_2)], CommitChain())
        row = registration("wrk-3", last_heartbeat_at=STAMP_3, pid=98)
        marks = ", ".join("?" * len(row))
        _raw(
            db_path,
            (
                f"INSERT OR REPLACE INTO worker_registrations ({', '.join(row)}) VALUES ({marks})",
                tuple(row.values()),
            ),
        )
        active = await _exact(store, db_path)
        assert [(r["pid"], r["last_heartbeat_at"]) for r in active[2:4]] == [
            (99, STAMP_3),
            (98, STAMP_3),
        ]


async def test_another_stores_batches_send_the_view_through_every_stamp(
    db_path: Path, stamp_passes: list[int]
) -> None:
    async with sqlite_store(db_path) as store, sqlite_store(db_path) as other:
        await _fleet(store)
        assert await other.submit_heartbeats([("wrk-3", STAMP_2)], CommitChain())
        assert await store.submit_heartbeats([("wrk-0", STAMP_2)], CommitChain())
        active = await _exact(store, db_path)
        assert [r["last_heartbeat_at"] for r in active[:4:3]] == [STAMP_2, STAMP_2]
        assert stamp_passes == [1]
        # The pass set the position to the batch it saw: the store's next batch folds.
        assert await store.submit_heartbeats([("wrk-1", STAMP_3)], CommitChain())
        await _exact(store, db_path)
        assert stamp_passes == [1]


async def test_stamps_moved_after_a_fold_are_not_compared_with_an_older_pass(
    db_path: Path,
) -> None:
    async with sqlite_store(db_path) as store:
        first = await _fleet(store)
        old = first[1]["last_heartbeat_at"]
        # A foreign batch makes the view read every stamp (and remember them) ...
        _raw(
            db_path,
            "BEGIN IMMEDIATE",
            _BUMP,
            "UPDATE registry_stamp_batches SET unlogged = 0",
            "COMMIT",
        )
        await _exact(store, db_path)
        # ... then an own beat is folded from the journal ...
        assert await store.submit_heartbeats([("wrk-1", STAMP_2)], CommitChain())
        await _exact(store, db_path)
        # ... and another foreign batch puts back the stamp that pass remembered.
        _raw(
            db_path,
            "BEGIN IMMEDIATE",
            _BUMP,
            ("UPDATE worker_registrations SET last_heartbeat_at = ? WHERE rowid = 2", (old,)),
            "UPDATE registry_stamp_batches SET unlogged = 0",
            "COMMIT",
        )
        assert (await _exact(store, db_path))[1]["last_heartbeat_at"] == old


async def test_beats_the_journal_cannot_vouch_for_are_logged(db_path: Path) -> None:
    async with sqlite_store(db_path) as store:
        await _fleet(store)
        # A stamp of another type would read back as text: not journaled, logged.
        assert await store.submit_heartbeats([("wrk-0", cast(Any, 5))], CommitChain())
        assert (await _exact(store, db_path))[0]["last_heartbeat_at"] == "5"
        assert raw_query(db_path, "SELECT batch FROM registry_stamp_batches") == [(0,)]


async def test_the_counter_refuses_what_would_hide_a_stamp_write(db_path: Path) -> None:
    async with sqlite_store(db_path):
        pass
    for statement in (
        "UPDATE registry_stamp_batches SET unlogged = 1",
        "UPDATE registry_stamp_batches SET batch = batch - 1",
        "UPDATE registry_stamp_batches SET batch = batch + 2, unlogged = 1",
        "UPDATE registry_stamp_batches SET batch = 'x'",
        "UPDATE registry_stamp_batches SET batch = 2.5",
        "UPDATE registry_stamp_batches SET id = 2",
        "INSERT OR REPLACE INTO registry_stamp_batches VALUES (1, 5, 0)",
        "INSERT INTO registry_stamp_batches VALUES (2, 5, 0)",
        "DELETE FROM registry_stamp_batches",
    ):
        with pytest.raises(sqlite3.IntegrityError):
            _raw(db_path, statement)
    _raw(db_path, _BUMP, "UPDATE registry_stamp_batches SET unlogged = 0")
    assert raw_query(db_path, "SELECT id, batch, unlogged FROM registry_stamp_batches") == [
        (1, 1, 0)
    ]


@pytest.mark.parametrize(
    "damage",
    [
        "DROP TRIGGER registry_stamps_logged",
        "DROP TRIGGER registry_stamp_batches_update",
        "CREATE UNIQUE INDEX odd ON worker_registrations (process_identity)",
    ],
)
async def test_a_damaged_v10_falls_back_to_reading_every_stamp(
    db_path: Path, stamp_passes: list[int], damage: str
) -> None:
    async with sqlite_store(db_path) as store:
        await _fleet(store)
        _raw(db_path, damage)
        await _exact(store, db_path)
        stamp_passes.clear()
        # Unlogged now (or not vouched for): only a pass over every stamp sees these.
        _raw(
            db_path,
            _BUMP if "batches" in damage else "SELECT 1",
            (
                "UPDATE worker_registrations SET last_heartbeat_at = ? WHERE rowid % 2 = 0",
                (STAMP_3,),
            ),
        )
        assert await store.submit_heartbeats([("wrk-0", STAMP_2)], CommitChain())
        await _exact(store, db_path)
        assert stamp_passes == [1]


async def test_a_committed_unlogged_flag_is_distrusted_until_a_pass_after_it(
    db_path: Path, stamp_passes: list[int]
) -> None:
    async with sqlite_store(db_path) as store:
        await _fleet(store)
        _raw(
            db_path,
            _BUMP,
            ("UPDATE worker_registrations SET last_heartbeat_at = ? WHERE rowid = 1", (STAMP_2,)),
        )
        await _exact(store, db_path)
        _raw(
            db_path,
            ("UPDATE worker_registrations SET last_heartbeat_at = ? WHERE rowid = 2", (STAMP_2,)),
        )
        _raw(db_path, "UPDATE registry_stamp_batches SET unlogged = 0")
        await _exact(store, db_path)
        assert stamp_passes == [1, 1]
        await _exact(store, db_path)
        assert stamp_passes == [1, 1]


async def test_v9_database_upgrades_to_v10(db_path: Path) -> None:
    await migrate(db_path, target_version=9)
    _raw(db_path, "INSERT INTO registry_active_changes (row_id) VALUES (7)")
    async with sqlite_store(db_path) as store:
        assert store.applied_migrations == tuple(range(10, CURRENT_VERSION + 1))
        await _exact(store, db_path)
    assert raw_query(db_path, "SELECT batch, unlogged FROM registry_stamp_batches") == [(0, 0)]
    assert raw_query(db_path, "SELECT row_id, stamp_only FROM registry_active_changes") == [
        (7, None)
    ]
    triggers = dict(
        raw_query(
            db_path,
            "SELECT name, sql FROM sqlite_master "
            "WHERE type = 'trigger' AND name LIKE 'registry_stamp%'",
        )
    )
    assert triggers == dict(stamp_trigger_sql())


def test_the_journal_hands_out_only_complete_runs_and_stays_bounded() -> None:
    journal = StampJournal()
    journal.add(1, [("a", "s")])
    assert journal.take(0, 1) is None  # capacity 0: nothing is held before a view
    journal.capacity = 3
    journal.add(2, [("a", "s")])
    journal.add(3, [("b", "s")])
    assert journal.take(-1, 3) is None  # no position to fold from
    journal.add(4, [("a", "t")])
    journal.add(5, [("b", "t")])
    assert journal.take(3, 3) == []
    assert journal.take(3, 6) is None  # 6 was never journaled here
    journal.add(7, [("a", "u"), ("b", "u")])
    journal.add(8, [("c", "u")])
    assert journal.take(6, 8) == [[("a", "u"), ("b", "u")], [("c", "u")]]
    journal.add(9, [("a", "v"), ("b", "v")])
    journal.add(10, [("c", "v"), ("d", "v")])  # over capacity: everything is dropped
    journal.add(11, [("a", "w")])  # ... and nothing held until a view re-arms it
    assert journal.take(8, 11) is None
    assert journal.capacity == 0


async def test_a_row_renamed_between_two_stamp_passes_moves(
    db_path: Path, stamp_passes: list[int]
) -> None:
    async with sqlite_store(db_path) as store:
        await _fleet(store)
        _raw(db_path, "DROP TRIGGER registry_stamps_logged")
        await _exact(store, db_path)
        await _exact(store, db_path)
        # Same rowids and stamps as the last pass: only the rename tells the order moved.
        _raw(db_path, "UPDATE worker_registrations SET worker_identity = 'wrk-9' WHERE rowid = 1")
        active = await _exact(store, db_path)
        assert [r["worker_identity"] for r in active][-2:] == ["wrk-5", "wrk-9"]
        assert len(stamp_passes) == 2
