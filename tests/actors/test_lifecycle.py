"""Registration, heartbeats, staleness at exactly the TTL, release, retired rows refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.actors.harness import harness

pytestmark = pytest.mark.anyio


async def test_register_fills_fencing_from_probes_not_claims(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        pid = h.spawn(start="ticks-777")
        reg = await h.register(pid)
        row = await h.row(str(reg["worker_identity"]))
        assert row["host_id"] == "host-a"
        assert row["boot_id"] == "boot-1"
        assert row["process_start_time"] == "ticks-777"
        assert row["status"] == "active"
        assert row["fencing_epoch"] == 1
        assert str(row["worker_identity"]).startswith("wkr-")


async def test_heartbeats_keep_row_fresh_and_silence_makes_it_stale_at_ttl(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register(heartbeat_ttl_seconds=30.0)
        for _ in range(10):
            await h.clock.advance(10)
            assert (await h.beat(reg)).ok
        snap = await h.handle.snapshot(None)
        assert snap["success"] is False  # no profile: refused
        from tests.actors.harness import READER

        snap = await h.handle.snapshot(READER)
        assert snap["live_worker_count"] == 1
        await h.clock.advance(29.999)
        snap = await h.handle.snapshot(READER)
        assert snap["live_worker_count"] == 1
        await h.clock.advance(0.001)
        snap = await h.handle.snapshot(READER)
        assert snap["live_worker_count"] == 0
        assert snap["stale_worker_count"] == 1
