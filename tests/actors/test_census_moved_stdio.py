"""Servers whose stdio is moved above fd 2, as the MCP Python SDK's stdio server does.

The SDK keeps the wire on private copies of fd 0 and fd 1 and points fd 0 at /dev/null,
so a census that looked only at fd 0 and fd 1 never saw a Python server. Real processes,
real /proc, FakeClock.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from supervisor.policy.servers.census import Census
from supervisor.policy.servers.reap_plan import KEEP_OWNER_LIVE, plan_reap
from tests.actors.helpers_app import SettledHarness
from tests.actors.test_census import census_harness, ours
from tests.process_trees.trees import FAKE_SERVER, child, processes, start_tree, wait_stdio_moved
from tests.unavailable import unavailable

pytestmark = pytest.mark.anyio

MOVED = ["--move-stdio"]


@pytest.mark.parametrize(
    ("stdio", "kind"),
    # Pipes as the Python SDK's client gives them; socket pairs as node-based clients do.
    [("pipe", "pipes"), ("socket", "socketpair")],
)
async def test_a_server_that_moved_its_stdio_is_found_by_the_wire_its_client_holds(
    tmp_path: Path, stdio: str, kind: str
) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server", stdio=stdio, args=MOVED)])
        (pid,) = tree.children
        wait_stdio_moved(pid)
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, {pid}).values()
    assert server.evidence == (
        f"stdio_moved_{kind}_to_parent",
        "parent_known_client:claude_code",
        "command_names_mcp:mcp-fake-server",
    )
    assert server.owner is not None
    assert (server.owner.process.pid, server.owner.alive, server.owner.stdio_open) == (
        tree.client,
        True,
        True,
    )


async def test_the_python_sdk_server_mcp_server_time_is_found(tmp_path: Path) -> None:
    server_time = Path(sys.executable).with_name("mcp-server-time")
    if not server_time.exists():
        unavailable("mcp-server-time is not installed (tests/realclients/install.sh)")
    spec = {"argv": ["mcp-server-time"], "stdio": "pipe", "executable": str(server_time)}
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [spec])
        (pid,) = tree.children
        wait_stdio_moved(pid)  # the SDK's stdio server is up
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, {pid}).values()
    assert server.evidence[:2] == ("stdio_moved_pipes_to_parent", "parent_known_client:claude_code")
    assert server.evidence[2].endswith("mcp-server-time")
    assert server.owner is not None
    assert (server.owner.alive, server.owner.stdio_open) == (True, True)


async def test_a_moved_stdio_with_no_wire_to_a_known_client_is_no_server(tmp_path: Path) -> None:
    with processes() as spawned:
        trees = [
            # The wire goes to its parent, but the parent is no MCP client.
            start_tree(spawned, "myagent", [child("mcp-fake-server", args=MOVED)]),
            # A client's child on /dev/null from the start: nothing above fd 2 to find.
            start_tree(spawned, "codex", [child("mcp-daemon", stdio="devnull", args=MOVED)]),
            # A client's tool that moved its stdio: its command names no server.
            start_tree(spawned, "claude", [child("ripgrep", args=MOVED)]),
            # One descriptor to the client is a control channel, not a moved stdio.
            start_tree(spawned, "gemini", [child("mcp-fake-server", args=["--move-stdio-one"])]),
        ]
        pids = {p for t in trees for p in t.children}
        for pid in pids:
            wait_stdio_moved(pid)
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
    assert ours(census.servers, pids) == {}


async def test_a_configured_server_that_moved_its_stdio_is_found_whatever_its_parent(
    tmp_path: Path,
) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    entry = {"command": "python3", "args": [str(FAKE_SERVER), *MOVED]}
    settings.write_text(json.dumps({"mcpServers": {"local": entry}}), encoding="utf-8")
    with processes() as spawned:
        tree = start_tree(spawned, "myagent", [child("python3", args=MOVED)])
        (pid,) = tree.children
        wait_stdio_moved(pid)
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, {pid}).values()
    assert server.evidence == ("stdio_moved_pipes_to_parent", "configured:gemini:local")
    assert server.owner is not None
    assert (server.owner.name, server.owner.process.pid) == ("unknown", tree.client)


@pytest.mark.parametrize("args", [[], MOVED], ids=["plain", "moved"])
async def test_a_client_that_closes_its_ends_is_seen_to_have_closed_them(
    tmp_path: Path, args: list[str]
) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server", args=args)])
        (pid,) = tree.children
        if args:
            wait_stdio_moved(pid)
        async with census_harness(tmp_path) as h:
            before = await h.handle.census(fresh=True)
            os.kill(tree.client, signal.SIGUSR1)
            after = await _until_closed(h, pid)
    (first,), (later,) = ours(before.servers, {pid}).values(), ours(after.servers, {pid}).values()
    assert first.owner is not None
    assert later.owner is not None
    assert (first.owner.alive, first.owner.stdio_open) == (True, True)
    assert (later.owner.alive, later.owner.stdio_open) == (True, False)


async def _until_closed(h: SettledHarness, pid: int) -> Census:
    """A census taken after the client closed its ends (its signal handler runs soon, not
    at once): bounded in count."""
    for _ in range(500):
        census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, {pid}).values()
        if server.owner is not None and server.owner.stdio_open is False:
            break
        await anyio.sleep(0.01)  # real time for the other process, not protocol time
    return census


async def test_a_restart_finds_a_moved_wire_still_held_by_its_live_client(tmp_path: Path) -> None:
    """Restored from the earlier run's row, a moved stdio is looked for again among the
    descriptors its recorded owner holds: found held, so the server is not reaped."""
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server", args=MOVED)])
        (pid,) = tree.children
        wait_stdio_moved(pid)
        async with census_harness(tmp_path) as h:
            await h.handle.census(fresh=True)
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, {pid}).values()
    assert server.owner is not None
    assert (server.owner.alive, server.owner.stdio_open) == (True, True)
    (entry,) = [e for e in plan_reap(census).kept if e.server.process.pid == pid]
    assert entry.reason_code == KEEP_OWNER_LIVE
