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

import os
import selectors
import signal
import subprocess
from pathlib import Path

import pytest

from tests.process_trees.marked import marked_supervisor
from tests.process_trees.trees import parent_of, until
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

pytestmark = [pytest.mark.integration, pytest.mark.anyio, pytest.mark.offline]

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
            async with marked_supervisor(tmp_path, marker, tmp_path) as supervisor:
                (npx,) = (await supervisor.census()).servers
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
                kept = await supervisor.plan()
                client.kill()  # the test's own child, by its Popen
                client.wait(timeout=30)
                plan = await supervisor.plan()
                left_bare = {p.pid for p in leftovers(marker)}
                applied = await supervisor.apply(plan)
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
