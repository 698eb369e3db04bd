"""End to end: discovery's census finds a server whose client died, the reap stops it.

The census is the supervisor's own census actor sweeping this host; what the reap sees of
it is cut to the processes this test started, so that nothing else on a shared host is
ever planned, let alone signalled."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from actors.census.actor import CensusSettings
from actors.reap import ReapSettings
from supervisor.handle import SupervisorHandle
from supervisor.policy.servers.census import Census
from tests.actors.harness import RETIRER, default_settings
from tests.actors.helpers_app import harness
from tests.integration.test_fleet_page_reap import clock_running
from tests.process_trees.trees import child, gone, processes, running, start_tree

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_a_server_whose_client_died_is_found_and_reaped(tmp_path: Path) -> None:
    settings = dataclasses.replace(
        default_settings(),
        census=CensusSettings(home=tmp_path),
        reap=ReapSettings(grace_seconds=1.0, kill_wait_seconds=5.0, poll_seconds=0.05),
    )
    handles: list[SupervisorHandle] = []
    ours: set[int] = set()

    async def our_part_of_the_census() -> Census:
        census = await handles[0].census(fresh=True)
        mine = tuple(s for s in census.servers if s.process.pid in ours)
        return dataclasses.replace(census, servers=mine)

    with processes() as spawned:
        tree = start_tree(
            spawned, "claude", [child("mcp-fake-server", tree=True), child("mcp-fake-server")]
        )
        live = start_tree(spawned, "claude", [child("mcp-fake-server")])
        ours.update([*tree.children, *live.children])
        async with harness(tmp_path, settings=settings, census=our_part_of_the_census) as h:
            handles.append(h.handle)
            first = await h.handle.census(fresh=True)  # first sight: the owners are recorded
            assert {s.process.pid for s in first.servers} >= ours
            client = next(p for p in spawned.procs if p.pid == tree.client)
            client.kill()  # the test's own child, by its Popen
            client.wait()
            plan = dict(await h.handle.reap_plan(RETIRER))
            members = {m["pid"] for t in plan["targets"] for m in t["members"]}
            async with clock_running(h):
                applied = dict(await h.handle.reap_apply(RETIRER, plan_token=plan["plan_token"]))
        live_runs = running(live.children[0])  # before the end stops every process
    grandchildren = members - set(tree.children)
    assert {t["pid"] for t in plan["targets"]} == set(tree.children)
    assert {t["reason_code"] for t in plan["targets"]} == {"owner_client_gone"}
    assert [k["reason_code"] for k in plan["kept"]] == ["owner_client_live"]
    assert grandchildren, "the first server's child is a member of its tree"
    assert applied["success"] is True, applied
    assert {t["outcome"] for t in applied["targets"]} == {"reaped"}
    assert all(gone(pid) or not running(pid) for pid in members)
    assert live_runs
