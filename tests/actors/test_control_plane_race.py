"""Twenty sessions race for one item through the real writer: one is assigned, the rest wait."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tests.actors.helpers_app import harness
from tests.actors.helpers_control import AUTHOR_P, SHA_1, WHERE, active_leases, assign, events

pytestmark = pytest.mark.anyio

RACERS = 20


async def race(call: Any) -> list[Mapping[str, Any]]:
    """Start every racer before any of them can be answered, then collect the answers."""
    results: list[Mapping[str, Any]] = []
    start = anyio.Event()

    async def one(n: int) -> None:
        await start.wait()
        results.append(await call(n))

    async with anyio.create_task_group() as tg:
        for n in range(RACERS):
            tg.start_soon(one, n)
        await anyio.lowlevel.checkpoint()
        start.set()
    return results


async def test_twenty_concurrent_assignments_of_one_item(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        results = await race(
            lambda n: assign(h, f"racer-{n}", 100, kind="pr", expected_head_sha=SHA_1)
        )
        outcomes = Counter(r["outcome"] for r in results)
        assert outcomes == {"assigned": 1, "wait": RACERS - 1}
        [winner] = [r for r in results if r["outcome"] == "assigned"]
        assert {r["owner_session_id"] for r in results if r["outcome"] == "wait"} == {
            winner["session_id"]
        }
        assert active_leases(h) == [
            (winner["lease_id"], "pr:prgs/org/repo#100", winner["session_id"])
        ]
        assert len(events(h, kind="lease_granted")) == 1


async def test_twenty_concurrent_allocations_of_one_candidate(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:

        async def allocate(n: int) -> Mapping[str, Any]:
            return await h.handle.allocate_next_work(
                AUTHOR_P,
                session_id=f"racer-{n}",
                candidates=[{"kind": "issue", "number": 7}],
                apply=True,
                **WHERE,
            )

        results = await race(allocate)
        outcomes = Counter(r["outcome"] for r in results)
        assert outcomes == {"assigned_work": 1, "wait": RACERS - 1}
        assert len(active_leases(h)) == 1


async def test_twenty_sessions_on_twenty_items_all_get_their_own(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        results = await race(lambda n: assign(h, f"racer-{n}", 1000 + n))
        assert {r["outcome"] for r in results} == {"assigned"}
        assert sorted(int(r["work_number"]) for r in results) == [1000 + n for n in range(RACERS)]
        assert len(active_leases(h)) == RACERS
