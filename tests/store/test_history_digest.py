"""The store's maintained history digest equals a from-scratch recomputation after any writes."""

from __future__ import annotations

import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.policy.fingerprints import history_summary, identity_keys, is_history, row_unit
from supervisor.store import sqlite_store
from supervisor.store.sqlite import SQLiteStore, migrate, open_sqlite_store
from tests.store.rowdata import STAMP_2, registration

pytestmark = [pytest.mark.anyio, pytest.mark.sqlite_only]

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


def _row(index: int, variant: int, status: str) -> dict[str, Any]:
    pid: Any = (4000 + index, float(4000 + index), str(4000 + index), None, 4000, "x")[variant]
    ttl: Any = (90, 90.0, "90", 90.5, None, 0)[variant]
    return registration(
        f"wrk-{index}",
        status=status,
        pid=pid,
        heartbeat_ttl_seconds=ttl,
        session_id=f"sess-{index % 3}",
        generation_id=("gen-1", None, "gen-2", "", "gen-1", 7)[variant],
    )


async def _all_rows(store: SQLiteStore) -> list[dict[str, Any]]:
    return await store.read_registrations()


async def _check(store: SQLiteStore) -> None:
    view = await store.read_registry_view()
    everything = await _all_rows(store)
    assert view.history == history_summary(everything)
    assert sorted(map(row_unit, view.active)) == sorted(
        row_unit(r) for r in everything if not is_history(r)
    )
    # The scope lookup finds exactly the historical rows sharing a key, each once.
    keys = {key for row in view.active for key in identity_keys(row)}
    found = await store.read_history_scope(keys)
    want = sorted(row_unit(r) for r in everything if is_history(r) and identity_keys(r) & keys)
    assert sorted(found) == want
    async with store.write() as tx:
        rows = await tx.history_scope(keys)
    assert sorted(map(row_unit, rows)) == want
    async with store.write() as tx:
        assert await tx.history_summary() == view.history


def _raw(path: Path, statement: str, params: tuple[Any, ...]) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(statement, params)


async def _run(path: Path, ops: list[tuple[str, int, int]]) -> None:
    store = await open_sqlite_store(path)
    present: dict[int, str] = {}
    try:
        for kind, index, variant in ops:
            identity = f"wrk-{index}"
            if kind.startswith("insert") and index not in present:
                status = "active" if kind == "insert_active" else _TERMINAL[variant % 3]
                async with store.write() as tx:
                    await tx.insert_registration(_row(index, variant, status))
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
                _raw(
                    path,
                    "UPDATE worker_registrations SET pid = ?, status = ? WHERE worker_identity = ?",
                    (variant, _TERMINAL[variant % 3], identity),
                )
                present[index] = _TERMINAL[variant % 3]
            elif kind == "raw_delete" and index in present:
                _raw(
                    path, "DELETE FROM worker_registrations WHERE worker_identity = ?", (identity,)
                )
                del present[index]
            elif kind == "read":
                await _check(store)
            elif kind == "reopen":
                await store.close()
                store = await open_sqlite_store(path)
        await _check(store)
    finally:
        await store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_maintained_history_digest_equals_recomputation(ops: list[tuple[str, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as work:
        anyio.run(_run, Path(work) / "registry.db", ops)


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
