"""End to end with a real tree: the ``node`` an ``npx`` leaves behind is found and reaped.

An MCP client stops a server by signalling the pid it started, not its group: for
``npx -y @modelcontextprotocol/server-everything`` that is ``npm exec``, and the ``node``
below it keeps running, adopted by init (``tests/realclients/BASELINE.md``). Here the
MCP Python SDK's own client starts that real tree, the test stops ``npm exec`` as a
client does, and the census must keep what survived as the server, owned by the client:
kept while the client lives, reaped once it is gone. The census the reap sees is cut to
the processes carrying this test's marker, so nothing else on the host is ever planned.
"""

from __future__ import annotations

import dataclasses
import os
import selectors
import signal
import subprocess
from pathlib import Path

import pytest

from actors.census.actor import CensusSettings
from actors.reap import ReapSettings
from supervisor.handle import SupervisorHandle
from supervisor.policy.servers.census import Census
from tests.actors.harness import RETIRER, default_settings
from tests.actors.helpers_app import harness
from tests.census.trees import parent_of, until
from tests.integration.test_fleet_page_reap import clock_running
from tests.realclients.harness import (
    client_env,
    kill_all,
    leftovers,
    leftovers_of,
    missing,
    new_marker,
    sdk_argv,
    server_entry,
    temp_home,
)
from tests.unavailable import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

_READY_SECONDS = 60.0


def _ready(client: subprocess.Popen[bytes]) -> None:
    """Until the SDK client printed ``ready`` (the server answered tools/list)."""
    assert client.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(client.stdout, selectors.EVENT_READ)
        assert selector.select(timeout=_READY_SECONDS), "the SDK client never got ready"
    line = client.stdout.readline().decode(errors="replace")
    assert line.startswith("ready"), line


async def test_the_node_npx_leaves_is_kept_while_its_client_lives_and_reaped_after(
    tmp_path: Path,
) -> None:
    reason = missing("sdk", "everything-npx")
    if reason is not None:
        unavailable(reason)
    marker = new_marker()
    settings = dataclasses.replace(
        default_settings(),
        census=CensusSettings(home=tmp_path),
        reap=ReapSettings(grace_seconds=1.0, kill_wait_seconds=5.0, poll_seconds=0.05),
    )
    handles: list[SupervisorHandle] = []

    async def marked_part_of_the_census() -> Census:
        census = await handles[0].census(fresh=True)
        mine = tuple(s for s in census.servers if leftovers_of([s.process.pid], marker))
        return dataclasses.replace(census, servers=mine)

    with temp_home() as home:
        entry = server_entry("everything-npx", name="npx", marker=marker, home=home.home)
        client = subprocess.Popen(
            sdk_argv("hold", entry),
            env=client_env(home.home),
            cwd=home.project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            process_group=0,
        )
        try:
            _ready(client)
            async with harness(tmp_path, settings=settings, census=marked_part_of_the_census) as h:
                handles.append(h.handle)
                first = await marked_part_of_the_census()
                (npx,) = first.servers
                survivors = {m.pid for m in npx.usage.children}
                os.kill(npx.process.pid, signal.SIGKILL)  # the pid only, as a client does
                until(
                    lambda: (
                        all(parent_of(p) not in (None, npx.process.pid) for p in survivors)
                        and leftovers_of([npx.process.pid], marker) == []
                    ),
                    "npm exec to go and its tree to be adopted",
                )
                running = {p.pid for p in leftovers(marker)}
                kept = dict(await h.handle.reap_plan(RETIRER))
                client.kill()  # the test's own child, by its Popen
                client.wait(timeout=30)
                plan = dict(await h.handle.reap_plan(RETIRER))
                left_bare = {p.pid for p in leftovers(marker)}
                async with clock_running(h):
                    applied = dict(
                        await h.handle.reap_apply(RETIRER, plan_token=plan["plan_token"])
                    )
                left = leftovers(marker)
        finally:
            if client.poll() is None:
                client.kill()
                client.wait(timeout=30)
            if client.stdout is not None:
                client.stdout.close()
            kill_all(marker)
    assert npx.owner is not None
    assert npx.owner.process.pid == client.pid
    assert survivors, "npx's tree has a node below npm exec"
    assert running  # what stopping npm exec left running
    assert running <= survivors
    assert {k["reason_code"] for k in kept["kept"]} == {"owner_client_live"}
    assert kept["targets"] == []
    assert left_bare == running  # a bare run would leave them
    assert {t["reason_code"] for t in plan["targets"]} == {"owner_client_gone"}
    members = {m["pid"] for t in plan["targets"] for m in t["members"]}
    assert members == running
    assert applied["success"] is True, applied
    assert {t["outcome"] for t in applied["targets"]} == {"reaped"}
    assert left == []
