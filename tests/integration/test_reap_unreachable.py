"""End to end: what a server its live client stopped left running is reaped, its client kept.

A client that reconnects stops the server's pid; a browser the server started in a session
of its own runs on, holding nothing of the client's stdio (Claude Code #78551: 26 browsers,
13 GB in three days). The whole supervisor plans and reaps it through the reap actor while
the client runs, and a bare run (no supervisor) is what the test measured before the
apply. Leftovers are counted by the test's /proc marker; the reap sees only marked
processes.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from tests.process_trees.marked import marked_supervisor
from tests.process_trees.trees import (
    child,
    kids_of,
    parent_of,
    processes,
    running,
    start_tree,
    until,
)
from tests.realclients.harness import MARKER_ENV, kill_all, leftovers, new_marker

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_a_browser_left_by_a_server_its_live_client_stopped_is_reaped(
    tmp_path: Path,
) -> None:
    marker = new_marker()
    spec = child("mcp-fake-server", args=["--browser-child", sys.executable])
    spec |= {"stderr": "pipe", "env": {MARKER_ENV: marker}}
    with processes() as spawned:
        try:
            tree = start_tree(spawned, "claude", [spec])
            (leader,) = tree.children
            (browser,) = kids_of(leader)
            async with marked_supervisor(tmp_path, marker, tmp_path) as supervisor:
                await supervisor.census()  # the server and its owner, seen while both run
                os.kill(leader, signal.SIGKILL)  # the pid only, as a client does
                until(lambda: parent_of(browser) not in (None, leader), "the browser adopted")
                await supervisor.census()
                await supervisor.census()
                bare = {p.pid for p in leftovers(marker)}
                plan = await supervisor.plan()
                applied = await supervisor.apply(plan)
                left = leftovers(marker)
            client_ran = running(tree.client)
        finally:
            kill_all(marker)
    assert bare == {browser}  # a bare run leaves the browser
    assert {t["reason_code"] for t in plan["targets"]} == {"survivor_unreachable"}
    assert {m["pid"] for t in plan["targets"] for m in t["members"]} == {browser}
    assert applied["success"] is True, applied
    assert {t["outcome"] for t in applied["targets"]} == {"reaped"}
    assert left == []
    assert client_ran  # the client was never touched
