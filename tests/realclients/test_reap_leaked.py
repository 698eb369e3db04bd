"""A bare server tree that Claude Code and Gemini CLI leave behind is found and reaped.

``claude mcp list`` and ``gemini mcp list`` stop a server by its pid: a server whose
child ignores the stop signals leaves that child running (tests/realclients/BASELINE.md).
The census sees the tree while the client waits for the server (the stub answers nothing
until the test has looked), keeps what outlives the server as the server, owned by the
client, and once the client is gone the reap plans it and apply stops it: what a bare
run leaves is counted first, then nothing may be left. The census the reap sees is cut
to the processes carrying this run's marker, so nothing else on the host is planned.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from tests.process_trees.marked import marked_supervisor
from tests.process_trees.trees import kids_of, until
from tests.realclients.harness import (
    client_argv,
    client_env,
    kill_all,
    kill_pid,
    leftovers,
    new_marker,
    run_client,
    server_entry,
    temp_home,
)
from tests.realclients.test_leftovers import require

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

#: A hang guard: the clients give up on a server that never answers well before this.
_CLIENT_GUARD = 120.0


@pytest.mark.parametrize("client_name", ["claude", "gemini"])
async def test_what_a_client_leaves_of_a_server_is_reaped_once_the_client_is_gone(
    client_name: str, tmp_path: Path
) -> None:
    require(client_name, "stubborn")
    marker = new_marker()
    with temp_home() as home:
        go = home.home / "answer-now"
        entry = server_entry("stubborn", name="fleet-test", marker=marker, home=home.home)
        entry = dataclasses.replace(entry, args=(*entry.args, "--hold-until", str(go)))
        client = subprocess.Popen(
            client_argv(client_name, home, [entry], "list"),
            cwd=home.project,
            env=client_env(home.home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            process_group=0,
        )
        try:
            until(lambda: len(leftovers(marker)) >= 2, "the server and its child to start")
            # The daemon user's home is the client's: the census reads its config files.
            async with marked_supervisor(tmp_path, marker, home.home) as supervisor:
                first = await supervisor.census()
                # Gemini CLI relaunches itself: its servers' parent is the client's child.
                client_family = {client.pid, *kids_of(client.pid)}
                whole = await supervisor.handle.census(fresh=True)
                client_own = client_family - {p.pid for p in leftovers(marker)}
                go.touch()  # the server answers now; the client lists it and stops it
                client.wait(timeout=_CLIENT_GUARD)
                plan = await supervisor.plan()
                left_bare = {p.pid for p in leftovers(marker)}
                applied = await supervisor.apply(plan)
                left = leftovers(marker)
        finally:
            if client.poll() is None:
                kill_pid(client.pid)
                client.wait(timeout=30)
            kill_all(marker)
    (server,) = first.servers
    family = {"claude": "claude_code", "gemini": "gemini"}[client_name]
    assert server.owner is not None
    assert server.owner.name == family
    assert server.owner.process.pid in client_family
    assert f"parent_known_client:{family}" in server.evidence
    # Precision: no process of the client itself is taken for a server.
    assert [s.command for s in whole.servers if s.process.pid in client_own] == []
    assert left_bare, "the client left part of the server running"
    targets = plan["targets"]
    assert {t["reason_code"] for t in targets} == {"owner_client_gone"}
    assert {m["pid"] for t in targets for m in t["members"]} == left_bare
    assert applied["success"] is True, applied
    assert left == []


async def test_the_node_claude_left_before_the_supervisor_ran_is_reaped(tmp_path: Path) -> None:
    """``claude mcp list`` stops ``npx`` and leaves its ``node`` (BASELINE.md), all before
    the supervisor starts: no owner was ever recorded. Claude Code gives its servers
    socket pairs, and the kernel says their other ends are released: that is the proof."""
    require("claude", "everything-npx")
    marker = new_marker()
    with temp_home() as home:
        entry = server_entry("everything-npx", name="fleet-test", marker=marker, home=home.home)
        try:
            argv = client_argv("claude", home, [entry], "list")
            run = run_client(argv, env=client_env(home.home), cwd=home.project)
            left_bare = {p.pid for p in leftovers(marker)}
            async with marked_supervisor(tmp_path, marker, home.home) as supervisor:
                plan = await supervisor.plan()
                applied = await supervisor.apply(plan)
                left = leftovers(marker)
        finally:
            kill_all(marker)
    assert not run.timed_out, run.output
    assert left_bare, "claude mcp list left npx's node running"
    targets = plan["targets"]
    assert {t["reason_code"] for t in targets} == {"stdio_abandoned"}
    assert {t["owner"] for t in targets} == {None}
    assert {m["pid"] for t in targets for m in t["members"]} == left_bare
    assert applied["success"] is True, applied
    assert left == []
