"""``fleet-supervisor doctor`` against a real daemon, a real home and the real kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from supervisor.cli.doctor import leaks_finding
from tests.integration.daemon import Daemon, running_daemon, wait_ready

pytestmark = pytest.mark.integration


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with running_daemon() as running:
        anyio.run(wait_ready, running)
        yield running


def _home(tmp_path: Path) -> Path:
    """A user with one bare stdio server in Claude Code's file and a wrapped project."""
    home = tmp_path / "home"
    home.mkdir()
    bare = {"mcpServers": {"time": {"command": "/usr/bin/mcp-server-time", "args": []}}}
    (home / ".claude.json").write_text(json.dumps(bare))
    return home


def _doctor(daemon: Daemon, home: Path) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "--config", str(daemon.config), "doctor",
         "--json"],
        cwd=home,
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def _by_check(answer: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in answer["checks"]}


def test_a_healthy_setup_passes_and_names_what_is_left_to_wrap(
    daemon: Daemon, tmp_path: Path
) -> None:
    code, answer = _doctor(daemon, _home(tmp_path))
    checks = _by_check(answer)
    assert code == 0, answer
    assert answer["ok"] is True
    assert checks["daemon"]["state"] == "ok"
    assert str(daemon.socket) in checks["daemon"]["detail"]
    assert checks["socket mode"]["state"] == "ok"
    assert checks["profiles file"]["state"] == "ok"
    assert checks["pidfd"]["state"] == "ok"
    assert checks["sock_diag"]["state"] == "ok"
    assert checks["/proc"]["state"] in ("ok", "warn")
    assert checks["leaks"]["state"] in ("ok", "warn")
    client = checks["claude_code (user)"]
    assert client["state"] == "warn"
    assert "unwrapped" in client["detail"]
    assert client["action"] == "fleet-supervisor clients wrap --client claude_code"
    # Every warning and failure names the one action that fixes it.
    assert all(c["action"] for c in answer["checks"] if c["state"] in ("warn", "fail"))


def test_a_writable_profiles_file_fails_with_the_command_that_fixes_it(
    daemon: Daemon, tmp_path: Path
) -> None:
    daemon.profiles.chmod(0o666)
    code, answer = _doctor(daemon, _home(tmp_path))
    profiles = _by_check(answer)["profiles file"]
    assert code == 1
    assert profiles["state"] == "fail"
    assert profiles["action"] == f"chmod 600 {daemon.profiles}"


def test_a_stopped_daemon_fails_and_says_how_to_start_it(daemon: Daemon, tmp_path: Path) -> None:
    daemon.process.terminate()
    daemon.process.wait(timeout=30)
    code, answer = _doctor(daemon, _home(tmp_path))
    checks = _by_check(answer)
    assert code == 1
    assert checks["daemon"]["state"] == "fail"
    assert "fleet-supervisor run" in checks["daemon"]["action"]
    assert checks["leaks"]["state"] == "skip"


@pytest.mark.parametrize(
    ("servers", "state"),
    [
        ({"available": True, "servers": 3, "orphaned": 0}, "ok"),
        ({"available": True, "servers": 3, "orphaned": 2}, "warn"),
        ({"available": False}, "skip"),
    ],
)
def test_leaks_waiting_for_a_reap_are_named_with_the_reap_command(
    servers: dict[str, Any], state: str
) -> None:
    found = leaks_finding({"servers": servers})
    assert found.state == state
    if state == "warn":
        assert "2 orphaned" in found.detail
        assert found.action.startswith("fleet-supervisor reap plan")
