"""``[servers.budgets]`` on a real daemon: a wrapped server past its memory cap or its
idle limit is stopped by the server guard and audited with the budget's reason; one
within its budget is shown with how close it is; a bad budget stops the daemon at
start-up naming the key."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from tests.integration.daemon import running_daemon, wait_ready
from tests.integration.exec_scenarios import alive, audit_outcomes, launched, until

pytestmark = pytest.mark.integration

#: The wrapped server's name label is its command's file name (the interpreter's).
_NAME = Path(sys.executable).name


def _config(*budget: str) -> Sequence[str]:
    return (
        "[discovery]",
        "sweep_interval_seconds = 0.25",
        "[exec]",
        "reap_grace_seconds = 0.5",
        f'[servers.budgets."{_NAME[:4]}*"]',
        *budget,
    )


@pytest.mark.parametrize(
    ("budget", "reason"),
    [
        (("memory_mb = 1", "memory_hold_seconds = 0.5"), "memory_budget"),
        (("idle_seconds = 1",), "idle_budget"),
    ],
)
def test_a_wrapped_server_past_its_budget_is_stopped_and_audited(
    tmp_path: Path, budget: Sequence[str], reason: str
) -> None:
    with running_daemon(extra_config=_config(*budget)) as daemon:
        anyio.run(wait_ready, daemon)
        with launched(tmp_path, "polite", daemon=daemon) as launch:
            until(lambda: not alive(launch.server), "the guard to stop the server", limit=60)
            until(lambda: bool(audit_outcomes(daemon, launch.server)), "the exit's audit")
            outcomes = audit_outcomes(daemon, launch.server)
            client_alive = launch.client_running()
    assert outcomes == [reason]
    assert client_alive  # only the server: its client is the user's


def test_a_server_within_its_budget_runs_and_status_shows_how_close(tmp_path: Path) -> None:
    config = _config("memory_mb = 4096", "idle_seconds = 3600")
    with running_daemon(extra_config=config) as daemon:
        anyio.run(wait_ready, daemon)
        with launched(tmp_path, "polite", daemon=daemon) as launch:

            def shown() -> bool:
                text = daemon.cli("status").stdout
                return f"pid {launch.server} " in text and "of 4096.0 MiB" in text

            until(shown, "status to show the server's budget")
            status = daemon.cli("status").stdout
            running = alive(launch.server)
    line = next(line for line in status.splitlines() if f"pid {launch.server} " in line)
    assert line.startswith(f"budget {_NAME[:4]}*: ")
    assert "idle " in line
    assert " of 1.0h" in line
    assert "DUE" not in line
    assert running


def test_a_bad_budget_stops_the_daemon_at_start_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "supervisor.toml"
    config.write_text(
        f'[socket]\npath = "{tmp_path / "s.sock"}"\n[servers.budgets."mcp-*"]\nmemory_mb = "lots"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "--config", str(config), "run"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert 'servers.budgets must be tables of budgets whose "mcp-*".memory_mb' in done.stderr
