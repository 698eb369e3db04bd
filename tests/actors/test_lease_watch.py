"""Lease watch: expiry exactly at the deadline, active owners, fingerprint, fail-closed reads."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from supervisor.errors import StoreError
from supervisor.policy.stamps import format_stamp
from tests.actors.harness import START
from tests.actors.helpers_app import SettledHarness, harness

pytestmark = pytest.mark.anyio

EXPIRY = 5.0  # LeaseWatchSettings.expiry_interval_seconds (default)
TINY = 2.0**-10


def stamp(seconds: float) -> str:
    return format_stamp(START + timedelta(seconds=seconds))


def lease(lease_id: str, *, expires_in: float, session: str, pid: int) -> dict[str, Any]:
    return {
        "lease_id": lease_id,
        "work_item_key": f"issue:{lease_id}",
        "status": "active",
        "session_id": session,
        "owner_pid": pid,
        "role": "author",
        "acquired_at": stamp(0),
        "expires_at": stamp(expires_in),
    }


async def statuses(h: SettledHarness) -> dict[str, str]:
    return {str(r["lease_id"]): str(r["status"]) for r in await h.store.read_leases()}


async def upsert(h: SettledHarness, row: dict[str, Any]) -> None:
    ack = await h.handle.upsert_lease(row)
    assert ack.ok, ack


async def test_leases_expire_exactly_at_their_deadline_when_the_interval_fires(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        await upsert(h, lease("L-early", expires_in=7, session="s-1", pid=101))
        await upsert(h, lease("L-exact", expires_in=10, session="s-2", pid=102))
        # One microsecond after the t=10 tick: that tick must leave it alone.
        await upsert(h, lease("L-after", expires_in=10.000001, session="s-3", pid=103))
        assert h.supervisor.lease_watch is not None
        watch = h.supervisor.lease_watch

        await h.advance(EXPIRY)  # t=5: nothing is due yet
        assert await statuses(h) == {"L-early": "active", "L-exact": "active", "L-after": "active"}
        assert watch.expired_total == 0

        # Just before t=10 (a binary fraction, so the two steps add up to exactly 10):
        # no tick yet, and nothing expires early.
        await h.advance(EXPIRY - TINY)
        assert set((await statuses(h)).values()) == {"active"}

        await h.advance(TINY)  # t=10: the tick; deadline <= now expires
        assert await statuses(h) == {
            "L-early": "expired",
            "L-exact": "expired",
            "L-after": "active",
        }
        assert watch.expired_total == 2
        owners = await h.handle.lease_owners()
        assert owners.owners.session_ids == frozenset({"s-3"})
        assert owners.owners.pids == frozenset({103})

        await h.advance(EXPIRY)  # t=15
        assert set((await statuses(h)).values()) == {"expired"}
        assert watch.expired_total == 3
        owners = await h.handle.lease_owners()
        assert (owners.readable, owners.active_lease_count) == (True, 0)
        assert owners.owners.session_ids == frozenset()


async def test_a_wall_clock_step_does_not_expire_a_lease_early(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await upsert(h, lease("L1", expires_in=60, session="s-1", pid=101))
        h.clock.step_wall(+3600)
        await h.advance(EXPIRY)
        assert await statuses(h) == {"L1": "active"}
        for _ in range(10):
            await h.advance(EXPIRY)
        assert await statuses(h) == {"L1": "active"}  # t=55
        await h.advance(EXPIRY)
        assert await statuses(h) == {"L1": "expired"}  # t=60


async def test_owners_and_fingerprint_follow_the_active_leases(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        empty = await h.handle.lease_owners()
        assert (empty.readable, empty.active_lease_count) == (True, 0)

        await upsert(h, lease("L1", expires_in=600, session="s-1", pid=101) | {"session_pid": 91})
        one = await h.handle.lease_owners()
        assert one.readable
        assert one.active_lease_count == 1
        assert one.owners.session_ids == frozenset({"s-1"})
        assert one.owners.pids == frozenset({101, 91})
        assert one.fingerprint
        assert one.fingerprint != empty.fingerprint

        await upsert(h, lease("L2", expires_in=10, session="s-2", pid=102))
        two = await h.handle.lease_owners()
        assert two.active_lease_count == 2
        assert two.owners.session_ids == frozenset({"s-1", "s-2"})
        assert two.owners.pids == frozenset({101, 91, 102})
        assert two.fingerprint not in (one.fingerprint, empty.fingerprint)

        # A new owner of an existing lease is a different fingerprint too.
        await upsert(
            h,
            {
                "lease_id": "L2",
                "work_item_key": "issue:L2",
                "status": "active",
                "session_id": "s-9",
            },
        )
        moved = await h.handle.lease_owners()
        assert moved.owners.session_ids == frozenset({"s-1", "s-9"})
        assert moved.fingerprint != two.fingerprint

        await h.advance(EXPIRY)
        await h.advance(EXPIRY)  # t=10: L2 expires
        after = await h.handle.lease_owners()
        assert after.active_lease_count == 1
        assert after.owners == one.owners
        # Same active leases as before L2 existed: the same token.
        assert after.fingerprint == one.fingerprint


async def test_unreadable_lease_store_is_reported_never_as_no_owners(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await upsert(h, lease("L1", expires_in=600, session="s-1", pid=101))
        assert (await h.handle.lease_owners()).readable
        h.proxy.read_leases_error = StoreError("lease table is locked (injected)")
        owners = await h.handle.lease_owners()
        assert owners.readable is False
        assert "lease table is locked (injected)" in owners.detail
        assert owners.fingerprint == ""
        assert owners.active_lease_count == 0
        # The periodic refresh fails the same way, and the actor keeps running.
        await h.advance(EXPIRY)
        assert h.supervisor.lease_watch is not None
        assert h.supervisor.lease_watch.last.readable is False
        assert h.supervisor.restarts == {}
        h.proxy.read_leases_error = None
        recovered = await h.handle.lease_owners()
        assert recovered.readable
        assert recovered.owners.session_ids == frozenset({"s-1"})
