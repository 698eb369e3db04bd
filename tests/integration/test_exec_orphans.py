"""Real processes: an exec'd server that outlives its client is reported, or reaped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from supervisor.probes import probe_process
from tests.integration.daemon import Daemon, running_daemon, wait_ready

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

#: A server that ignores stdin and, given "stubborn", SIGTERM too; it writes its pid first.
SERVER = """
import os, signal, sys, time
if sys.argv[2] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""

#: An MCP client stand-in: starts the sidecar, then exits when told to on its stdin.
CLIENT = """
import subprocess, sys
sidecar = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
print(sidecar.pid, flush=True)
sys.stdin.readline()
"""


def _reap_config(reap: bool) -> list[str]:
    return ["[exec]", f"reap_orphans = {'true' if reap else 'false'}", "reap_grace_seconds = 0.5"]


@pytest.fixture
def reaping() -> Iterator[Daemon]:
    with running_daemon(extra_config=_reap_config(True)) as daemon:
        yield daemon


@pytest.fixture
def reporting() -> Iterator[Daemon]:
    with running_daemon(extra_config=_reap_config(False)) as daemon:
        yield daemon


def _rows(daemon: Daemon) -> list[Mapping[str, Any]]:
    # Released rows are history, listed only when it is asked for.
    with daemon.client() as client:
        return list(client.snapshot(include_history=True)["workers"])


def _snapshot(daemon: Daemon) -> Mapping[str, Any]:
    with daemon.client() as client:
        return client.snapshot()


async def _until(predicate: Any, what: str) -> None:
    """Poll real processes; 30 s is a hang guard, not a timing claim."""
    with anyio.move_on_after(30):
        while not predicate():
            await anyio.sleep(0.05)
        return
    pytest.fail(f"gave up waiting for {what}")


def _running(pid: int) -> bool:
    return probe_process(pid).alive is True and not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def _read_pid(pidfile: Path) -> int:
    return int(pidfile.read_text())


async def _server_pid(pidfile: Path) -> int:
    await _until(pidfile.exists, "the server to start")
    return _read_pid(pidfile)


def _row_of(daemon: Daemon, pid: int) -> Mapping[str, Any] | None:
    return next((r for r in _rows(daemon) if r["pid"] == pid), None)


async def test_a_server_ignoring_stdin_eof_and_sigterm_is_killed_and_released(
    reaping: Daemon, tmp_path: Path
) -> None:
    await wait_ready(reaping)
    pidfile = tmp_path / "server.pid"
    command = reaping.worker_command(sys.executable, "-c", SERVER, str(pidfile), "stubborn")
    sidecar = subprocess.Popen(command, stdin=subprocess.PIPE)
    try:
        server = await _server_pid(pidfile)
        await _until(lambda: _row_of(reaping, server) is not None, "the registration")
        assert sidecar.stdin is not None
        sidecar.stdin.close()  # the client hangs up; the server carries on regardless
        assert await anyio.to_thread.run_sync(lambda: sidecar.wait(timeout=30)) == 128 + 9
    finally:
        if sidecar.poll() is None:
            sidecar.kill()
            sidecar.wait()
    await _until(lambda: not _running(server), "the server to be gone")
    row = _row_of(reaping, server)
    assert row is not None
    assert row["status"] == "released"


@dataclass
class _Launch:
    client: subprocess.Popen[bytes]
    sidecar: int
    server: int

    def client_exits(self) -> None:
        """Tell the client to exit; its stdin to the sidecar was /dev/null."""
        assert self.client.stdin is not None
        self.client.stdin.close()
        self.client.wait(timeout=30)


@asynccontextmanager
async def _launched_by_a_client(daemon: Daemon, tmp_path: Path) -> AsyncIterator[_Launch]:
    """A client process running a polite server under exec, registered; everything it
    started is killed afterwards, whatever the test left running."""
    await wait_ready(daemon)
    pidfile = tmp_path / "server.pid"
    command = daemon.worker_command(sys.executable, "-c", SERVER, str(pidfile), "polite")
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    started: list[int] = []
    try:
        assert client.stdout is not None
        started.append(int(client.stdout.readline()))
        started.append(await _server_pid(pidfile))
        sidecar, server = started
        await _until(lambda: _row_of(daemon, server) is not None, "the registration")
        yield _Launch(client=client, sidecar=sidecar, server=server)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        for pipe in (client.stdin, client.stdout):
            if pipe is not None:
                pipe.close()
        for pid in reversed(started):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


async def test_a_server_whose_client_exited_is_terminated_and_released(
    reaping: Daemon, tmp_path: Path
) -> None:
    async with _launched_by_a_client(reaping, tmp_path) as launch:
        launch.client_exits()
        await _until(lambda: not _running(launch.server), "the server to be terminated")
        await _until(
            lambda: (_row_of(reaping, launch.server) or {}).get("status") == "released",
            "the release",
        )
        await _until(lambda: not _running(launch.sidecar), "the sidecar to exit")


async def test_without_reaping_the_worker_is_reported_orphaned(
    reporting: Daemon, tmp_path: Path
) -> None:
    async with _launched_by_a_client(reporting, tmp_path) as launch:
        assert _snapshot(reporting)["orphaned_workers"] == []
        launch.client_exits()
        await _until(lambda: bool(_snapshot(reporting)["orphaned_workers"]), "the finding")
        (finding,) = _snapshot(reporting)["orphaned_workers"]
        assert finding["pid"] == launch.server
        assert finding["client_pid"] == launch.client.pid
        assert finding["reason_code"] == "launching_client_exited"
        # Reported, not stopped: the server and its sidecar still run, the row is active.
        assert _running(launch.server)
        assert _running(launch.sidecar)
        assert (_row_of(reporting, launch.server) or {}).get("status") == "active"
