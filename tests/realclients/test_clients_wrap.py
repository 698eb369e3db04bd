"""`clients wrap` on real Claude Code and Gemini CLI configs: run wrapped, then unwrapped."""

# A temporary HOME gets Claude Code's ~/.claude.json and Gemini CLI's settings.json
# (+ trustedFolders.json) with two stdio servers, server-everything through its .bin
# script and mcp-server-time, as a user would have them. ``fleet-supervisor clients
# wrap --home`` rewrites both files against a test daemon; then ``claude mcp list`` and
# ``gemini mcp list`` must show every server connected, the daemon must have a row for
# each, and ``clients unwrap`` must give the original bytes back. Every process a server
# started carries the scenario's marker and is SIGKILLed by pid at the end.

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from supervisor.policy.identity.instance import normalize_client_name
from tests.integration.daemon import Daemon
from tests.realclients.harness import (
    CLIENTS_DIR,
    ClientHome,
    ServerEntry,
    client_env,
    kill_all,
    new_marker,
    run_client,
    server_entry,
    temp_home,
    wrap_command,
)
from tests.realclients.scenarios import exec_daemon
from tests.realclients.test_leftovers import require

pytestmark = pytest.mark.integration

_CLIENT_TIMEOUT = 90.0


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with exec_daemon() as running:
        yield running


def _clients(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    # The module form, as Daemon.cli runs it: the wrapper it writes is this venv's python.
    return subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "--config", str(daemon.config), "clients", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _rows(daemon: Daemon) -> list[dict[str, Any]]:
    with daemon.client() as client:
        return [dict(r) for r in client.snapshot(include_history=True)["workers"]]


def _entries(home: ClientHome, marker: str) -> list[ServerEntry]:
    return [
        server_entry("everything", name="everything", marker=marker, home=home.home),
        server_entry("time", name="time", marker=marker, home=home.home),
    ]


@pytest.mark.parametrize("client", ["claude", "gemini"])
def test_wrapped_configs_connect_register_and_unwrap_to_the_same_bytes(
    client: str, daemon: Daemon
) -> None:
    require(client, "everything")
    require(client, "time")
    marker = new_marker()
    with temp_home() as home:
        entries = _entries(home, marker)
        if client == "claude":
            home.write_claude(entries)
            config = home.home / ".claude.json"
        else:
            home.write_gemini(entries)
            config = home.home / ".gemini" / "settings.json"
        original = config.read_bytes()
        known = {r["worker_identity"] for r in _rows(daemon)}
        try:
            wrapped = _clients(
                daemon, "wrap", "--home", str(home.home), "--project", str(home.project)
            )
            assert wrapped.returncode == 0, wrapped.stderr
            servers = json.loads(config.read_text())["mcpServers"]
            for entry in entries:
                args = servers[entry.name]["args"]
                assert args[args.index("--") + 1 :] == entry.argv
                assert args[args.index("--client") + 1] == (
                    "claude_code" if client == "claude" else "gemini"
                )
            after_wrap = config.read_bytes()
            binary = CLIENTS_DIR / "node_modules" / ".bin" / client
            run = run_client(
                [str(binary), "mcp", "list"],
                env=client_env(home.home),
                cwd=home.project,
                timeout=_CLIENT_TIMEOUT,
            )
            for entry in entries:
                pattern = rf"{re.escape(entry.name)}\b.*\bConnected"
                assert re.search(pattern, run.output), f"{entry.name} not connected:\n{run.output}"
            rows = [r for r in _rows(daemon) if r["worker_identity"] not in known]
            assert len(rows) >= len(entries), f"rows registered: {rows}"
            family = "claude_code" if client == "claude" else "gemini"
            named = {
                normalize_client_name(r.get("client_name") or r.get("client_type")) for r in rows
            }
            assert named == {family}, f"rows registered: {rows}"
            assert all(
                r["instance_id" if "instance_id" in r else "client_instance_id"] for r in rows
            )
            # Whether the client rewrote its own file while it ran (Claude Code keeps its
            # state in ~/.claude.json): unwrap must still restore the entries exactly.
            rewritten = config.read_bytes() != after_wrap
            unwrapped = _clients(
                daemon, "unwrap", "--home", str(home.home), "--project", str(home.project)
            )
            assert unwrapped.returncode == 0, unwrapped.stderr
            restored = json.loads(config.read_text())["mcpServers"]
            for entry in entries:
                assert [
                    restored[entry.name]["command"],
                    *restored[entry.name]["args"],
                ] == entry.argv
            if not rewritten:
                assert config.read_bytes() == original
            else:
                # Claude Code 2.1 re-serializes ~/.claude.json on every start and appends
                # its own keys (firstStartTime, machineID, ...): everything up to them,
                # the server map included, must be the original text again.
                text, before = config.read_text(), original.decode()
                assert text.startswith(before[: before.index('"hasCompletedOnboarding"')])
        finally:
            kill_all(marker)


@pytest.mark.parametrize("client", ["claude", "gemini"])
def test_a_wrapper_told_nothing_finds_its_client_family(client: str, daemon: Daemon) -> None:
    # A hand-written `exec` entry names no client: the daemon reads the family from the
    # client's command line. Gemini CLI runs its servers from the process it relaunches
    # itself as (`node --max-old-space-size=N …/gemini`), runner options first.
    require(client, "time")
    marker = new_marker()
    with temp_home() as home:
        entry = server_entry("time", name="time", marker=marker, home=home.home)
        wrapped = wrap_command(entry, config=daemon.config, client=client, labelled=False)
        assert "--client" not in wrapped.args
        assert "GITEA_MCP_CLIENT" not in wrapped.env
        if client == "claude":
            home.write_claude([wrapped])
        else:
            home.write_gemini([wrapped])
        known = {r["worker_identity"] for r in _rows(daemon)}
        try:
            run = run_client(
                [str(CLIENTS_DIR / "node_modules" / ".bin" / client), "mcp", "list"],
                env=client_env(home.home),
                cwd=home.project,
                timeout=_CLIENT_TIMEOUT,
            )
            assert re.search(r"time\b.*\bConnected", run.output), run.output
            rows = [r for r in _rows(daemon) if r["worker_identity"] not in known]
            assert rows, "the wrapped server never registered"
            family = "claude_code" if client == "claude" else "gemini"
            assert {r["client_type"] for r in rows} == {family}, f"rows registered: {rows}"
            assert all(r["client_instance_id"].startswith(f"inst-{family}-") for r in rows)
        finally:
            kill_all(marker)
