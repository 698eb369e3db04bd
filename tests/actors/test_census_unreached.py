"""What survived a server's leader while its client runs: out of the client's reach, or not.

A client that stops a server (a reconnect) signals the pid it started; a member of the
tree in a session of its own, as a browser a Playwright server started, runs on. Its
client still runs, so the owner's rule alone keeps it for as long as the client lives.
Real processes, real /proc and sock_diag, FakeClock.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from supervisor.policy.servers.census import Census, ServerRecord
from supervisor.policy.servers.reap_plan import KEEP_OWNER_LIVE, REAP_UNREACHABLE, plan_reap
from supervisor.policy.servers.summary import is_orphaned
from supervisor.system.proc_reads import fd_ends
from tests.actors.test_census import census_harness, ours
from tests.process_trees.trees import child, kids_of, parent_of, processes, start_tree, until

pytestmark = pytest.mark.anyio


def _browser(*way: str) -> dict[str, Any]:
    """A server whose child runs as Playwright's browser does; its stderr, as the leader's,
    a pipe the client reads (``way``: the child's way in, e.g. ``--child-listen PATH``)."""
    spec = child("mcp-fake-server", args=["--browser-child", sys.executable, *way])
    return spec | {"stderr": "pipe"}


@contextmanager
def _short_dir() -> Iterator[Path]:
    """A directory whose socket paths fit a Unix socket address (108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="fs-", dir="/tmp") as name:
        yield Path(name)


async def _after_leader_killed(tmp_path: Path, leader: int, browser: int) -> tuple[Census, Census]:
    """The census before, and two sweeps after, the client's stop of ``leader`` alone: the
    first takes the survivor (its leader may go while the trees are read), the second has
    judged it."""
    async with census_harness(tmp_path) as h:
        before = await h.handle.census(fresh=True)
        os.kill(leader, signal.SIGKILL)  # as a client stops a server: its pid only
        until(lambda: parent_of(browser) not in (None, leader), "the browser to be adopted")
        await h.handle.census(fresh=True)
        after = await h.handle.census(fresh=True)
    return before, after


def _survivor(census: Census, leader: int, browser: int) -> ServerRecord:
    (left,) = ours(census.servers, {leader, browser}).values()
    assert left.process.pid == browser
    assert f"survived_server_leader:{leader}" in left.evidence
    assert left.owner is not None
    assert (left.owner.alive, left.owner.stdio_open) == (True, None)
    return left


async def test_a_browser_its_stopped_server_left_is_out_of_its_live_clients_reach(
    tmp_path: Path,
) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [_browser()])
        (leader,) = tree.children
        (browser,) = kids_of(leader)
        before, after = await _after_leader_killed(tmp_path, leader, browser)
        assert parent_of(tree.client) is not None  # the client ran throughout
    (entry,) = [e for e in plan_reap(before).kept if e.server.process.pid == leader]
    assert entry.reason_code == KEEP_OWNER_LIVE
    left = _survivor(after, leader, browser)
    assert left.stdio_abandoned is True, left.stdio_detail
    assert is_orphaned(left)
    (target,) = [e for e in plan_reap(after).targets if e.server.process.pid == browser]
    assert target.reason_code == REAP_UNREACHABLE
    assert "neither its owner nor another server is connected to it" in target.detail


@pytest.mark.parametrize("way", ["listens", "connected_to_another_server"])
async def test_what_survived_with_a_way_in_is_kept(tmp_path: Path, way: str) -> None:
    """A survivor that listens on a Unix socket (a daemon a newer copy may reuse), or that
    another server of the client is connected to, may still be used: kept."""
    with _short_dir() as short, processes() as spawned:
        path = str(short / "way.sock")
        if way == "listens":
            specs = [_browser("--child-listen", path)]
        else:
            other = child("mcp-other-server", args=["--listen", path])
            specs = [_browser("--child-connect", path), other]
        tree = start_tree(spawned, "claude", specs)
        leader = tree.children[0]
        (browser,) = kids_of(leader)
        until(lambda: _sockets(browser) >= 1, "the browser to open its socket")
        if way != "listens":
            until(lambda: _sockets(tree.children[1]) >= 2, "the other server to accept")
        _, after = await _after_leader_killed(tmp_path, leader, browser)
    left = _survivor(after, leader, browser)
    assert left.stdio_abandoned is None
    said = "listens on a Unix socket" if way == "listens" else "another server's tree is connected"
    assert said in (left.stdio_detail or "")
    assert not is_orphaned(left)
    (entry,) = [e for e in plan_reap(after).kept if e.server.process.pid == browser]
    assert entry.reason_code == KEEP_OWNER_LIVE
    assert said in entry.detail  # the plan says what keeps it


def _sockets(pid: int) -> int:
    return sum(link.startswith("socket:") for link in fd_ends(pid) or ())
