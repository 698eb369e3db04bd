"""Leaks from before the supervisor ran: a server whose client is gone, never seen alive.

No owner was recorded, so only the server's own stdio can tell: socket-pair halves (what
node-based clients give their servers) whose other ends the kernel says are released, or
pipes nobody holds the other side of (tests/actors/test_census_pipes.py). Real processes,
real /proc, FakeClock.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from supervisor.policy.servers.reap_plan import REAP_STDIO_ABANDONED, plan_reap
from tests.actors.test_census import census_harness, ours
from tests.process_trees.trees import Tree, child, parent_of, processes, start_tree, until
from tests.spawned import Spawned

pytestmark = pytest.mark.anyio


def _orphaned(spawned: Spawned, tree: Tree) -> None:
    """Kill the client (its ends of the stdio go with it) and wait for the adoption."""
    client = next(p for p in spawned.procs if p.pid == tree.client)
    client.kill()
    client.wait()
    for pid in tree.children:
        until(partial(_adopted, pid, tree.client), f"pid {pid} to be adopted")


def _adopted(pid: int, client: int) -> bool:
    return parent_of(pid) not in (None, client)


async def test_a_server_left_on_released_socket_pairs_is_found_and_planned(
    tmp_path: Path,
) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server", stdio="socket")])
        (pid,) = tree.children
        _orphaned(spawned, tree)
        async with census_harness(tmp_path) as h:  # the supervisor starts only now
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, {pid}).values()
    assert server.owner is None
    assert server.evidence == (
        "stdio_socketpair",
        "stdio_abandoned",
        "command_names_mcp:mcp-fake-server",
    )
    assert server.stdio_abandoned is True
    (target,) = [t for t in plan_reap(census).targets if t.server.process.pid == pid]
    assert target.reason_code == REAP_STDIO_ABANDONED


async def test_what_cannot_be_proven_abandoned_is_not_listed(tmp_path: Path) -> None:
    with processes() as spawned:
        # Released socket pairs, but the command names no MCP server.
        unnamed = start_tree(spawned, "claude", [child("node-helper", stdio="socket")])
        _orphaned(spawned, unnamed)
        # Socket pairs still held by the client: not abandoned (and not its server: a
        # stand-in named like no client).
        held = start_tree(spawned, "myagent", [child("mcp-fake-server", stdio="socket")])
        pids = {*unnamed.children, *held.children}
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
    assert ours(census.servers, pids) == {}
