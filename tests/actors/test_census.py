"""The census actor on real process trees: FakeClock, real SQLite, real /proc."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from actors.census.actor import CensusSettings
from supervisor.policy.servers.census import ServerRecord
from tests.actors.harness import default_settings
from tests.actors.helpers_app import SettledHarness, harness
from tests.process_trees.trees import child, processes, start_tree

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def census_harness(tmp_path: Path) -> AsyncIterator[SettledHarness]:
    # No client config files in this home: only the process tree can make a server.
    settings = dataclasses.replace(default_settings(), census=CensusSettings(home=tmp_path))
    async with harness(tmp_path, settings=settings) as h:
        yield h


def ours(servers: tuple[ServerRecord, ...], pids: set[int]) -> dict[int, ServerRecord]:
    """The servers among the processes this test started (the host may have others)."""
    return {s.process.pid: s for s in servers if s.process.pid in pids}


async def test_a_server_a_known_client_started_over_pipes_is_found_with_its_owner(
    tmp_path: Path,
) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server", tree=True)])
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, set(tree.children)).values()
    assert server.provenance == "observed"
    assert server.owner is not None
    assert server.owner.process.pid == tree.client
    assert (server.owner.name, server.owner.alive, server.owner.stdio_open) == (
        "claude_code",
        True,
        True,
    )
    assert server.evidence == (
        "stdio_pipes_to_parent",
        "parent_known_client:claude_code",
        "command_names_mcp:mcp-fake-server",
    )
    assert server.command[0] == "mcp-fake-server"
    assert server.cwd == os.getcwd()
    assert "PATH" in server.env_keys
    assert len(server.usage.children) == 1
    assert (server.usage.rss_bytes or 0) > 4 << 20
    assert (server.usage.open_fds or 0) >= 3


async def test_socket_pairs_count_as_stdio_and_the_peer_is_asked_of_the_kernel(
    tmp_path: Path,
) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "gemini", [child("mcp-socket-server", stdio="socket")])
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, set(tree.children)).values()
    assert server.evidence[:2] == ("stdio_socketpair_to_parent", "parent_known_client:gemini")
    assert server.owner is not None
    assert server.owner.stdio_open is True


async def test_processes_that_are_not_servers_are_never_found(tmp_path: Path) -> None:
    with processes() as spawned:
        trees = [
            # An MCP-named child with pipes to a parent that is no MCP client.
            start_tree(spawned, "myagent", [child("mcp-fake-server")]),
            # A known client's child over pipes whose command names no MCP server.
            start_tree(spawned, "claude", [child("ripgrep")]),
            # A daemon-like child of a client: stdio on /dev/null.
            start_tree(spawned, "codex", [child("mcp-daemon", stdio="devnull")]),
        ]
        pipeline = spawned.popen(["sh", "-c", "sleep 60 | cat"])
        pids = {p for t in trees for p in t.children} | {pipeline.pid}
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
            found = ours(census.servers, pids | {p for t in trees for p in (t.client,)})
    assert found == {}


async def test_an_owner_killed_is_gone_by_pid_and_start_and_the_row_says_so(
    tmp_path: Path,
) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server")])
        async with census_harness(tmp_path) as h:
            first = await h.handle.census(fresh=True)
            os.kill(tree.client, signal.SIGKILL)
            spawned.procs[0].wait(timeout=30)
            later = await h.handle.census(fresh=True)
            rows = await h.store.read_observed_servers("host-a")
        (before,) = ours(first.servers, set(tree.children)).values()
        (after,) = ours(later.servers, set(tree.children)).values()
    assert before.owner is not None
    assert before.owner.alive is True
    assert after.owner is not None
    assert (after.owner.alive, after.owner.stdio_open) == (False, False)
    # The owner is the one recorded at first sight, not the server's parent now.
    assert after.owner.process == before.owner.process
    (row,) = [r for r in rows if r["pid"] == after.process.pid]
    assert row["owner_pid"] == tree.client
    assert row["owner_gone_at"] is not None
    assert row["gone_at"] is None
    assert json.loads(row["evidence"]) == list(after.evidence)
