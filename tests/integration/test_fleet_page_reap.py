"""The fleet page's reap: a plan preview, and a button that reaps behind the retire grant,
clicked in headless Chromium against real orphaned processes."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest

from supervisor.policy.control.permissions import OP_READ, OP_RETIRE, Profile
from supervisor.settings.profile_edits import change_grant
from tests.actors.helpers_app import SettledHarness, harness
from tests.integration.chromium_cdp import run_in_page
from tests.integration.reap_host import Host, host, ref, still_runs
from tests.integration.test_fleet_page import page_server

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

#: The page's profile that may reap: the token's, and the actors' copy of it.
REAPER = Profile(
    name="ops-controller",
    role_kind="controller",
    allowed_operations=frozenset({OP_READ, OP_RETIRE}),
)
#: Waits in the page for the plan, clicks the reap button, waits for the answer.
CLICK = """(async () => {
  const wait = async (check) => {
    for (let i = 0; i < 600 && !check(); i++) await new Promise(r => setTimeout(r, 50));
  };
  await wait(() => document.getElementById("reap").dataset.loaded === "1");
  const button = document.getElementById("reap-apply-button");
  const label = button.textContent;
  button.click();
  await wait(() => document.getElementById("reap-result").dataset.done === "1");
  return {label: label, plan: document.getElementById("reap").textContent,
          result: document.getElementById("reap-result").textContent};
})()"""


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Host]:
    with host(tmp_path) as planted:
        yield planted


def _orphan(world: Host) -> None:
    """A Python server whose owner client has exited (both the test's own children)."""
    owner = world.spawned.popen([sys.executable, "-c", "pass"])
    owner_ref = ref(owner.pid)
    owner.wait()
    server = world.spawned.popen_exec([sys.executable, "-c", "import time; time.sleep(600)"])
    world.plant(ref(server.pid), owner_ref, ("python", "leaked-server"))


@asynccontextmanager
async def clock_running(h: SettledHarness) -> AsyncIterator[None]:
    """Virtual time moves while the page works (the reap waits out its grace on it)."""
    async with anyio.create_task_group() as tg:

        async def tick() -> None:
            while True:
                await h.clock.advance(0.25)
                await anyio.sleep(0.01)

        tg.start_soon(tick)
        yield
        tg.cancel_scope.cancel()


async def test_the_reap_button_reaps_the_planned_orphans(world: Host, tmp_path: Path) -> None:
    _orphan(world)
    [orphan] = world.planted
    live_client = world.tracer("live-client")
    kept = world.server_tracer(live_client.process, "live-server")
    sibling = world.tracer("sibling")
    async with harness(tmp_path, census=world.take) as h, page_server(h, tmp_path) as (url, tokens):
        change_grant(tmp_path / "profiles.toml", REAPER.name, OP_RETIRE, grant=True)
        h.profiles.by_name[REAPER.name] = REAPER  # what the reap re-reads before a signal
        page = f"{url}/?token={tokens[REAPER.name]}&reap=1"
        async with clock_running(h):
            seen = await anyio.to_thread.run_sync(
                run_in_page, page, CLICK, tmp_path / "chromium-profile"
            )
        audit = await h.store.read_audit(limit=1000)
    assert seen["label"] == "reap 1 orphaned server tree(s)"
    assert f"{orphan.leader.pid}reap" in seen["plan"].replace(" ", "")
    assert seen["result"].startswith("reaped 1 of 1"), seen
    assert not still_runs(orphan.leader)
    for tracer in (live_client, kept, sibling):
        assert still_runs(tracer.process)
        assert tracer.received() == []
    [event] = [e for e in audit if e["action"] == "reap_apply"]
    assert (event["actor"], event["outcome"]) == (REAPER.name, "reaped")
    assert event["detail"]["pid"] == orphan.leader.pid


async def test_without_the_retire_grant_the_page_reaps_nothing(world: Host, tmp_path: Path) -> None:
    _orphan(world)
    [orphan] = world.planted
    async with (
        harness(tmp_path, census=world.take) as h,
        page_server(h, tmp_path) as (url, tokens),
        httpx2.AsyncClient(timeout=30.0) as client,
    ):
        plan = (await client.get(f"{url}/api/reap/plan")).json()
        token = plan["plan_token"]
        json_body = {"content-type": "application/json"}
        # The same uid without a token is a read-only viewer; a read token is no better.
        as_owner = await client.post(f"{url}/api/reap/apply", json={"plan_token": token})
        as_reader = await client.post(
            f"{url}/api/reap/apply",
            json={"plan_token": token},
            headers={"authorization": f"Bearer {tokens['ops-controller']}"},
        )
        as_form = await client.post(f"{url}/api/reap/apply", data={"plan_token": token})
        empty_body = await client.post(f"{url}/api/reap/apply", content=b"{}", headers=json_body)
        as_get = await client.get(f"{url}/api/reap/apply")
        posted_elsewhere = await client.post(f"{url}/api/fleet", json={})
    assert [t["pid"] for t in plan["targets"]] == [orphan.leader.pid]
    for refused in (as_owner, as_reader):
        assert refused.status_code == 200
        assert refused.json()["code"] == "permission_denied"
    assert as_form.status_code == 415
    assert empty_body.status_code == 400
    assert as_get.status_code == 405
    assert posted_elsewhere.status_code == 405
    assert still_runs(orphan.leader)
