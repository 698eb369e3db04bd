"""The SQLite store's cached active rows equal a fresh read after any writes, by anyone."""

from __future__ import annotations

import sqlite3
import tempfile
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.store import REGISTRATION_COLUMNS
from supervisor.store.base import CommitChain
from supervisor.store.schema.active import active_trigger_sql
from supervisor.store.schema.stamps import stamp_trigger_sql
from supervisor.store.schema.tables import CURRENT_VERSION
from supervisor.store.sqlite.open import migrate, open_sqlite_store, sqlite_store
from supervisor.store.sqlite.store import SQLiteStore
from tests.store.rowdata import STAMP_2, STAMP_3, raw_query, registration

pytestmark = [pytest.mark.anyio, pytest.mark.sqlite_only]

_COLUMNS = ", ".join(REGISTRATION_COLUMNS)
#: Values a hand-run session may write, of every storage class a column can hold.
_ODD_VALUES: tuple[Any, ...] = (
    None,
    0,
    -0.0,
    0.0,
    1.5,
    "",
    "x;y,'z\"",
    "nul\x00inside",
    "é",
    b"\x00blob",
    STAMP_3,
)
_STAMPS = (STAMP_2, STAMP_3, "2024-05-01T10:15:00.000000Z")

_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                # The daemon's own traffic, several times over so that it dominates.
                *("register", "beat", "beat_many", "beat_many", "read", "read") * 2,
                "release",
                "retire",
                "raw_insert",
                "raw_stamp",
                "raw_update",
                "raw_status",
                "raw_delete",
                "raw_rowid",
                "raw_replace",
                "raw_batch",
                "raw_counter",
                "raw_schema",
                "read",
                "reopen",
            ]
        ),
        st.integers(min_value=0, max_value=9),
        st.integers(min_value=0, max_value=len(_ODD_VALUES) - 1),
        # The columns that move a row in or out of the view or within its order, often.
        st.one_of(
            st.sampled_from(("worker_identity", "status", "last_heartbeat_at")),
            st.sampled_from(REGISTRATION_COLUMNS),
        ),
    ),
    min_size=1,
    max_size=30,
)


def fresh_active(path: Path) -> list[dict[str, Any]]:
    """What a from-scratch SELECT of the active rows returns (today's order)."""
    with closing(sqlite3.connect(path)) as conn:
        found = conn.execute(
            f"SELECT {_COLUMNS} FROM worker_registrations WHERE status = 'active' "
            "ORDER BY worker_identity, rowid"
        ).fetchall()
    return [dict(zip(REGISTRATION_COLUMNS, row, strict=True)) for row in found]


def typed(rows: list[dict[str, Any]]) -> list[list[tuple[str, type, str]]]:
    """Rows as (column, type, repr): equal only if values and types are (0.0 vs -0.0 too)."""
    return [[(k, type(v), repr(v)) for k, v in row.items()] for row in rows]


def _raw(path: Path, statement: str, params: tuple[Any, ...] = ()) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(statement, params)


async def _check(store: SQLiteStore, path: Path) -> None:
    first = (await store.read_registry_view()).active
    assert typed(first) == typed(fresh_active(path))
    again = (await store.read_registry_view()).active
    assert len(again) == len(first)
    # Nothing changed in between: every row is the very dict handed out before.
    assert all(a is b for a, b in zip(first, again, strict=True))
    # The gates' read of active rows shares the cache: the same rows, the same dicts.
    gate = await store.read_registrations(status="active")
    assert all(a is b for a, b in zip(first, gate, strict=True))
    assert len(gate) == len(first)


