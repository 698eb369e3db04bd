"""``fleet-supervisor migrate``: a SQLite registry, history included, copied into PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from supervisor.cli import EXIT_OK, EXIT_REFUSED, main
from supervisor.store.base import Store
from supervisor.store.postgres.open import postgres_store
from supervisor.store.sqlite.open import sqlite_store
from tests.store.rowdata import STAMP_1, STAMP_2, STAMP_3, lease, registration

RETIRE = {"retired_at": STAMP_3, "retired_by": "operator", "reason": "eligible_stale_orphan"}
KEY = "issue:prgs/org/repo#1"


async def _seed(path: Path) -> None:
    """A registry with history: every status, leases, audit, control plane, host lease."""
    async with sqlite_store(path) as store:
        async with store.write() as tx:
            for i in range(5):
                await tx.insert_registration(
                    registration(f"w-{i}", process_start_time=1000 + i, heartbeat_ttl_seconds=90)
                )
            await tx.insert_registration(registration("w-legacy", host_id=None, boot_id=None))
            await tx.upsert_lease(lease("l-1", work_item_key=KEY, expires_at=STAMP_3))
            await tx.upsert_lease(lease("l-0", status="expired"))
            await tx.append_audit({"at": STAMP_1, "action": "register", "detail": {"n": 1}})
            control = tx.control()
            await control.put_session({"session_id": "s1", "role": "author", "status": "active"})
            await control.put_work_item(
                {
                    "work_item_key": KEY,
                    "remote": "prgs",
                    "org": "org",
                    "repo": "repo",
                    "kind": "issue",
                    "number": 1,
                    "state": "open",
                }
            )
            await control.insert_assignment(
                {
                    "assignment_id": "a1",
                    "lease_id": "l-1",
                    "work_item_key": KEY,
                    "session_id": "s1",
                    "role": "author",
                    "status": "active",
                    "allowed_actions": ["implement"],
                    "ttl_seconds": 0.1,
                }
            )
            await control.append_event({"at": STAMP_2, "kind": "lease_granted", "detail": {}})
            await tx.hosts().insert(
                {"host_id": "host-a", "status": "live", "epoch": 3, "expires_at": STAMP_2}
            )
        async with store.write() as tx:
            (row,) = await tx.registrations(worker_identities=["w-1"])
            assert await tx.retire_guarded(row, **RETIRE)
            await tx.set_status(
                "w-2",
                expected_status="active",
                new_status="released",
                stamp_column="released_at",
                stamp=STAMP_2,
            )
            await tx.append_audit({"at": STAMP_3, "action": "apply", "detail": {"ok": True}})


async def _contents(store: Store) -> dict[str, Any]:
    async with store.write() as tx:
        control = tx.control()
        events = await control.events()
        assignment = await control.assignment_by_lease("l-1")
    return {
        "registrations": await store.read_registrations(),
        "leases": await store.read_leases(),
        "audit": await store.read_audit(),
        "hosts": await store.read_host_leases(),
        "events": events,
        "assignment": assignment,
    }


def test_migrate_copies_every_row_and_history_and_proves_it(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "registry.sqlite3"
    anyio.run(_seed, path)
    code = main(["migrate", "--from", f"sqlite:{path}", "--to", pg_url, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK
    rows = {table: facts["rows"] for table, facts in report["tables"].items()}
    assert rows["worker_registrations"] == 6
    assert (rows["leases"], rows["audit_events"], rows["control_events"]) == (2, 2, 1)
    assert (rows["sessions"], rows["work_items"], rows["assignments"]) == (1, 1, 1)
    assert rows["host_leases"] == 1

    async def compare() -> None:
        async with sqlite_store(path) as source, postgres_store(pg_url) as copy:
            assert await _contents(copy) == await _contents(source)
            # Generated ids continue after the copied ones, in both history tables.
            async with copy.write() as tx:
                await tx.append_audit({"at": STAMP_3, "action": "after-copy"})
            assert [e["event_id"] for e in await copy.read_audit()] == [1, 2, 3]

    anyio.run(compare)

    # A second copy into the now non-empty registry is refused, and changes nothing.
    again = main(["migrate", "--from", f"sqlite:{path}", "--to", pg_url])
    assert again == EXIT_REFUSED
    assert "already has rows" in capsys.readouterr().err


def test_migrate_refuses_what_is_not_a_current_sqlite_registry(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.sqlite3"
    assert main(["migrate", "--from", f"sqlite:{missing}", "--to", pg_url]) == EXIT_REFUSED
    assert "no SQLite registry" in capsys.readouterr().err
    assert main(["migrate", "--from", str(missing), "--to", pg_url]) == EXIT_REFUSED
    assert "sqlite:PATH" in capsys.readouterr().err
    assert main(["migrate", "--from", f"sqlite:{missing}", "--to", "mysql://x"]) == 2
