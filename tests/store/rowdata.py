"""Row builders and raw-SQLite helpers shared by the store tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from supervisor.store.base import CommitChain, Store

__all__ = [
    "STAMP_1",
    "STAMP_2",
    "STAMP_3",
    "change_every_way",
    "lease",
    "raw_query",
    "registration",
]

STAMP_1 = "2024-05-01T10:00:00.000000Z"
STAMP_2 = "2024-05-01T10:05:00.000000Z"
STAMP_3 = "2024-05-01T10:10:00.000000Z"


def registration(worker_identity: str = "wrk-1", **overrides: Any) -> dict[str, Any]:
    """A complete, plausible registration row of the current schema."""
    row: dict[str, Any] = {
        "worker_identity": worker_identity,
        "client_name": "codex",
        "client_instance_id": "inst-codex-20240501T100000Z-0123456789ab",
        "session_id": f"sess-{worker_identity}",
        "generation_id": "gen-1",
        "role": "author",
        "profile": "author",
        "namespace": "author",
        "remote": "origin",
        "repository_binding": "git@example.org:fleet/repo.git",
        "pid": 4242,
        "process_identity": f"proc-{worker_identity}",
        "transport": "stdio",
        "token_fingerprint": "fp-abc",
        "started_at": STAMP_1,
        "last_heartbeat_at": STAMP_1,
        "heartbeat_ttl_seconds": 90.5,
        "fencing_epoch": 7,
        "status": "active",
        "fleet_run_id": "run-1",
        "authenticated_account": "bot",
        "instance_id_provenance": "launcher",
        "startup_revision": "r1",
        "loaded_revision": "r1",
        "parity_revision": "r1",
        "live_revision": "r1",
        "host_id": "host-a",
        "boot_id": "boot-1",
        "process_start_time": "123456",
        # Version 4: no launching client recorded (not started by the exec sidecar).
        "client_pid": None,
        "client_process_start_time": None,
    }
    row.update(overrides)
    return row


def lease(lease_id: str = "lease-1", **overrides: Any) -> dict[str, Any]:
    """A complete active lease row."""
    row: dict[str, Any] = {
        "lease_id": lease_id,
        "work_item_key": f"issue:{lease_id}",
        "session_id": "sess-1",
        "owner_pid": 4242,
        "session_pid": 4241,
        "role": "author",
        "phase": "implement",
        "status": "active",
        "generation": "gen-1",
        "acquired_at": STAMP_1,
        "heartbeat_at": STAMP_1,
        "expires_at": STAMP_2,
        "released_at": None,
    }
    row.update(overrides)
    return row


def raw_query(path: Path, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on a private sqlite3 connection (committed, then closed)."""
    with closing(sqlite3.connect(path)) as conn, conn:
        return list(conn.execute(statement, params).fetchall())


async def change_every_way(store: Store, *, insert: Sequence[dict[str, Any]] = ()) -> None:
    """Every kind of change a reader sees between two reads: wrk-1 stamped in a write
    transaction, wrk-2 released (and ``insert`` added) in it, wrk-3 stamped through the
    queued heartbeat batches."""
    async with store.write() as tx:
        await tx.touch_heartbeats([("wrk-1", STAMP_2)])
        assert await tx.set_status(
            "wrk-2",
            expected_status="active",
            new_status="released",
            stamp_column="released_at",
            stamp=STAMP_2,
        )
        for row in insert:
            await tx.insert_registration(row)
    assert await store.submit_heartbeats([("wrk-3", STAMP_3)], CommitChain())