async def _apply(store: SQLiteStore, path: Path, op: tuple[str, int, int, str]) -> SQLiteStore:
    kind, index, variant, column = op
    identity = f"wrk-{index}"
    stamp = (*_STAMPS, f"2024-05-01T10:{index:02d}:{variant:02d}.000000Z")[variant % 4]
    if kind == "register":
        row = registration(identity, pid=4000 + variant, session_id=f"sess-{variant}")
        try:
            async with store.write() as tx:
                await tx.insert_registration(row)
        except Exception:
            pass  # the identity exists already (the PRIMARY KEY refuses it)
    elif kind == "beat":
        async with store.write() as tx:
            await tx.touch_heartbeats([(identity, stamp)])
    elif kind == "beat_many":
        # The set-based batch statement, journaled; False when some row is not active.
        if variant % 4 == 0:
            beats = [(f"wrk-{i}", stamp) for i in range(10)]
            await store.submit_heartbeats(beats, CommitChain())
            await store.submit_heartbeats(beats[index : index + 2], CommitChain())
        else:
            found = raw_query(
                path,
                "SELECT worker_identity FROM worker_registrations "
                "WHERE status = 'active' AND typeof(worker_identity) = 'text'",
            )
            beats = [(str(r[0]), stamp) for r in found][index % 3 :: variant % 3 + 1]
            if beats:
                assert await store.submit_heartbeats(beats, CommitChain())
    elif kind in ("release", "retire"):
        async with store.write() as tx:
            if kind == "release":
                await tx.set_status(
                    identity,
                    expected_status="active",
                    new_status="released",
                    stamp_column="released_at",
                    stamp=STAMP_2,
                )
            else:
                for row in await tx.registrations(worker_identities=[identity]):
                    if row["status"] == "active":
                        await tx.retire_guarded(row, retired_at=STAMP_2, retired_by="t", reason="r")
    elif kind == "raw_insert":
        # NULL identities are allowed by SQLite's non-rowid PRIMARY KEY; order ties by rowid.
        value = (identity, None, f"raw-{variant}", b"blob-id")[variant % 4]
        row = {**registration("x"), "worker_identity": value}
        row["last_heartbeat_at"] = _ODD_VALUES[variant]
        marks = ", ".join("?" * len(REGISTRATION_COLUMNS))
        with suppress(sqlite3.IntegrityError):
            _raw(
                path,
                f"INSERT INTO worker_registrations ({_COLUMNS}) VALUES ({marks})",
                tuple(row.get(c) for c in REGISTRATION_COLUMNS),
            )
    elif kind == "raw_stamp":
        _raw(
            path,
            "UPDATE worker_registrations SET last_heartbeat_at = ? WHERE worker_identity = ?",
            (_ODD_VALUES[variant], identity),
        )
    elif kind == "raw_update":
        value = _ODD_VALUES[variant]
        if column == "status":
            value = ("active", "released", "retired")[variant % 3]
        with suppress(sqlite3.IntegrityError):
            _raw(
                path,
                f"UPDATE worker_registrations SET {column} = ? WHERE worker_identity = ? "
                "OR (worker_identity IS NULL AND ? % 2 = 0)",
                (value, identity, index),
            )
    elif kind == "raw_status":
        _raw(
            path,
            "UPDATE worker_registrations SET status = ? WHERE worker_identity = ?",
            (("active", "released")[variant % 2], identity),
        )
    elif kind == "raw_delete":
        _raw(path, "DELETE FROM worker_registrations WHERE worker_identity = ?", (identity,))
    elif kind == "raw_rowid":
        # Moves a row to a new rowid without changing any column.
        _raw(
            path,
            "UPDATE worker_registrations SET rowid = (SELECT max(rowid) + 1 "
            "FROM worker_registrations) WHERE worker_identity = ?",
            (identity,),
        )
    elif kind == "raw_replace":
        _raw_replace(path, identity, variant)
    elif kind == "raw_batch":
        # Another store's journaled batch: numbered and unlogged, so only the counter
        # tells this store that stamps moved without it.
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_BUMP)
            conn.execute(
                "UPDATE worker_registrations SET last_heartbeat_at = ? WHERE status = 'active' "
                "AND (worker_identity = ? OR rowid % 3 = ?)",
                (stamp, identity, variant % 3),
            )
            conn.execute("UPDATE registry_stamp_batches SET unlogged = 0")
            conn.execute("COMMIT")
    elif kind == "raw_counter":
        _raw_counter(path, variant, stamp)
    elif kind == "raw_schema":
        _raw_schema(path, variant)
    elif kind == "read":
        await _check(store, path)
    elif kind == "reopen":
        await store.close()
        store = await open_sqlite_store(path)
    return store


_BUMP = "UPDATE registry_stamp_batches SET batch = batch + 1, unlogged = 1"


def _raw_replace(path: Path, identity: str, variant: int) -> None:
    """A REPLACE deletes the row in its way without a logged delete."""
    other = f"wrk-{(variant + 1) % 10}"
    if variant % 3 == 0:
        row = registration(identity, pid=5000 + variant)
        marks = ", ".join("?" * len(REGISTRATION_COLUMNS))
        _raw(
            path,
            f"INSERT OR REPLACE INTO worker_registrations ({_COLUMNS}) VALUES ({marks})",
            tuple(row.get(c) for c in REGISTRATION_COLUMNS),
        )
    elif variant % 3 == 1:
        _raw(
            path,
            "UPDATE OR REPLACE worker_registrations SET worker_identity = ? "
            "WHERE worker_identity = ?",
            (identity, other),
        )
    else:
        # With a hand-made unique index on the stamp, a stamp write alone can replace.
        _raw(
            path,
            "UPDATE OR REPLACE worker_registrations SET last_heartbeat_at = (SELECT "
            "last_heartbeat_at FROM worker_registrations WHERE worker_identity = ?) "
            "WHERE worker_identity = ?",
            (other, identity),
        )


