"""The maintained history digest equals a from-scratch recomputation, on either engine."""

from __future__ import annotations

import itertools
import os
import re
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.policy.retirement.fingerprints import (
    history_summary,
    identity_keys,
    is_history,
    row_digest,
    row_unit,
)
from supervisor.store.base import Store
from supervisor.store.postgres.open import open_postgres_store
from supervisor.store.sqlite.open import migrate, open_sqlite_store, sqlite_store
from tests.pg_server import PgServer
from tests.store.rowdata import STAMP_2, registration

pytestmark = pytest.mark.anyio

_schemas = itertools.count(1)

_TERMINAL = ("released", "superseded", "retired")

# One operation: (kind, row index, variant). Variants vary the stored types, so a
# digest that canonicalized a value differently from the planner would show.
_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "insert_active",
                "insert_terminal",
                "release",
                "retire",
                "raw_edit",
                "raw_delete",
                "read",
                "reopen",
            ]
        ),
        st.integers(min_value=0, max_value=7),
        st.integers(min_value=0, max_value=5),
    ),
    min_size=1,
    max_size=25,
)


def _row(index: int, variant: int, status: str, engine: str = "sqlite") -> dict[str, Any]:
    pid: Any = (4000 + index, float(4000 + index), str(4000 + index), None, 4000, "x")[variant]
    if engine == "postgresql" and pid == "x":
        pid = None  # an INTEGER column there refuses text that is not a number
    ttl: Any = (90, 90.0, "90", 90.5, None, 0)[variant]
    return registration(
        f"wrk-{index}",
        status=status,
        pid=pid,
        heartbeat_ttl_seconds=ttl,
        session_id=f"sess-{index % 3}",
        generation_id=("gen-1", None, "gen-2", "", "gen-1", 7)[variant],
    )


async def _check(store: Store) -> None:
    view = await store.read_registry_view()
    everything = await store.read_registrations()
    assert view.history == history_summary(everything)
    assert sorted(map(row_unit, view.active)) == sorted(
        row_unit(r) for r in everything if not is_history(r)
    )
    # The scope lookup finds exactly the historical rows sharing a key, each once.
    keys = {key for row in view.active for key in identity_keys(row)}
    found = await store.read_history_scope(keys)
    want = sorted(row_digest(r) for r in everything if is_history(r) and identity_keys(r) & keys)
    assert sorted(found) == want
    async with store.write() as tx:
        rows = await tx.history_scope(keys)
    assert sorted(map(row_digest, rows)) == want
    async with store.write() as tx:
        assert await tx.history_summary() == view.history
    pages = await store.read_history(limit=len(everything) + 1)
    assert [r["worker_identity"] for r in pages] == [
        r["worker_identity"] for r in everything if is_history(r)
    ]


class _Engine:
    """Open a store and edit its database behind its back, on SQLite or PostgreSQL."""

    def __init__(self, name: str, where: str) -> None:
        self.name, self.where = name, where

    async def open(self) -> Store:
        if self.name == "sqlite":
            return await open_sqlite_store(Path(self.where))
        store = await open_postgres_store(self.where)
        store.history.compact_every = 1  # compact at every chance: the riskier path
        return store

    async def raw(self, statement: str, params: tuple[Any, ...]) -> None:
        """One statement on a connection of its own, as a hand-run session would."""
        if self.name == "sqlite":
            with closing(sqlite3.connect(self.where)) as lite, lite:
                lite.execute(statement, params)
            return
        conn = await asyncpg.connect(self.where)
        try:
            marks = itertools.count(1)
            text = re.sub(r"\?", lambda _: f"${next(marks)}", statement)
            await conn.execute(text, *params)
        finally:
            await conn.close()


