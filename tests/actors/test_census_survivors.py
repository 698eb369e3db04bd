"""What is left of a server whose leader is gone: its tree's topmost survivors.

Clients stop a server by signalling its pid, not its group: ``npx`` goes and the ``node``
it started stays, adopted by init. The census keeps the survivors as the server, owned
as before, so a reap can stop them once their client is gone. Real processes, real
/proc, FakeClock.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from functools import partial
from pathlib import Path

import pytest

from actors.census.actor import CensusSettings
from supervisor.policy.servers.reap_plan import KEEP_OWNER_LIVE, REAP_OWNER_GONE, plan_reap
from tests.actors.harness import default_settings
from tests.actors.helpers_app import harness
from tests.actors.test_census import census_harness, ours
from tests.process_trees.trees import (
    FAKE_SERVER,
    child,
    kids_of,
    parent_of,
    processes,
    running,
    start_tree,
    until,
)

pytestmark = pytest.mark.anyio


async def test_the_child_of_a_killed_leader_is_the_server_now_and_is_reaped_with_its_client(
    tmp_path: Path,
) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server", tree=True)])
        (leader,) = tree.children
        (member,) = kids_of(leader)
        async with census_harness(tmp_path) as h:
            first = await h.handle.census(fresh=True)
            os.kill(leader, signal.SIGKILL)  # as a client stops a server: its pid only
            _until_adopted(member, leader)
            survived = await h.handle.census(fresh=True)
            client = next(p for p in spawned.procs if p.pid == tree.client)
            client.kill()
            client.wait()
            orphaned = await h.handle.census(fresh=True)
            rows = await h.store.read_observed_servers("host-a", live_only=False)
    (server,) = ours(first.servers, {leader, member}).values()
    assert [m.pid for m in server.usage.children] == [member]
    (left,) = ours(survived.servers, {leader, member}).values()
    assert left.process == server.usage.children[0]
    assert left.evidence == (*server.evidence, f"survived_server_leader:{leader}")
    assert left.owner is not None
    assert left.owner.process == server.owner.process  # type: ignore[union-attr]
    assert (left.owner.alive, left.owner.stdio_open) == (True, True)
    (kept,) = [e for e in plan_reap(survived).kept if e.server.process.pid == member]
    assert kept.reason_code == KEEP_OWNER_LIVE
    (target,) = [e for e in plan_reap(orphaned).targets if e.server.process.pid == member]
    assert target.reason_code == REAP_OWNER_GONE
    by_pid = {r["pid"]: r for r in rows if r["pid"] in (leader, member)}
    assert by_pid[leader]["gone_at"] is not None
    assert by_pid[member]["gone_at"] is None
    assert by_pid[member]["owner_pid"] == tree.client


async def test_a_leader_whose_tree_exited_with_it_leaves_no_survivor(tmp_path: Path) -> None:
    """A leader with no tree leaves nothing; a member that exited with it is not kept."""
    with processes() as spawned:
        tree = start_tree(
            spawned, "claude", [child("mcp-fake-server"), child("mcp-fake-server", tree=True)]
        )
        lone, parent = tree.children
        (member,) = kids_of(parent)
        async with census_harness(tmp_path) as h:
            await h.handle.census(fresh=True)
            os.kill(lone, signal.SIGKILL)
            os.kill(member, signal.SIGKILL)
            os.kill(parent, signal.SIGKILL)
            _until_dead(lone, member, parent)
            later = await h.handle.census(fresh=True)
    assert ours(later.servers, {lone, parent, member}) == {}


async def test_a_process_that_becomes_a_server_keeps_the_children_it_had(tmp_path: Path) -> None:
    """A client's child seen before it exec'd its server (a shell, young, no server yet)
    is looked at again; the child it had started by then stays a member of its tree."""
    settings = dataclasses.replace(
        default_settings(), census=CensusSettings(home=tmp_path, settle_seconds=3600.0)
    )
    go = tmp_path / "exec-now"
    script = (
        f"{sys.executable} {FAKE_SERVER} & "
        f"while [ ! -e {go} ]; do sleep 0.01; done; "
        f"exec {sys.executable} {FAKE_SERVER} mcp-fake-server"
    )
    shell = {"argv": ["sh", "-c", script], "stdio": "pipe", "executable": "/bin/sh"}
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [shell])
        (leader,) = tree.children
        until(partial(_python_kids, leader), "the shell to start its child")
        (member,) = _python_kids(leader)
        spawned.track(member)
        async with harness(tmp_path, settings=settings) as h:
            before = await h.handle.census(fresh=True)
            go.touch()
            until(partial(_runs_python, leader), "the shell to exec the server")
            after = await h.handle.census(fresh=True)
    assert ours(before.servers, {leader, member}) == {}
    (server,) = ours(after.servers, {leader, member}).values()
    assert server.process.pid == leader
    assert [m.pid for m in server.usage.children] == [member]


def _runs_python(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().startswith(sys.executable.encode())
    except OSError:
        return False


def _python_kids(pid: int) -> list[int]:
    """The children of ``pid`` running this interpreter (not the loop's ``sleep``)."""
    return [kid for kid in kids_of(pid) if _runs_python(kid)]


def _until_adopted(pid: int, leader: int) -> None:
    """Until the killed leader's child has another parent (the kernel reparents at exit)."""
    until(lambda: parent_of(pid) not in (None, leader), f"pid {pid} to be adopted")


def _until_dead(*pids: int) -> None:
    until(lambda: not any(running(p) for p in pids), f"{pids} to exit")
