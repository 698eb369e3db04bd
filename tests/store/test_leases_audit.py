"""Lease upsert and expiry, and the audit log round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supervisor.errors import StoreError
from supervisor.store.sqlite.store import SQLiteStore
from tests.store.rowdata import STAMP_1, STAMP_2, STAMP_3, lease, raw_query

pytestmark = pytest.mark.anyio


async def test_upsert_inserts_then_updates_only_given_columns(store: SQLiteStore) -> None:
    async with store.write() as tx:
        await tx.upsert_lease(lease("l-1"))
        renewal = {"heartbeat_at": STAMP_2, "expires_at": STAMP_3}
        required = {"work_item_key": "issue:l-1", "status": "active"}
        await tx.upsert_lease({"lease_id": "l-1", **required, **renewal})
        assert await tx.leases() == [lease("l-1", **renewal)]
    assert await store.read_leases() == [lease("l-1", **renewal)]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (lease(owner="x"), "unknown lease column"),
        (lease(status="held"), "lease status"),
        (lease(expires_at="2024-05-01T10:05:00Z"), "expires_at"),
        (lease(lease_id=""), "lease_id"),
        ({"lease_id": "l-9", "status": "active"}, "work_item_key"),
        ({"lease_id": "l-9", "work_item_key": "issue:9"}, "lease status"),
    ],
)
async def test_upsert_rejects_bad_leases(
    store: SQLiteStore, bad: dict[str, Any], message: str
) -> None:
    async with store.write() as tx:
        with pytest.raises(StoreError, match=message):
            await tx.upsert_lease(bad)
    assert await store.read_leases() == []


async def test_lease_status_filter(store: SQLiteStore) -> None:
    async with store.write() as tx:
        await tx.upsert_lease(lease("l-1"))
        await tx.upsert_lease(lease("l-2", status="released", released_at=STAMP_2))
        assert [r["lease_id"] for r in await tx.leases(status="released")] == ["l-2"]
    assert [r["lease_id"] for r in await store.read_leases(status="active")] == ["l-1"]


async def test_expire_leases_only_expires_due_active_leases(store: SQLiteStore) -> None:
    leases = [
        lease("due", expires_at=STAMP_1),
        lease("due-exactly-now", expires_at=STAMP_2),
        lease("future", expires_at=STAMP_3),
        lease("released-due", status="released", expires_at=STAMP_1, released_at=STAMP_1),
        lease("expired-due", status="expired", expires_at=STAMP_1),
        lease("no-deadline", expires_at=None),
    ]
    async with store.write() as tx:
        for row in leases:
            await tx.upsert_lease(row)
        expired = await tx.expire_leases(now_stamp=STAMP_2)
        assert await tx.expire_leases(now_stamp=STAMP_2) == []
    # Returned as they were before the update.
    assert expired == [leases[0], leases[1]]
    statuses = {r["lease_id"]: r["status"] for r in await store.read_leases()}
    assert statuses == {
        "due": "expired",
        "due-exactly-now": "expired",
        "future": "active",
        "released-due": "released",
        "expired-due": "expired",
        "no-deadline": "active",
    }


@pytest.mark.parametrize("now", ["2024-05-01T10:05:00Z", "2024-05-01 10:05:00.000000", ""])
async def test_expire_leases_refuses_malformed_now(store: SQLiteStore, now: str) -> None:
    async with store.write() as tx:
        await tx.upsert_lease(lease("l-1", expires_at=STAMP_1))
        with pytest.raises(StoreError, match="now_stamp"):
            await tx.expire_leases(now_stamp=now)
    assert (await store.read_leases())[0]["status"] == "active"


async def test_audit_round_trip(store: SQLiteStore, db_path: Path) -> None:
    events: list[dict[str, Any]] = [
        {
            "at": STAMP_1,
            "actor": "op",
            "role": "controller",
            "action": "plan",
            "outcome": "ok",
            "detail": {"z": 1, "a": [1, 2], "n": None},
        },
        {"at": STAMP_2, "action": "apply", "detail": None},
        {
            "at": STAMP_3,
            "actor": "op",
            "action": "apply",
            "outcome": "applied",
            "detail": {"retired": ["w-1"]},
        },
    ]
    async with store.write() as tx:
        for event in events:
            await tx.append_audit(event)
    read = await store.read_audit()
    assert [e["event_id"] for e in read] == [1, 2, 3]
    for got, sent in zip(read, events, strict=True):
        assert (
            got
            == {"event_id": got["event_id"], "actor": None, "role": None, "outcome": None} | sent
        )
    # Newest `limit` events, oldest of them first.
    assert [e["action"] for e in await store.read_audit(limit=2)] == ["apply", "apply"]
    assert [e["at"] for e in await store.read_audit(limit=2)] == [STAMP_2, STAMP_3]
    assert await store.read_audit(limit=0) == []
    # Stored with sorted keys, so equal details are equal text.
    assert raw_query(db_path, "SELECT detail FROM audit_events WHERE event_id = 1") == [
        ('{"a": [1, 2], "n": null, "z": 1}',)
    ]


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"at": STAMP_1, "action": "x", "detail": {"bad": object()}}, "JSON"),
        ({"at": STAMP_1, "action": "x", "detail": {"nan": float("nan")}}, "JSON"),
        ({"at": STAMP_1}, "action"),
        ({"action": "x"}, "at"),
        ({"at": STAMP_1, "action": "x", "event_id": 5}, "unknown audit column"),
    ],
)
async def test_append_audit_rejects_bad_events(
    store: SQLiteStore, event: dict[str, Any], message: str
) -> None:
    async with store.write() as tx:
        with pytest.raises(StoreError, match=message):
            await tx.append_audit(event)
    assert await store.read_audit() == []


async def test_read_audit_rejects_negative_limit(store: SQLiteStore) -> None:
    with pytest.raises(StoreError, match="limit"):
        await store.read_audit(limit=-1)
