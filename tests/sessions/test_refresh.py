"""Gemini CLI's ``/mcp refresh`` in a real interactive session (on a pseudo-terminal,
offline in a network namespace of its own), bare against wrapped: what a refresh leaves
of a server while its client lives.

Gemini CLI #5318 reported every refresh adding a server process. Version 0.61 sends the
old copy SIGTERM before it starts the new one: a server that exits on it goes. One that
ignores it (the stubborn stub) is left running, its client alive, and the client keeps
its stdio open: bare, it stays. It is no orphan, so neither the guard nor a plain reap
touches it; wrapped by ``clients wrap``, it is a superseded copy: reported, kept by a plain
reap plan, reaped with ``--include superseded``; the new copy and the client untouched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from tests.actors.harness import RETIRER
from tests.integration.daemon import Daemon
from tests.process_trees.marked import marked_supervisor
from tests.process_trees.trees import io_quiet
from tests.realclients.harness import ClientHome, kill_all, leftovers, new_marker, temp_home
from tests.realclients.scenarios import exec_daemon
from tests.realclients.test_leftovers import require
from tests.sessions.clients import write_config
from tests.sessions.session import (
    Session,
    clients_command,
    kill_client_tree,
    netns_command,
    session_entries,
    start_session,
)

pytestmark = pytest.mark.integration

_LIMIT = 120.0


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with exec_daemon() as running:
        yield running


def _starts(log: Path) -> list[int]:
    """The stub's leaders, in the order they started (from its own log)."""
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return []
    return [int(line.split()[1]) for line in lines if line.endswith(" server start")]


def _leaders(marker: str) -> list[int]:
    """The stub's leaders running now, in the order they started."""
    found = [p for p in leftovers(marker) if p.kind == "python stubborn_server.py"]
    return [p.pid for p in sorted(found, key=lambda p: (p.start_time, p.pid))]


def _stop(session: Session, marker: str) -> None:
    """Every process the session started, by pid: the client's own tree, its runner (the
    namespace and the stand-in), then whatever carries the marker."""
    pid = session.client_pid()
    if pid is not None:
        kill_client_tree(pid, marker)
    if session.runner.poll() is None:
        session.runner.kill()
    session.runner.wait(timeout=30)
    kill_all(marker)


def _until(check: Callable[[], bool], what: str, limit: float = _LIMIT) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _refresh(home: ClientHome, marker: str) -> tuple[int, int, set[int], bool]:
    """Start the session, refresh its servers once, and give (old copy, new copy, the
    marked processes left once the old copy was told to stop and had time to go, whether
    the client still runs)."""
    (stub,) = [e for e in session_entries(marker, home, None) if e.kind == "stubborn"]
    log = home.home / "stub.log"
    session = start_session("gemini", home, 0, [stub], hold_final=None, netns=netns_command(),
                            interactive=True)  # fmt: skip
    try:
        _until(lambda: len(_starts(log)) >= 1, "the first copy to start")
        _until(lambda: "1 MCP server" in session.output(), "the session to list its server")
        session.type("/mcp refresh")
        time.sleep(0.5)  # real time: the terminal UI takes the line as typed, then Enter
        session.type("\r")
        _until(lambda: len(_starts(log)) >= 2, "the refresh to start a new copy")
        old, new = _starts(log)[:2]
        _until(lambda: "signal SIGTERM" in log.read_text(), "the refresh to stop the old copy")
        # The old copy had its SIGTERM; a wrapped one is stopped by the guard within the
        # grace (1 s here). What runs 8 s later is what the refresh left.
        deadline = time.monotonic() + 8.0
        while old in {p.pid for p in leftovers(marker)} and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {p.pid for p in leftovers(marker)}
        return old, new, left, session.runner.poll() is None
    finally:
        _stop(session, marker)


def test_bare_a_refresh_leaves_the_old_copy_running(tmp_path: Path) -> None:
    require("gemini", "stubborn")
    marker = new_marker()
    with temp_home() as home:
        (stub,) = [e for e in session_entries(marker, home, None) if e.kind == "stubborn"]
        write_config("gemini", home, [stub])
        old, new, left, client_alive = _refresh(home, marker)
    assert old in left  # the leak #5318 describes, for a server that ignores the stop
    assert new in left
    assert client_alive


@pytest.mark.anyio
async def test_wrapped_the_copy_a_refresh_let_go_is_superseded_and_reaped_on_request(
    daemon: Daemon, tmp_path: Path
) -> None:
    # Gemini keeps the old copy's stdio open while that copy runs, so the guard, which
    # stops a wrapped server whose client closed its stdin, rightly leaves it: the client
    # still holds it. It is a superseded copy: reported, reaped on the user's word.
    require("gemini", "stubborn")
    marker = new_marker()
    with temp_home() as home:
        (stub,) = [e for e in session_entries(marker, home, None) if e.kind == "stubborn"]
        # No log: a copy that writes anything (say, a line about the SIGTERM it ignores)
        # just before the newer copy starts cannot be proven idle since (docs/servers.md).
        stub = replace(stub, args=stub.args[: stub.args.index("--log")])
        write_config("gemini", home, [stub])
        clients_command("wrap", "gemini", home, daemon)
        session = start_session("gemini", home, 0, [stub], hold_final=None,
                                netns=netns_command(), interactive=True)  # fmt: skip
        try:
            _until(lambda: len(_leaders(marker)) >= 1, "the first copy to start")
            _until(lambda: "1 MCP server" in session.output(), "the session to list it")
            (old,) = _leaders(marker)
            io_quiet(old)
            async with marked_supervisor(tmp_path, marker, home.home) as supervisor:
                for _ in range(100):  # the census looks at a process once it has settled
                    if old in {s.process.pid for s in (await supervisor.census()).servers}:
                        break
                    await anyio.sleep(0.05)
                await anyio.sleep(0.05)  # real time: a few clock ticks after that read
                session.type("/mcp refresh")
                await anyio.sleep(0.5)  # the terminal UI takes the line as typed, then Enter
                session.type("\r")
                for _ in range(1200):
                    if len(_leaders(marker)) >= 2:
                        break
                    await anyio.sleep(0.1)
                new = _leaders(marker)[1]
                report = await supervisor.handle.census_report(fresh=True)
                plain = await supervisor.plan()
                asked = dict(await supervisor.handle.reap_plan(RETIRER, include=["superseded"]))
                applied = await supervisor.apply(asked)
                left = {p.pid for p in leftovers(marker)}
            client_alive = session.runner.poll() is None
        finally:
            _stop(session, marker)
    (found,) = [s for s in report.superseded if s.server.process.pid == old]
    assert found.newer.pid == new
    assert found.server.label == "stub"
    assert old not in {t["pid"] for t in plain["targets"]}
    assert [t["pid"] for t in asked["targets"]] == [old]
    assert asked["targets"][0]["reason_code"] == "superseded_by_newer_instance"
    assert applied["success"] is True, applied
    assert old not in left
    assert new in left
    assert client_alive