def _raw_counter(path: Path, variant: int, stamp: str) -> None:
    """A hand-run session pokes at the batch counter; the guards refuse what would let
    stamps move unseen, and what they allow must not fool the cache either."""
    statements = (
        # Refused: switching the log off without a new number, counting back, a row more.
        "UPDATE registry_stamp_batches SET unlogged = 1",
        "UPDATE registry_stamp_batches SET batch = batch - 1",
        "INSERT OR REPLACE INTO registry_stamp_batches VALUES (1, 0, 0)",
        "DELETE FROM registry_stamp_batches",
        "UPDATE registry_stamp_batches SET batch = 'x'",
    )
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        if variant < len(statements):
            with suppress(sqlite3.IntegrityError):
                conn.execute(statements[variant])
            return
        # Allowed: a number switched on and left committed, stamps written meanwhile
        # (unlogged), and switched off again by a later session.
        with suppress(sqlite3.IntegrityError):
            conn.execute(_BUMP)
        conn.execute(
            "UPDATE worker_registrations SET last_heartbeat_at = ? WHERE rowid % 2 = ?",
            (stamp, variant % 2),
        )
        if variant % 3:
            conn.execute("UPDATE registry_stamp_batches SET unlogged = 0")


def _raw_schema(path: Path, variant: int) -> None:
    """Drop or add what the cache relies on; later ops then run on that schema."""
    statements = (
        "DROP TRIGGER IF EXISTS registry_stamps_logged",
        "DROP TRIGGER IF EXISTS registry_stamp_batches_update",
        "CREATE UNIQUE INDEX IF NOT EXISTS odd_unique ON worker_registrations (last_heartbeat_at)",
        "DROP INDEX IF EXISTS odd_unique",
        "VACUUM",
    )
    if variant < len(statements):
        with suppress(sqlite3.IntegrityError):
            _raw(path, statements[variant])
        return
    # Put back what an earlier op dropped (the texts must be exactly the store's).
    for _, statement in stamp_trigger_sql():
        with suppress(sqlite3.OperationalError):
            _raw(path, statement)


async def _run(path: Path, ops: list[tuple[str, int, int, str]]) -> None:
    store = await open_sqlite_store(path)
    try:
        # A fleet to start from, already in the cache.
        async with store.write() as tx:
            for index in range(0, 10, 2):
                await tx.insert_registration(registration(f"wrk-{index}", pid=3000 + index))
        await store.read_registry_view()
        for op in ops:
            store = await _apply(store, path, op)
        await _check(store, path)
    finally:
        await store.close()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_cached_active_rows_equal_a_fresh_read(ops: list[tuple[str, int, int, str]]) -> None:
    with tempfile.TemporaryDirectory() as work:
        anyio.run(_run, Path(work) / "registry.db", ops)


async def test_unchanged_rows_keep_their_dict_and_changed_ones_get_a_new_one(
    db_path: Path,
) -> None:
    async with sqlite_store(db_path) as store:
        async with store.write() as tx:
            for index in range(4):
                await tx.insert_registration(registration(f"wrk-{index}"))
        before = (await store.read_registry_view()).active
        snapshot = [dict(row) for row in before]
        async with store.write() as tx:
            await tx.touch_heartbeats([("wrk-1", STAMP_2)])
        _raw(db_path, "UPDATE worker_registrations SET pid = 7 WHERE worker_identity = 'wrk-2'")
        after = (await store.read_registry_view()).active
        assert [a is b for a, b in zip(before, after, strict=True)] == [True, False, False, True]
        assert after[1]["last_heartbeat_at"] == STAMP_2
        assert after[2]["pid"] == 7
        # What was handed out before is untouched.
        assert before == snapshot


