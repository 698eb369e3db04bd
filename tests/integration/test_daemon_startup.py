"""Real ``fleet-supervisor run``: one daemon per registry, one-line start-up errors, SIGHUP."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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


async def test_sighup_is_survived_and_sigterm_still_stops_cleanly(daemon: Daemon) -> None:
    await wait_ready(daemon)
    daemon.process.send_signal(signal.SIGHUP)

    def logged_hup() -> bool:
        return '"signal_ignored"' in (daemon.workdir / "daemon.log").read_text()

    with anyio.fail_after(30):  # a hang guard, not a timing assertion
        while not logged_hup():
            assert daemon.process.poll() is None, "the daemon died on SIGHUP"
            await anyio.sleep(0.05)
    assert daemon.process.poll() is None
    assert still_answers(daemon)

    daemon.process.send_signal(signal.SIGTERM)
    assert daemon.process.wait(timeout=30) == 0
    assert not daemon.socket.exists()
