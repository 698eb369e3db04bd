"""Each client's own file, wrapped and unwrapped around a real session; Codex CLI's
servers found by discovery and credited to the real binary under its node launcher."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.integration.daemon import Daemon
from tests.offline import require_offline
from tests.process_trees.marked import marked_supervisor
from tests.realclients.harness import CLIENTS_DIR, kill_all, leftovers, new_marker, temp_home
from tests.realclients.scenarios import exec_daemon
from tests.realclients.test_leftovers import require
from tests.sessions.clients import SESSION_CLIENTS, session_env, write_config
from tests.sessions.session import (
    SESSION_SERVERS,
    clients_command,
    held,
    kill_client_tree,
    netns_command,
    run_sessions,
    session_entries,
    start_session,
)

pytestmark = pytest.mark.integration

_CODEX = CLIENTS_DIR / "node_modules" / ".bin" / "codex"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with exec_daemon() as running:
        yield running


@pytest.mark.parametrize("client", SESSION_CLIENTS)
def test_a_clients_own_file_wraps_serves_a_session_and_unwraps_to_its_bytes(
    client: str, daemon: Daemon
) -> None:
    for kind, _ in SESSION_SERVERS:
        require(client, kind)
    result = run_sessions(client, "ends", wrapped=True, daemon=daemon, unwrap=True)
    report = result.describe()
    assert result.returncodes == [0], report
    assert result.left == [], report
    assert result.restored is True, report


def test_codex_lists_the_wrapped_servers_of_its_config_toml(daemon: Daemon) -> None:
    require("codex", "time")
    with temp_home() as home:
        entries = session_entries(new_marker(), home, None)
        config = write_config("codex", home, entries)
        clients_command("wrap", "codex", home, daemon)
        require_offline("codex")
        listed = subprocess.run(
            [str(_CODEX), "mcp", "list", "--json"],
            cwd=home.project,
            env=session_env("codex", home),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        servers = {s["name"]: s for s in json.loads(listed.stdout)}
        assert set(servers) == {name for _, name in SESSION_SERVERS}
        for entry in entries:
            args = servers[entry.name]["transport"]["args"]
            assert "exec_in_place.py" in " ".join(args), servers[entry.name]
            assert args[args.index("--client") + 1] == "codex"
            assert args[args.index("--") + 1 :] == [entry.command, *entry.args]
        clients_command("unwrap", "codex", home, daemon)
        assert "exec_in_place.py" not in config.read_text()


@pytest.mark.anyio
async def test_codex_servers_are_credited_to_the_real_binary_and_reaped_once_it_is_gone(
    tmp_path: Path,
) -> None:
    for kind, _ in SESSION_SERVERS:
        require("codex", kind)
    netns = netns_command()
    marker = new_marker()
    with temp_home() as home:
        entries = session_entries(marker, home, None)
        write_config("codex", home, entries)
        never = home.home / "never"
        session = start_session("codex", home, 0, entries, hold_final=never, netns=netns)
        try:
            for _ in range(2400):  # bounded: 120 s of 50 ms polls
                if held(session):
                    break
                await anyio.sleep(0.05)
            assert held(session), session.output()
            async with marked_supervisor(tmp_path, marker, home.home) as supervisor:
                census = await supervisor.census()
                launcher = session.client_pid()
                assert launcher is not None
                owners = {s.owner.process.pid for s in census.servers if s.owner is not None}
                names = {s.owner.name for s in census.servers if s.owner is not None}
                binaries = {os.readlink(f"/proc/{pid}/exe") for pid in owners}
                kill_client_tree(launcher, marker)
                session.runner.wait(timeout=60)
                for _ in range(200):  # the servers that exit on EOF go by themselves
                    await anyio.sleep(0.05)
                    if all(p.kind.startswith("python stubborn") for p in leftovers(marker)):
                        break
                left_bare = {p.pid for p in leftovers(marker)}
                plan = await supervisor.plan()
                applied = await supervisor.apply(plan)
                left = leftovers(marker)
        finally:
            if session.runner.poll() is None:
                session.runner.kill()
                session.runner.wait(timeout=30)
            kill_all(marker)
    assert len(census.servers) == len(SESSION_SERVERS), census.servers
    assert names == {"codex"}
    # The owner is the real binary the launcher started, not node running the launcher.
    assert launcher not in owners
    assert all("@openai/codex-linux" in path for path in binaries), binaries
    assert left_bare, "codex left the stubborn server running"
    targets = plan["targets"]
    # Proven either way: the recorded owner is gone, or the server's stdio was closed.
    assert {t["reason_code"] for t in targets} <= {"owner_client_gone", "owner_stdio_closed"}
    assert targets
    assert {m["pid"] for t in targets for m in t["members"]} == left_bare
    assert applied["success"] is True, applied
    assert left == []