async def test_a_renamed_row_moves_to_its_new_place(db_path: Path) -> None:
    async with sqlite_store(db_path) as store:
        async with store.write() as tx:
            for index in range(3):
                await tx.insert_registration(registration(f"wrk-{index}"))
        await store.read_registry_view()
        _raw(
            db_path,
            "UPDATE worker_registrations SET worker_identity = 'wrk-9' "
            "WHERE worker_identity = 'wrk-0'",
        )
        view = await store.read_registry_view()
        assert [r["worker_identity"] for r in view.active] == ["wrk-1", "wrk-2", "wrk-9"]
        assert typed(view.active) == typed(fresh_active(db_path))


async def test_batched_heartbeats_log_nothing_and_the_log_is_compacted(db_path: Path) -> None:
    async with sqlite_store(db_path) as store:
        async with store.write() as tx:
            for index in range(3):
                await tx.insert_registration(registration(f"wrk-{index}"))
        await store.read_registry_view()
        beats = [(f"wrk-{index}", STAMP_2) for index in range(3)]
        assert await store.submit_heartbeats(beats, CommitChain())
        async with store.write() as tx:
            pass
        # Only the folded position is left: the three inserts are compacted, and the
        # journaled batch logged nothing.
        assert raw_query(db_path, "SELECT count(*) FROM registry_active_changes") == [(1,)]
        assert raw_query(db_path, "SELECT batch, unlogged FROM registry_stamp_batches") == [(1, 0)]
        view = await store.read_registry_view()
        assert typed(view.active) == typed(fresh_active(db_path))
        # A beat inside a write transaction is not journaled: its row is logged, as
        # stamp-only, and the next view reads just that stamp.
        async with store.write() as tx:
            await tx.touch_heartbeats([("wrk-0", STAMP_3)])
        assert raw_query(
            db_path, "SELECT row_id, stamp_only FROM registry_active_changes WHERE stamp_only"
        ) == [(1, 1)]
        after = (await store.read_registry_view()).active
        assert typed(after) == typed(fresh_active(db_path))
        assert after[0]["last_heartbeat_at"] == STAMP_3
        assert after[1:] == view.active[1:]
        assert all(a is b for a, b in zip(after[1:], view.active[1:], strict=True))


async def test_a_schema_change_or_a_gap_in_the_log_falls_back_to_a_full_read(
    db_path: Path,
) -> None:
    async with sqlite_store(db_path) as store:
        async with store.write() as tx:
            await tx.insert_registration(registration("wrk-1"))
            await tx.insert_registration(registration("wrk-2"))
        first = (await store.read_registry_view()).active
        # A hand-run session drops a trigger and then edits: the view must not trust the log.
        _raw(db_path, "DROP TRIGGER registry_active_update")
        _raw(db_path, "UPDATE worker_registrations SET pid = 1 WHERE worker_identity = 'wrk-1'")
        second = (await store.read_registry_view()).active
        assert typed(second) == typed(fresh_active(db_path))
        assert second[1] is first[1]  # still reused where equal
        _raw(db_path, "UPDATE worker_registrations SET pid = 2 WHERE worker_identity = 'wrk-2'")
        assert typed((await store.read_registry_view()).active) == typed(fresh_active(db_path))
    # Reopened with the trigger back, then the log loses entries the cache never read.
    _raw(db_path, active_trigger_sql(REGISTRATION_COLUMNS)[1][1])
    async with sqlite_store(db_path) as store:
        await store.read_registry_view()
        _raw(db_path, "UPDATE worker_registrations SET pid = 3 WHERE worker_identity = 'wrk-1'")
        _raw(db_path, "DELETE FROM registry_active_changes")
        assert typed((await store.read_registry_view()).active) == typed(fresh_active(db_path))


async def test_v7_database_upgrades_to_v8_with_the_log_and_its_triggers(db_path: Path) -> None:
    await migrate(db_path, target_version=7)
    row = registration("wrk-old")
    marks = ", ".join("?" * len(REGISTRATION_COLUMNS))
    _raw(
        db_path,
        f"INSERT INTO worker_registrations ({_COLUMNS}) VALUES ({marks})",
        tuple(row.get(c) for c in REGISTRATION_COLUMNS),
    )
    async with sqlite_store(db_path) as store:
        assert store.applied_migrations == tuple(range(8, CURRENT_VERSION + 1))
        triggers = dict(
            raw_query(
                db_path,
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
                "AND name LIKE 'registry_active_%'",
            )
        )
        assert triggers == dict(active_trigger_sql(REGISTRATION_COLUMNS))
        assert (await store.read_registry_view()).active == [
            {c: row.get(c) for c in REGISTRATION_COLUMNS}
        ]
