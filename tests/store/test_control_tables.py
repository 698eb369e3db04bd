"""Control-plane tables: upgrade from v2 keeps rows, refused kinds, uniqueness, guarded updates."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from supervisor.errors import StoreError
from supervisor.policy.control.plane import TERMINAL_STATES, WORK_KINDS, WORK_STATES
from supervisor.store.schema.control import STORE_WORK_KINDS, STORE_WORK_STATES
from supervisor.store.schema.tables import CURRENT_VERSION, MIGRATIONS
from supervisor.store.sqlite.open import migrate, sqlite_store
from supervisor.store.sqlite.store import SQLiteStore
from tests.store.rowdata import STAMP_1, STAMP_2, STAMP_3, lease, raw_query, registration

pytestmark = pytest.mark.anyio

CONTROL_TABLES = {"sessions", "work_items", "assignments", "terminal_locks", "control_events"}


def tables(path: Path) -> set[str]:
    return {row[0] for row in raw_query(path, "SELECT name FROM sqlite_master WHERE type='table'")}


def item(number: int = 1, *, kind: str = "issue", **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "work_item_key": f"{kind}:prgs/org/repo#{number}",
        "remote": "prgs",
        "org": "org",
        "repo": "repo",
        "kind": kind,
        "number": number,
        "state": "open",
        "created_at": STAMP_1,
        "updated_at": STAMP_1,
    }
    row.update(extra)
    return row


def test_store_and_policy_agree_on_kinds_and_states() -> None:
    assert frozenset(STORE_WORK_KINDS) == WORK_KINDS
    assert STORE_WORK_STATES == WORK_STATES
    assert frozenset(STORE_WORK_STATES) > TERMINAL_STATES


async def test_v2_database_upgrades_to_v3_keeping_registrations_leases_and_audit(
    db_path: Path,
) -> None:
    await migrate(db_path, 2)
    assert not CONTROL_TABLES & tables(db_path)
    new_in_v4 = ("client_pid", "client_process_start_time")
    reg = {k: v for k, v in registration("wrk-old").items() if k not in new_in_v4}
    held = lease("lease-old", work_item_key="issue:prgs/org/repo#5")
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            f"INSERT INTO worker_registrations ({', '.join(reg)}) "
            f"VALUES ({', '.join('?' for _ in reg)})",
            tuple(reg.values()),
        )
        conn.execute(
            f"INSERT INTO leases ({', '.join(held)}) VALUES ({', '.join('?' for _ in held)})",
            tuple(held.values()),
        )
        conn.execute(
            "INSERT INTO audit_events (at, actor, action, outcome) VALUES (?, 'op', 'plan', 'ok')",
            (STAMP_1,),
        )
    conn.close()

    async with sqlite_store(db_path) as store:
        assert store.applied_migrations == tuple(range(3, CURRENT_VERSION + 1))
        [kept] = await store.read_registrations()
        assert {k: kept[k] for k in reg} == reg
        assert await store.read_leases() == [held]
        assert [e["action"] for e in await store.read_audit()] == ["plan"]
    assert tables(db_path) >= CONTROL_TABLES
    versions = [r[0] for r in raw_query(db_path, "SELECT version FROM schema_migrations")]
    assert versions == [m.version for m in MIGRATIONS] == list(range(1, CURRENT_VERSION + 1))


async def test_upgrade_refuses_two_active_leases_on_one_item_and_changes_nothing(
    db_path: Path,
) -> None:
    await migrate(db_path, 2)
    with sqlite3.connect(db_path) as conn:
        for lease_id in ("lease-a", "lease-b"):
            row = lease(lease_id, work_item_key="issue:prgs/org/repo#9")
            conn.execute(
                f"INSERT INTO leases ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                tuple(row.values()),
            )
    conn.close()
    with pytest.raises(StoreError, match="UNIQUE"):
        await migrate(db_path)
    assert max(r[0] for r in raw_query(db_path, "SELECT version FROM schema_migrations")) == 2
    assert not CONTROL_TABLES & tables(db_path)
    assert len(raw_query(db_path, "SELECT lease_id FROM leases")) == 2


@pytest.mark.parametrize("kind", ["sentry_incident", "glitchtip_incident", "incident", "PR"])
async def test_a_work_item_of_another_kind_is_refused_before_sql(
    store: SQLiteStore, db_path: Path, kind: str
) -> None:
    with pytest.raises(StoreError, match="monitoring incidents are never work items"):
        async with store.write() as tx:
            await tx.control().put_work_item(item(kind=kind))
    assert raw_query(db_path, "SELECT COUNT(*) FROM work_items") == [(0,)]


async def test_the_database_itself_refuses_other_kinds(store: SQLiteStore, db_path: Path) -> None:
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        raw_query(
            db_path,
            "INSERT INTO work_items (work_item_key, remote, org, repo, kind, number, state) "
            "VALUES ('x', 'r', 'o', 'p', 'sentry_incident', 1, 'open')",
        )
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        raw_query(
            db_path,
            "INSERT INTO work_items (work_item_key, remote, org, repo, kind, number, state) "
            "VALUES ('x', 'r', 'o', 'p', 'issue', 1, 'reopened')",
        )


async def test_sessions_and_work_items_upsert_only_the_given_columns(store: SQLiteStore) -> None:
    async with store.write() as tx:
        control = tx.control()
        await control.put_session(
            {"session_id": "s1", "role": "author", "pid": 41, "status": "active"}
        )
        await control.put_session(
            {"session_id": "s1", "status": "active", "last_heartbeat_at": STAMP_2}
        )
        await control.put_work_item(item(3, kind="pr", current_head_sha="h1", title="t"))
        await control.put_work_item(item(3, kind="pr", current_head_sha="h2"))
        session = await control.session("s1")
        items = await control.work_items(["pr:prgs/org/repo#3", "pr:prgs/org/repo#404"])
    assert session is not None
    assert (session["role"], session["pid"], session["last_heartbeat_at"]) == (
        "author",
        41,
        STAMP_2,
    )
    assert len(items) == 1
    assert (items[0]["current_head_sha"], items[0]["title"]) == ("h2", "t")


async def test_one_active_lease_and_one_active_assignment_per_item(store: SQLiteStore) -> None:
    key = "issue:prgs/org/repo#1"
    async with store.write() as tx:
        control = tx.control()
        await control.insert_lease(lease("l1", work_item_key=key, expires_at=STAMP_3))
        await control.insert_assignment(
            {
                "assignment_id": "a1",
                "lease_id": "l1",
                "work_item_key": key,
                "session_id": "sess-1",
                "role": "author",
                "status": "active",
                "allowed_actions": ["implement"],
                "forbidden_actions": ("merge",),
                "created_at": STAMP_1,
            }
        )
    with pytest.raises(StoreError, match=r"(?i)unique"):
        async with store.write() as tx:
            await tx.control().insert_lease(lease("l2", work_item_key=key))
    with pytest.raises(StoreError, match=r"(?i)unique"):
        async with store.write() as tx:
            await tx.control().insert_assignment(
                {
                    "assignment_id": "a2",
                    "lease_id": "l2",
                    "work_item_key": key,
                    "session_id": "sess-2",
                    "role": "author",
                    "status": "active",
                }
            )
    async with store.write() as tx:
        control = tx.control()
        found = await control.assignment(work_item_key=key, session_id="sess-1")
        assert found is not None
        assert found["allowed_actions"] == ("implement",)
        assert found["forbidden_actions"] == ("merge",)
        assert await control.assignment(work_item_key=key, session_id="sess-2") is None
        assert [r["lease_id"] for r in await control.item_leases([key])] == ["l1"]
        # Guarded: the first release wins, a second sees the status already moved.
        assert await control.update_lease(
            "l1", expected_status="active", changes={"status": "released", "released_at": STAMP_2}
        )
        assert not await control.update_lease(
            "l1", expected_status="active", changes={"status": "released"}
        )
        assert (
            await control.update_assignments(
                ["l1"], expected_status="active", changes={"status": "released"}
            )
            == 1
        )
        assert await control.item_leases([key]) == []
        # With the first released, a new holder may take the item.
        await control.insert_lease(lease("l2", work_item_key=key))


async def test_updates_refuse_unknown_columns_bad_statuses_and_bad_stamps(
    store: SQLiteStore,
) -> None:
    async with store.write() as tx:
        control = tx.control()
        await control.insert_lease(lease("l1"))
        with pytest.raises(StoreError, match="unknown leases column"):
            await control.update_lease("l1", expected_status="active", changes={"owner": "x"})
        with pytest.raises(StoreError, match="status"):
            await control.update_lease("l1", expected_status="active", changes={"status": "gone"})
        with pytest.raises(StoreError, match="expires_at"):
            await control.update_lease(
                "l1", expected_status="active", changes={"expires_at": "tomorrow"}
            )
        with pytest.raises(StoreError, match="needs"):
            await control.put_session({"session_id": "s1"})


async def test_one_active_terminal_lock_per_repository(store: SQLiteStore) -> None:
    lock: dict[str, Any] = {
        "lock_id": "t1",
        "remote": "prgs",
        "org": "org",
        "repo": "repo",
        "terminal_pr": 10,
        "decision": "request_changes",
        "status": "active",
        "created_at": STAMP_1,
    }
    async with store.write() as tx:
        control = tx.control()
        await control.insert_terminal_lock(lock)
        await control.insert_terminal_lock(lock | {"lock_id": "t-other", "repo": "other"})
    with pytest.raises(StoreError, match=r"(?i)unique"):
        async with store.write() as tx:
            await tx.control().insert_terminal_lock(lock | {"lock_id": "t2", "terminal_pr": 11})
    async with store.write() as tx:
        control = tx.control()
        active = await control.active_terminal_lock(remote="prgs", org="org", repo="repo")
        assert active is not None
        assert active["terminal_pr"] == 10
        assert await control.update_terminal_lock(
            "t1", expected_status="active", changes={"status": "cleared", "updated_at": STAMP_2}
        )
        assert await control.active_terminal_lock(remote="prgs", org="org", repo="repo") is None


async def test_events_round_trip_newest_last(store: SQLiteStore) -> None:
    async with store.write() as tx:
        control = tx.control()
        for n, kind in enumerate(("lease_granted", "lease_heartbeat", "lease_released")):
            await control.append_event(
                {
                    "at": STAMP_1,
                    "kind": kind,
                    "work_item_key": "issue:prgs/org/repo#1" if n else "issue:prgs/org/repo#2",
                    "lease_id": "l1",
                    "detail": {"n": n},
                }
            )
        everything = await control.events()
        one_item = await control.events(work_item_key="issue:prgs/org/repo#1", limit=1)
        with pytest.raises(StoreError, match="at must be"):
            await control.append_event({"at": "now", "kind": "x"})
    assert [e["kind"] for e in everything] == ["lease_granted", "lease_heartbeat", "lease_released"]
    assert [e["detail"] for e in everything] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert [e["kind"] for e in one_item] == ["lease_released"]
