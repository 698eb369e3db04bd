"""Host lease rows on both engines: insert, guarded update by epoch and status, committed reads."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.errors import StoreError
from supervisor.store.base import Store
from tests.store.rowdata import STAMP_1, STAMP_2, STAMP_3

pytestmark = pytest.mark.anyio


def host_lease(**overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "host_id": "host-a",
        "boot_id": "boot-1",
        "supervisor_id": "sup-1",
        "status": "live",
        "epoch": 1,
        "registered_at": STAMP_1,
        "renewed_at": STAMP_1,
        "expires_at": STAMP_2,
    }
    row.update(overrides)
    return row


async def test_a_lease_round_trips_and_updates_only_while_epoch_and_status_hold(
    store: Store,
) -> None:
    async with store.write() as tx:
        await tx.hosts().insert(host_lease())
        assert await tx.hosts().lease("host-b") is None
    async with store.write() as tx:
        hosts = tx.hosts()
        stale = await hosts.update(
            "host-a", expected_epoch=2, expected_status="live", changes={"expires_at": STAMP_3}
        )
        moved = await hosts.update(
            "host-a",
            expected_epoch=1,
            expected_status="live",
            changes={"status": "declared_dead", "declared_dead_by": "op", "retired_rows": 2},
        )
        assert (stale, moved) == (False, True)
    (read,) = await store.read_host_leases()
    assert read == host_lease(
        status="declared_dead",
        declared_dead_by="op",
        retired_rows=2,
        declared_dead_at=None,
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (host_lease(status="asleep"), "status"),
        (host_lease(expires_at="tomorrow"), "expires_at"),
        (host_lease(colour="blue"), "unknown host_leases column"),
        ({"host_id": "host-a", "status": "live", "epoch": 1}, "needs expires_at"),
    ],
)
async def test_bad_host_leases_are_refused_before_any_sql(
    store: Store, row: dict[str, Any], message: str
) -> None:
    async with store.write() as tx:
        with pytest.raises(StoreError, match=message):
            await tx.hosts().insert(row)
    assert await store.read_host_leases() == []


async def test_a_second_lease_for_one_host_fails(store: Store) -> None:
    async with store.write() as tx:
        await tx.hosts().insert(host_lease())
    with pytest.raises(StoreError, match=r"(?i)unique"):
        async with store.write() as tx:
            await tx.hosts().insert(host_lease(supervisor_id="sup-2"))
    assert [r["supervisor_id"] for r in await store.read_host_leases()] == ["sup-1"]
