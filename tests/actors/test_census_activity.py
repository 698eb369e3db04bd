"""A server's idle time from the kernel's I/O counters: FakeClock, real processes."""

from __future__ import annotations

import json
import os
import selectors
import signal
import time
from pathlib import Path
from typing import IO

import anyio
import pytest

from actors.census.tracked import NO_USAGE, Tracked
from supervisor.policy.servers.census import ProcessRef, ServerRecord
from supervisor.system.io_counters import read_io_bytes
from tests.actors.test_census import census_harness, ours
from tests.process_trees.trees import child, io_quiet, processes, start_tree

pytestmark = pytest.mark.anyio


def io_moved(pid: int, before: int | None) -> bool:
    """Wait (bounded) until the process's own counters moved past ``before``."""
    for _ in range(500):
        now = read_io_bytes(pid)
        if now is not None and before is not None and now > before:
            return True
        time.sleep(0.01)
    return False


async def test_idle_time_counts_from_the_last_sweep_that_saw_the_tree_do_io(
    tmp_path: Path,
) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server", args=["--io-on-usr1"])])
        (pid,) = tree.children
        io_quiet(pid)
        async with census_harness(tmp_path) as h:
            first = ours((await h.handle.census(fresh=True)).servers, {pid})[pid]
            await h.advance(300)
            quiet = ours((await h.handle.census(fresh=True)).servers, {pid})[pid]
            before = read_io_bytes(pid)
            os.kill(pid, signal.SIGUSR1)
            assert io_moved(pid, before), "the fake server did no I/O on SIGUSR1"
            busy = ours((await h.handle.census(fresh=True)).servers, {pid})[pid]
            await h.advance(60)
            later = ours((await h.handle.census(fresh=True)).servers, {pid})[pid]
    # First sight: idle since then, at least; the counters never moved in 300 s.
    assert first.idle_seconds == 0.0
    assert first.usage.io_bytes is not None
    assert quiet.idle_seconds is not None
    assert quiet.idle_seconds >= 300
    assert quiet.usage.io_bytes == first.usage.io_bytes
    # The sweep that saw them move starts the idle clock again.
    assert busy.idle_seconds == 0.0
    assert busy.usage.io_bytes is not None
    assert busy.usage.io_bytes > (quiet.usage.io_bytes or 0)
    assert later.idle_seconds is not None
    assert 60 <= later.idle_seconds < 300


def _tracked() -> Tracked:
    record = ServerRecord(
        process=ProcessRef(pid=10, start="ticks-1"),
        provenance="observed",
        command=("mcp-x",),
        cwd=None,
        env_keys=(),
        uid=None,
        owner=None,
        evidence=(),
        first_seen="t",
        age_seconds=None,
        usage=NO_USAGE,
    )
    return Tracked(server=record, stdio=("pipe:[1]", "pipe:[2]"))


def test_counters_that_cannot_be_read_make_the_idle_time_unknown_never_zero() -> None:
    tracked = _tracked()
    tracked.saw_io(None, 100.0)
    assert tracked.record(None, 200.0).idle_seconds is None
    tracked.saw_io(5_000, 200.0)
    assert tracked.record(None, 260.0).idle_seconds == 60.0
    # A gap in the reads: whatever happened meanwhile is unknown, so the clock restarts
    # from the next read that sees the counters, never from before the gap.
    tracked.saw_io(None, 300.0)
    assert tracked.record(None, 310.0).idle_seconds is None
    tracked.saw_io(5_000, 320.0)
    assert tracked.record(None, 400.0).idle_seconds == 80.0


def test_the_io_counter_of_a_process_moves_only_with_its_own_io() -> None:
    mine = read_io_bytes(os.getpid())
    assert mine is not None
    with open(os.devnull, "wb") as sink:
        sink.write(b"x" * 4096)
        sink.flush()
    after = read_io_bytes(os.getpid())
    assert after is not None
    assert after >= mine + 4096
    assert read_io_bytes(2**22 + 12345) is None  # no such process


def next_child(client_stdout: IO[bytes]) -> int:
    with selectors.DefaultSelector() as selector:
        selector.register(client_stdout, selectors.EVENT_READ)
        assert selector.select(timeout=30), "the fake client started no new copy"
    (pid,) = json.loads(client_stdout.readline())["children"]
    return int(pid)


async def test_an_older_copy_idle_since_its_client_started_a_newer_one_is_superseded(
    tmp_path: Path,
) -> None:
    # A reconnect as Claude Code #79740 describes: the client starts a new copy of the
    # server and keeps the old one's pipes open without using them.
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server", args=["--io-on-usr1"])])
        (old,) = tree.children
        client = spawned.procs[0]
        assert client.stdout is not None
        io_quiet(old)  # its imports read: from here it is idle until used
        async with census_harness(tmp_path) as h:
            await h.handle.census(fresh=True)  # the old copy's counters, first read
            # Not protocol time: the kernel stamps starts in 10 ms ticks, and the newer copy
            # must start a few ticks after that read, as it would in use.
            await anyio.sleep(0.05)
            os.kill(tree.client, signal.SIGUSR2)
            new = next_child(client.stdout)
            spawned.track(new)
            await h.handle.census(fresh=True)
            await h.advance(30)
            replaced = await h.handle.census_report(fresh=True)
            # The old copy is used again: from now on it is no longer superseded.
            before = read_io_bytes(old)
            os.kill(old, signal.SIGUSR1)
            assert io_moved(old, before)
            used = await h.handle.census_report(fresh=True)
    ours_now = [s for s in replaced.superseded if s.server.process.pid in (old, new)]
    (found,) = ours_now
    assert found.server.process.pid == old
    assert found.newer.pid == new
    assert found.idle_seconds >= 30
    assert found.quiet_since_boot <= found.newer_started_since_boot
    assert replaced.summary.superseded >= 1
    assert [s for s in used.superseded if s.server.process.pid in (old, new)] == []


def test_a_kept_descriptor_reads_its_own_incarnation_only() -> None:
    import subprocess

    from supervisor.system.io_counters import IoCounters
    from supervisor.system.proc_reads import read_stat_facts

    counters = IoCounters()
    child = subprocess.Popen(["sleep", "30"])
    try:
        # Once it has loaded its libraries: the two reads below must see it idle.
        io_quiet(child.pid)
        facts = read_stat_facts(child.pid)
        assert facts is not None
        first = counters.read(child.pid, facts.start)
        assert first is not None
        assert len(counters) == 1
        assert counters.read(child.pid, facts.start) == first  # one pread on the kept fd
        # Another incarnation under that pid is never read through it, nor opened.
        assert counters.read(child.pid, "ticks-1") is None
    finally:
        child.kill()
        child.wait()
    assert counters.read(child.pid, facts.start) is None  # gone: the read fails, closes
    assert len(counters) == 0
    counters.keep_only(set())
    counters.close()


def test_past_its_limit_a_read_is_a_one_off_that_keeps_no_descriptor() -> None:
    from supervisor.system.io_counters import IoCounters
    from supervisor.system.proc_reads import read_stat_facts

    facts = read_stat_facts(os.getpid())
    assert facts is not None
    counters = IoCounters(limit=0)
    assert counters.read(os.getpid(), facts.start) is not None
    assert len(counters) == 0