async def _run(engine: _Engine, ops: list[tuple[str, int, int]]) -> None:
    store = await engine.open()
    present: dict[int, str] = {}
    try:
        for kind, index, variant in ops:
            identity = f"wrk-{index}"
            if kind.startswith("insert") and index not in present:
                status = "active" if kind == "insert_active" else _TERMINAL[variant % 3]
                async with store.write() as tx:
                    await tx.insert_registration(_row(index, variant, status, engine.name))
                present[index] = status
            elif kind == "release" and present.get(index) == "active":
                async with store.write() as tx:
                    await tx.set_status(
                        identity,
                        expected_status="active",
                        new_status="released",
                        stamp_column="released_at",
                        stamp=STAMP_2,
                    )
                present[index] = "released"
            elif kind == "retire" and present.get(index) == "active":
                async with store.write() as tx:
                    (row,) = await tx.registrations(worker_identities=[identity])
                    await tx.retire_guarded(row, retired_at=STAMP_2, retired_by="t", reason="r")
                present[index] = "retired"
            elif kind == "raw_edit" and index in present:
                # Outside the store, as a hand-run session would: the triggers still log it.
                await engine.raw(
                    "UPDATE worker_registrations SET pid = ?, status = ? WHERE worker_identity = ?",
                    (variant, _TERMINAL[variant % 3], identity),
                )
                present[index] = _TERMINAL[variant % 3]
            elif kind == "raw_delete" and index in present:
                await engine.raw(
                    "DELETE FROM worker_registrations WHERE worker_identity = ?", (identity,)
                )
                del present[index]
            elif kind == "read":
                await _check(store)
            elif kind == "reopen":
                await store.close()
                store = await engine.open()
        await _check(store)
    finally:
        await store.close()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_maintained_history_digest_equals_recomputation(
    engine: str, request: pytest.FixtureRequest, ops: list[tuple[str, int, int]]
) -> None:
    if engine == "sqlite":
        with tempfile.TemporaryDirectory() as work:
            anyio.run(_run, _Engine(engine, str(Path(work) / "registry.db")), ops)
        return
    server: PgServer = request.getfixturevalue("pg_server")  # session-scoped: one per run
    name = f"h{os.getpid()}_{next(_schemas)}"
    server.sql(f"CREATE SCHEMA {name}")
    try:
        anyio.run(_run, _Engine(engine, f"{server.url()}&search_path={name}"), ops)
    finally:
        server.sql(f"DROP SCHEMA {name} CASCADE")


async def test_rows_terminal_before_the_upgrade_enter_the_digest(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    await migrate(path, target_version=3)
    with closing(sqlite3.connect(path)) as conn, conn:
        for index, status in enumerate(("active", "retired", "released")):
            row = _row(index, index, status)
            # Columns a later version adds are not there yet at version 3.
            for later in ("client_pid", "client_process_start_time"):
                row.pop(later, None)
            names = ", ".join(row)
            marks = ", ".join("?" * len(row))
            conn.execute(
                f"INSERT INTO worker_registrations ({names}) VALUES ({marks})", tuple(row.values())
            )
    async with sqlite_store(path) as store:
        view = await store.read_registry_view()
        assert view.history.count == 2
        assert view.history == history_summary(await store.read_registrations())


async def test_the_change_log_is_compacted_by_later_writes(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    async with sqlite_store(path) as store:
        for index in range(5):
            async with store.write() as tx:
                await tx.insert_registration(_row(index, 0, "retired"))
        await store.read_registry_view()  # folds the five changes
        async with store.write() as tx:
            await tx.insert_registration(_row(9, 0, "active"))
        with closing(sqlite3.connect(path)) as conn:
            left = conn.execute("SELECT count(*) FROM registry_history_changes").fetchone()[0]
        # Only the newest folded change is kept (so ids never restart below it).
        assert left == 1
        view = await store.read_registry_view()
        assert view.history == history_summary(await store.read_registrations())


async def test_a_scope_lookup_after_another_store_compacted_is_complete(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    keys = {("session_id", "sess-0")}
    async with sqlite_store(path) as a, sqlite_store(path) as b:
        async with a.write() as tx:
            await tx.insert_registration(_row(0, 0, "retired"))
        assert len(await a.read_history_scope(keys)) == 1  # cached in a
        for index in (3, 6):
            async with b.write() as tx:  # each compacts what b folded before
                await tx.insert_registration(_row(index, 0, "retired"))
            await b.read_registry_view()
        async with b.write() as tx:
            await tx.insert_registration(_row(1, 0, "active"))
        everything = await a.read_registrations()
        want = sorted(
            row_digest(r) for r in everything if is_history(r) and identity_keys(r) & keys
        )
        assert len(want) == 3
        assert sorted(await a.read_history_scope(keys)) == want
