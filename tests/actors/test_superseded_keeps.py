"""Never a wrong stop, on real processes: with the opt-in stop's rule applied to the real
census after every step, each of these keeps every copy (FakeClock, real /proc)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import anyio
import pytest

from supervisor.policy.servers.reap_plan import plan_superseded_stop
from supervisor.system.io_counters import read_io_bytes
from tests.actors.helpers_app import SettledHarness
from tests.actors.test_census import census_harness
from tests.actors.test_census_activity import io_moved, next_child
from tests.process_trees.trees import child, io_quiet, processes, start_tree
from tests.spawned import Spawned

pytestmark = pytest.mark.anyio

#: The opt-in's time in these tests; every pause below is shorter.
AFTER = 60.0
_SERVER = child("mcp-fake-server", args=["--io-on-usr1"])


async def _due(h: SettledHarness, pids: set[int]) -> set[int]:
    """The copies among ``pids`` the opt-in stop would stop now."""
    census = await h.handle.census(fresh=True)
    plan = plan_superseded_stop(census, after_seconds=AFTER)
    return {t.server.process.pid for t in plan.targets} & pids


def _use(pid: int) -> None:
    """One call on that copy: its tree moves bytes."""
    before = read_io_bytes(pid)
    os.kill(pid, signal.SIGUSR1)
    assert io_moved(pid, before)


@contextmanager
def _one_client(spawned: Spawned) -> Iterator[tuple[int, int, IO[bytes]]]:
    """A client with one copy (quiet now): its pid, the copy's, the client's stdout."""
    tree = start_tree(spawned, "claude", [_SERVER])
    (old,) = tree.children
    io_quiet(old)
    client = spawned.procs[0]
    assert client.stdout is not None
    yield tree.client, old, client.stdout


async def _second_copy(spawned: Spawned, client: int, stdout: IO[bytes]) -> int:
    await anyio.sleep(0.05)  # real time: a start some clock ticks after the last read
    os.kill(client, signal.SIGUSR2)
    new = next_child(stdout)
    spawned.track(new)
    io_quiet(new)
    return new


async def test_a_sub_agent_overlap_alternating_calls_keeps_both(tmp_path: Path) -> None:
    with processes() as spawned, _one_client(spawned) as (client, old, out):
        async with census_harness(tmp_path) as h:
            await h.handle.census(fresh=True)
            new = await _second_copy(spawned, client, out)
            due: list[set[int]] = []
            for step in range(6):  # calls alternate, each pause shorter than the time
                _use(old if step % 2 else new)
                await h.advance(AFTER - 15)
                due.append(await _due(h, {old, new}))
            # The check can fail: once a third copy starts and neither of these is used
            # again for longer than the time, both are due.
            await h.handle.census(fresh=True)
            third = await _second_copy(spawned, client, out)
            await h.advance(AFTER + 1)
            rested = await _due(h, {old, new, third})
    assert due == [set()] * 6
    assert rested == {old, new}


async def test_a_copy_doing_periodic_work_of_its_own_is_kept(tmp_path: Path) -> None:
    with processes() as spawned, _one_client(spawned) as (client, old, out):
        async with census_harness(tmp_path) as h:
            await h.handle.census(fresh=True)
            new = await _second_copy(spawned, client, out)
            due = []
            for _ in range(5):
                _use(old)  # its own timer's work: it is not idle
                await h.advance(AFTER - 10)
                due.append(await _due(h, {old, new}))
    assert due == [set()] * 5


async def test_a_restarted_daemon_starts_every_idle_clock_unknown(tmp_path: Path) -> None:
    (tmp_path / "before").mkdir()
    with processes() as spawned, _one_client(spawned) as (client, old, out):
        async with census_harness(tmp_path / "before") as h:
            await h.handle.census(fresh=True)
            new = await _second_copy(spawned, client, out)
            await h.advance(AFTER * 3)
            before_restart = await _due(h, {old, new})
        # The daemon restarts: the old copy is first read after the newer one started.
        (tmp_path / "after").mkdir()
        async with census_harness(tmp_path / "after") as h:
            await h.handle.census(fresh=True)
            await h.advance(AFTER * 10)
            after_restart = await _due(h, {old, new})
    assert before_restart == {old}  # the same copies, judged by a daemon that saw them
    assert after_restart == set()


async def test_two_sessions_of_one_client_keep_their_copies(tmp_path: Path) -> None:
    with processes() as spawned:
        first = start_tree(spawned, "claude", [_SERVER])
        second = start_tree(spawned, "claude", [_SERVER])
        pids = {*first.children, *second.children}
        for pid in pids:
            io_quiet(pid)
        async with census_harness(tmp_path) as h:
            await h.handle.census(fresh=True)
            await h.advance(AFTER * 10)
            due = await _due(h, pids)
    assert due == set()
