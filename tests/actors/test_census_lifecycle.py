"""The census over time: pid reuse, a restart, wrapped servers, servers that exec again,
configured ones, the cost."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from actors.census.actor import CensusSettings
from supervisor.policy.servers.census import ServerRecord
from tests.actors.harness import default_settings
from tests.actors.helpers_app import SettledHarness, harness
from tests.actors.test_census import census_harness, ours
from tests.process_trees.trees import (
    EXEC_LATER,
    FAKE_SERVER,
    WRAPPED_LAUNCHER,
    child,
    gone,
    processes,
    start_tree,
)
from tests.unavailable import unavailable

pytestmark = pytest.mark.anyio

_NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"


def _spawn_at(pid: int) -> subprocess.Popen[bytes] | None:
    """A sleeper under ``pid`` (root only: the kernel is told which pid to hand out)."""
    for _ in range(20):  # another process may take the number first
        try:
            with open(_NS_LAST_PID, "w", encoding="ascii") as handle:
                handle.write(str(pid - 1))
        except OSError:
            return None
        proc = subprocess.Popen(["sleep", "60"])
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


def _until(check: Callable[[], object], what: str) -> None:
    for _ in range(1000):
        if check():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_reused_pid_is_a_new_first_sight_and_the_old_server_is_gone(
    tmp_path: Path,
) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server")])
        (pid,) = tree.children
        async with census_harness(tmp_path) as h:
            first = await h.handle.census(fresh=True)
            (old,) = ours(first.servers, {pid}).values()
            os.kill(tree.client, signal.SIGKILL)
            spawned.procs[0].wait(timeout=30)
            os.kill(pid, signal.SIGKILL)
            _until(lambda: gone(pid), f"pid {pid} to be reaped")
            newcomer = _spawn_at(pid)
            if newcomer is None:
                unavailable("cannot steer pid allocation here (ns_last_pid needs root)")
            try:
                later = await h.handle.census(fresh=True)
                seen_start = h.supervisor.census.tracker.start_seen(pid)  # type: ignore[union-attr]
                rows = await h.store.read_observed_servers("host-a", live_only=False)
            finally:
                newcomer.kill()
                newcomer.wait()
    assert ours(later.servers, {pid}) == {}
    assert seen_start is not None
    assert seen_start != old.process.start
    (row,) = [r for r in rows if r["pid"] == pid]
    assert row["process_start_time"] == old.process.start
    assert row["gone_at"] is not None


async def test_a_restart_keeps_the_owner_recorded_at_first_sight(tmp_path: Path) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-fake-server")])
        async with census_harness(tmp_path) as h:
            await h.handle.census(fresh=True)
        os.kill(tree.client, signal.SIGKILL)
        spawned.procs[0].wait(timeout=30)
        # Now the server's parent is whatever adopted it: no client, and its stdio goes
        # nowhere. Only the row of the earlier run says whose it was.
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, set(tree.children)).values()
    assert server.owner is not None
    assert server.owner.process.pid == tree.client
    assert (server.owner.name, server.owner.alive) == ("claude_code", False)


async def test_a_wrapped_server_is_counted_once_as_wrapped(tmp_path: Path) -> None:
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [child("mcp-wrapped-server", wrapped=True)])
        (pid,) = tree.children
        _until(
            lambda: str(FAKE_SERVER).encode() in Path(f"/proc/{pid}/cmdline").read_bytes(),
            "the launcher to exec the server",
        )
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
            rows = await h.store.read_observed_servers("host-a", live_only=False)
        found = [s for s in census.servers if s.process.pid == pid]
    assert [s.provenance for s in found] == ["wrapped"]
    assert found[0].evidence == ("exec_marker",)
    assert found[0].owner is not None
    assert found[0].owner.process.pid == tree.client
    assert [r for r in rows if r["pid"] == pid] == []  # wrapped servers have registry rows


def _runs(pid: int, word: str) -> bool:
    return word.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()


async def test_the_exec_wrapper_seen_before_its_exec_becomes_the_wrapped_server(
    tmp_path: Path,
) -> None:
    """A sight taken between the wrapper's start and its execve (the kernel reports the
    wrapper's own exec first) is no server; once it has exec'd, the same pid and start are
    the wrapped server, not an observed one kept from that first sight."""
    wrapper = tmp_path / "exec_in_place.py"  # the real wrapper's script name
    wrapper.symlink_to(WRAPPED_LAUNCHER)
    hold = tmp_path / "exec-now"
    name = "mcp-held-server"  # what would make an observed server of it, parent a client
    spec = {"argv": [name, str(wrapper), name, sys.executable, str(hold)], "stdio": "pipe",
            "executable": sys.executable}  # fmt: skip
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [spec])
        (pid,) = tree.children
        _until(lambda: _runs(pid, wrapper.name), "the wrapper to start")
        async with census_harness(tmp_path) as h:
            before = await h.handle.census(fresh=True)
            hold.touch()
            _until(lambda: _runs(pid, str(FAKE_SERVER)), "the wrapper to exec the server")
            after = await h.handle.census(fresh=True)
        found = [s for s in after.servers if s.process.pid == pid]
    assert ours(before.servers, {pid}) == {}
    assert [s.provenance for s in found] == ["wrapped"]
    assert found[0].evidence == ("exec_marker",)


async def test_a_command_configured_in_a_client_file_is_found_whatever_its_parent(
    tmp_path: Path,
) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    entry = {"command": "python3", "args": [str(FAKE_SERVER), "--configured"]}
    settings.write_text(json.dumps({"mcpServers": {"local": entry}}), encoding="utf-8")
    with processes() as spawned:
        tree = start_tree(spawned, "myagent", [child("python3", args=["--configured"])])
        async with census_harness(tmp_path) as h:
            census = await h.handle.census(fresh=True)
        (server,) = ours(census.servers, set(tree.children)).values()
    assert server.evidence == ("stdio_pipes_to_parent", "configured:gemini:local")
    assert server.owner is not None
    assert (server.owner.name, server.owner.process.pid) == ("unknown", tree.client)


async def test_a_steady_sweep_reads_only_what_it_has_not_seen(tmp_path: Path) -> None:
    async with census_harness(tmp_path) as h:
        await h.handle.census(fresh=True)
        tracker = h.supervisor.census.tracker  # type: ignore[union-attr]
        first = tracker.first_sights
        await h.handle.census(fresh=True)
        second = tracker.first_sights
    # The second sweep looks again only at processes new since (or too young to have
    # exec'd at the first): on a quiet host, a handful.
    assert first > 0
    assert second < first


@asynccontextmanager
async def _settling(tmp_path: Path, settle_seconds: float) -> AsyncIterator[SettledHarness]:
    """The census with this settle time, and no first-sight pass of its own (the test
    says when the kernel reports an exec)."""
    census = CensusSettings(home=tmp_path, settle_seconds=settle_seconds, process_events=False)
    async with harness(
        tmp_path, settings=dataclasses.replace(default_settings(), census=census)
    ) as h:
        yield h


def _exec_later(tmp_path: Path) -> tuple[dict[str, object], Path]:
    """A launcher a client starts over pipes, named as an MCP server is (so taken for one
    at first sight), that execs ``mcp-time-server`` once the returned path exists."""
    hold = tmp_path / "exec-now"
    argv = ["mcp-launcher", str(EXEC_LATER), str(hold), "mcp-time-server", sys.executable]
    return {"argv": argv, "stdio": "pipe", "executable": sys.executable}, hold


def _same_judgement(first: ServerRecord, now: ServerRecord) -> None:
    assert first.command[0] == "mcp-launcher"
    assert now.command == ("mcp-time-server", str(FAKE_SERVER))
    assert (now.provenance, now.evidence, now.first_seen, now.owner) == (
        first.provenance, first.evidence, first.first_seen, first.owner,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("settle", "events"),
    [(3600.0, False), (0.0, True), (0.0, False)],
    ids=["young", "kernel_event", "settled_next_sweep"],
)
async def test_a_server_that_execs_after_its_first_sight_is_what_it_runs_now(
    tmp_path: Path, settle: float, events: bool
) -> None:
    """A launcher judged a server at first sight execs the real server: the same pid and
    start stay a server on that judgement, and its record and row take what it runs now.
    Seen again while young (the settle time), when the kernel reports the exec, or, a
    settled server no kernel event was heard of, at the next sweep (its command line moved)."""
    spec, hold = _exec_later(tmp_path)
    with processes() as spawned:
        tree = start_tree(spawned, "claude", [spec])
        (pid,) = tree.children
        _until(lambda: _runs(pid, EXEC_LATER.name), "the launcher to start")
        async with _settling(tmp_path, settle) as h:
            (first,) = ours((await h.handle.census(fresh=True)).servers, {pid}).values()
            hold.touch()
            _until(lambda: _runs(pid, str(FAKE_SERVER)), "the launcher to exec the server")
            census: Any = h.supervisor.census
            if events:
                await census.looks_at(frozenset({pid}))
            elif settle:
                await census.first_sights()  # the listing pass between sweeps
            if events or settle:  # taken before any sweep
                assert census.tracker.servers[pid].server.command[0] == "mcp-time-server"
            (swept,) = ours((await h.handle.census(fresh=True)).servers, {pid}).values()
            rows = await h.store.read_observed_servers("host-a", live_only=False)
    _same_judgement(first, swept)
    (row,) = [r for r in rows if r["pid"] == pid]
    assert json.loads(row["command"]) == list(swept.command)
