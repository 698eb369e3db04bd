"""Pipe leaks proven from the kernel: a server whose client left it on pipes nobody else holds.

A short-lived launcher starts the server on pipes, hands copies of its ends to holders,
and exits. The server is planned only when no process holds the client side of its pipes;
every holder keeps it, and once the last holder exits the next census finds it. Real
processes, real /proc, FakeClock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from supervisor.policy.servers.abandoned import EndState, judge_abandoned
from supervisor.policy.servers.reap_plan import REAP_STDIO_ABANDONED, plan_reap
from supervisor.system.pipe_ends import PipeEnd, probe_pipe
from tests.actors.harness import RETIRER
from tests.actors.test_census import census_harness, ours
from tests.integration.test_fleet_page_reap import clock_running
from tests.integration.test_same_tick_reuse import _can_steer_pids, _steer_next_pid
from tests.process_trees.trees import parent_of, processes, running, until
from tests.spawned import Spawned, wait_exec_of
from tests.unavailable import unavailable

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent.parent / "process_trees"
LAUNCHER = HERE / "pipe_launcher.py"
FAKE_SERVER = HERE / "fake_server.py"
NOBODY = 65534


def launch(spawned: Spawned, holders: list[dict[str, Any]]) -> tuple[int, list[int]]:
    """The server's pid and its holders', once the launcher is gone (the server adopted)."""
    spec = {"server": ["mcp-fake-server", str(FAKE_SERVER)], "executable": sys.executable,
            "holders": holders}  # fmt: skip
    launcher = spawned.popen([sys.executable, str(LAUNCHER), json.dumps(spec)],
                             stdout=subprocess.PIPE)  # fmt: skip
    out, _ = launcher.communicate(timeout=60)
    told = json.loads(out)
    server, held_by = int(told["server"]), [int(p) for p in told["holders"]]
    for pid in (server, *held_by):
        spawned.track(pid)
        wait_exec_of(pid)
    until(partial(lambda p, q: parent_of(p) not in (None, q), server, launcher.pid),
          f"pid {server} to be adopted")  # fmt: skip
    return server, held_by


def _kill(spawned: Spawned, pid: int) -> None:
    os.kill(pid, 9)  # a holder the test started and verified just above
    until(partial(lambda p: not running(p), pid), f"pid {pid} to exit")
    spawned.forget(pid)


async def test_a_server_left_on_pipes_nobody_holds_is_found_and_planned(tmp_path: Path) -> None:
    with processes() as spawned:
        pid, _ = launch(spawned, [])
        async with census_harness(tmp_path) as h:  # the supervisor starts only now
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, {pid}).values()
        plan = plan_reap(census)
    assert server.owner is None
    assert server.evidence == (
        "stdio_pipes",
        "stdio_abandoned_pipe",
        "command_names_mcp:mcp-fake-server",
    )
    assert server.stdio_abandoned is True
    assert server.stdio_detail is not None
    assert "stdin pipe:[" in server.stdio_detail
    assert "no write end is open" in server.stdio_detail
    assert "no read end is open" in server.stdio_detail
    (target,) = [t for t in plan.targets if t.server.process.pid == pid]
    assert target.reason_code == REAP_STDIO_ABANDONED
    assert "no write end is open" in target.detail


HOLDERS = {
    "a sleep holds stdin's write end": [{"kind": "sleep", "end": "stdin"}],
    "a sleep holds stdout's read end": [{"kind": "sleep", "end": "stdout"}],
    "a shell keeps a copy of stdin's write end": [{"kind": "shell", "end": "stdin"}],
    "the server holds both ends of its stdin pipe": [{"kind": "server", "end": "stdin"}],
}


@pytest.mark.parametrize("holders", list(HOLDERS.values()), ids=list(HOLDERS))
async def test_a_pipe_whose_client_side_a_process_still_holds_is_kept(
    tmp_path: Path, holders: list[dict[str, Any]]
) -> None:
    with processes() as spawned:
        pid, held_by = launch(spawned, holders)
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
            assert ours(census.servers, {pid}) == {}
            assert pid not in {t.server.process.pid for t in plan_reap(census).targets}
            if not held_by:
                return  # the server holds it itself: nothing else can let it go
            for holder in held_by:
                _kill(spawned, holder)
            # The holder gone, the same server is judged again and proven.
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, {pid}).values()
    assert server.stdio_abandoned is True
    assert "stdio_abandoned_pipe" in server.evidence


async def test_a_pipe_another_users_process_holds_is_kept(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        unavailable("only root can start a holder as another user")
    with processes() as spawned:
        pid, (holder,) = launch(spawned, [{"kind": "sleep", "end": "stdin", "uid": NOBODY}])
        assert os.stat(f"/proc/{holder}").st_uid == NOBODY
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
    assert ours(census.servers, {pid}) == {}


async def test_a_server_the_supervisor_may_not_inspect_is_kept(tmp_path: Path) -> None:
    """Its pipes cannot be opened by a supervisor of another user: unknown, kept."""
    if os.geteuid() != 0:
        unavailable("only root can run the probe as another user here")
    with processes() as spawned:
        pid, _ = launch(spawned, [])
        link = os.readlink(f"/proc/{pid}/fd/0")
        end = _probe_as(NOBODY, pid, link)
        mine = probe_pipe(pid, 0, link)
    assert end.released is None
    assert "cannot be read" in end.why
    assert mine.released is True  # root may inspect it: the same pipe is proven
    verdict = judge_abandoned([EndState(link=link, released=end.released, why=end.why)])
    assert verdict.abandoned is False


def _probe_as(uid: int, pid: int, link: str) -> PipeEnd:
    """``probe_pipe`` run by a forked copy of this process that became ``uid``."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe and exits
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            end = probe_pipe(pid, 0, link)
            os.write(write, json.dumps([end.access, end.released, end.why]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as told:
        access, released, why = json.loads(told.read())
    os.waitpid(child, 0)
    return PipeEnd(link=link, access=access, released=released, why=why)


#: Tries at handing a just-freed pid to the newcomer; another process may take it first.
_REUSE_TRIES = 200


def _newcomer_at(spawned: Spawned, pid: int) -> subprocess.Popen[bytes] | None:
    """An MCP-named process at ``pid`` (which must be free) whose pipes this test holds."""
    for _ in range(_REUSE_TRIES):
        _steer_next_pid(pid)
        proc = spawned.popen(
            ["mcp-fake-server", str(FAKE_SERVER)],
            executable=sys.executable,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        if proc.pid == pid:
            return proc
        proc.kill()  # our own child, by its Popen
        proc.wait()
        spawned.forget(proc.pid)
    return None


async def test_a_process_that_reuses_a_planned_pid_is_judged_anew_and_never_signalled(
    tmp_path: Path,
) -> None:
    if not _can_steer_pids():
        unavailable("pid reuse needs root and a writable ns_last_pid")
    with processes() as spawned:
        pid, _ = launch(spawned, [])
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
            plan = plan_reap(census)
            assert pid in {t.server.process.pid for t in plan.targets}
            _kill(spawned, pid)  # it exits between the plan and the apply
            until(lambda: not os.path.exists(f"/proc/{pid}"), f"pid {pid} to be freed")
            newcomer = _newcomer_at(spawned, pid)
            assert newcomer is not None, "no newcomer got the freed pid"
            wait_exec_of(pid)
            async with clock_running(h):
                refused = dict(await h.handle.reap_apply(RETIRER, plan_token=plan.plan_token))
            again = await h.handle.census(fresh=True)
        assert newcomer.poll() is None  # never signalled
    assert refused["code"] == "plan_changed"
    assert pid not in {t.server.process.pid for t in plan_reap(again).targets}
