"""Observed server rows on both engines: first sight, later sightings (stamps kept once set,
what the process runs now)."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.errors import StoreError
from supervisor.store.base import Store
from tests.store.rowdata import STAMP_1, STAMP_2, STAMP_3

pytestmark = pytest.mark.anyio


def observed(**overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "host_id": "host-a",
        "boot_id": "boot-1",
        "pid": 4242,
        "process_start_time": "ticks-100",
        "provenance": "observed",
        "command": '["npx", "-y", "@modelcontextprotocol/server-everything"]',
        "cwd": "/home/u/project",
        "env_keys": '["HOME", "PATH"]',
        "uid": 1000,
        "owner_pid": 4000,
        "owner_start_time": "ticks-90",
        "owner_name": "claude_code",
        "evidence": '["stdio_pipes_to_parent", "parent_known_client:claude_code"]',
        "first_seen": STAMP_1,
        "last_seen": STAMP_1,
        "owner_gone_at": None,
        "gone_at": None,
    }
    row.update(overrides)
    return row


async def test_a_first_sight_round_trips_and_later_sightings_move_only_stamps_and_what_it_runs(
    store: Store,
) -> None:
    async with store.write() as tx:
        await tx.observed().record(observed())
    runs_now = {"command": '["node", "server.js"]', "cwd": "/srv", "env_keys": '["PATH"]'}
    async with store.write() as tx:
        # A later sighting: the first sight's facts are kept, whatever this one says, but
        # for what the process runs now (it may have exec'd since: sh -c exec'ing node).
        await tx.observed().record(
            observed(last_seen=STAMP_2, owner_gone_at=STAMP_2, first_seen=STAMP_2,
                     provenance="wrapped", evidence='["changed"]', **runs_now)
        )  # fmt: skip
    async with store.write() as tx:
        await tx.observed().record(
            observed(last_seen=STAMP_3, owner_gone_at=STAMP_3, gone_at=STAMP_3, **runs_now)
        )
    assert await store.read_observed_servers("host-a") == []
    (row,) = await store.read_observed_servers("host-a", live_only=False)
    assert row == observed(last_seen=STAMP_3, owner_gone_at=STAMP_2, gone_at=STAMP_3, **runs_now)
    assert await store.read_observed_servers("host-b", live_only=False) == []


async def test_another_incarnation_of_a_pid_is_a_row_of_its_own(store: Store) -> None:
    async with store.write() as tx:
        await tx.observed().record(observed())
        await tx.observed().record(observed(process_start_time="ticks-200", first_seen=STAMP_2))
    rows = await store.read_observed_servers("host-a")
    assert [r["process_start_time"] for r in rows] == ["ticks-100", "ticks-200"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (observed(colour="blue"), "unknown observed_servers column"),
        (observed(pid=None), "needs pid"),
        (observed(evidence=""), "needs evidence"),
        (observed(last_seen="yesterday"), "last_seen"),
    ],
)
async def test_bad_rows_are_refused_before_any_sql(
    store: Store, row: dict[str, Any], message: str
) -> None:
    async with store.write() as tx:
        with pytest.raises(StoreError, match=message):
            await tx.observed().record(row)
    assert await store.read_observed_servers("host-a", live_only=False) == []
