"""Real ``fleet-supervisor run``: one daemon per registry, one-line start-up errors, SIGHUP."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.integration.daemon import Daemon, running_daemon, wait_ready

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with running_daemon() as running:
        yield running
    assert running.process.returncode == 0, (running.workdir / "daemon.log").read_text()[-2000:]


def assert_one_line_refusal(result: subprocess.CompletedProcess[str], code: str) -> str:
    """The start-up failure is exactly one human line on stderr and a non-zero exit."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "ExceptionGroup" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert line.startswith("fleet-supervisor: ")
    assert code in line
    return line


def still_answers(daemon: Daemon) -> bool:
    with daemon.client() as client:
        return bool(client.status().get("success"))


async def test_a_second_daemon_on_the_same_database_is_refused(daemon: Daemon) -> None:
    await wait_ready(daemon)
    # Its own socket, so only the database is shared.
    other = daemon.workdir / "other.sock"
    result = daemon.cli("--socket", str(other), "run")
    line = assert_one_line_refusal(result, "database_locked")
    assert result.returncode == 1
    assert str(daemon.workdir / "registry.sqlite3") in line
    assert f"pid {daemon.process.pid}" in line
    assert not other.exists()  # refused before it claimed anything else
    assert still_answers(daemon)


async def test_a_second_daemon_on_the_same_socket_is_refused(daemon: Daemon) -> None:
    await wait_ready(daemon)
    result = daemon.cli("run", "--db", str(daemon.workdir / "other.sqlite3"))
    assert_one_line_refusal(result, "socket_in_use")
    assert not (daemon.workdir / "other.sqlite3").exists()
    assert still_answers(daemon)


def _write_config(workdir: Path, *extra: str) -> Path:
    config = workdir / "supervisor.toml"
    config.write_text(
        "\n".join(
            [
                "[database]",
                f'path = "{workdir / "registry.sqlite3"}"',
                "[socket]",
                f'path = "{workdir / "s.sock"}"',
                "[auth]",
                f'profiles_path = "{workdir / "profiles.toml"}"',
                *extra,
                "",
            ]
        )
    )
    return config


def _run(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "--config", str(config), "run"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_mcp_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = _write_config(
            tmp_path,
            "[mcp]",
            "http_enabled = true",
            'http_host = "127.0.0.1"',
            f"http_port = {port}",
        )
        result = _run(config)
    line = assert_one_line_refusal(result, "mcp_port_unavailable")
    assert str(port) in line
    # Nothing is left behind: the socket it had claimed is gone again.
    assert not (tmp_path / "s.sock").exists()


def test_bad_config_is_one_line(tmp_path: Path) -> None:
    config = _write_config(tmp_path, "[liveness]", "sweep_interval_seconds = -1")
    result = _run(config)
    line = assert_one_line_refusal(result, "liveness.sweep_interval_seconds")
    assert result.returncode == 2
    assert "configuration error" in line


def _logged(daemon: Daemon, event: str) -> list[dict[str, Any]]:
    lines = (daemon.workdir / "daemon.log").read_text().splitlines()
    found = [json.loads(line) for line in lines if line.startswith("{")]
    return [line for line in found if line.get("event") == event]


async def _hup(daemon: Daemon, event: str, seen: int = 0) -> dict[str, Any]:
    """SIGHUP, then the ``seen + 1``-th ``event`` line it led to."""
    daemon.process.send_signal(signal.SIGHUP)
    with anyio.fail_after(30):  # a hang guard, not a timing assertion
        while len(_logged(daemon, event)) <= seen:
            assert daemon.process.poll() is None, "the daemon died on SIGHUP"
            await anyio.sleep(0.05)
    return _logged(daemon, event)[seen]


async def test_sighup_is_survived_and_sigterm_still_stops_cleanly(daemon: Daemon) -> None:
    await wait_ready(daemon)
    reloaded = await _hup(daemon, "config_reloaded")
    assert reloaded["applied"] == []
    assert daemon.process.poll() is None
    assert still_answers(daemon)

    daemon.process.send_signal(signal.SIGTERM)
    assert daemon.process.wait(timeout=30) == 0
    assert not daemon.socket.exists()


async def test_sighup_reloads_the_guard_and_keeps_the_settings_when_the_file_is_bad(
    daemon: Daemon,
) -> None:
    await wait_ready(daemon)
    good = daemon.config.read_text()
    daemon.config.write_text(good + "[retirement]\nmass_guard_floor = 40\n")
    reloaded = await _hup(daemon, "config_reloaded")
    assert reloaded["applied"] == ["retirement.mass_guard_floor"]
    assert reloaded["needs_restart"] == []

    daemon.config.write_text(good + "[retirement]\nmass_guard_floor = -1\n")
    failed = await _hup(daemon, "config_reload_failed")
    assert "retirement.mass_guard_floor" in failed["error"]
    assert still_answers(daemon)

    daemon.config.write_text(
        good.replace("sweep_interval_seconds = 0.25", "sweep_interval_seconds = 9")
    )
    restart = await _hup(daemon, "config_reloaded", seen=1)
    # The floor goes back to the default the file now implies; the sweep waits for a restart.
    assert restart["applied"] == ["retirement.mass_guard_floor"]
    assert restart["needs_restart"] == ["liveness.sweep_interval_seconds"]
    assert still_answers(daemon)
