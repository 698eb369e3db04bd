"""A real daemon under a fake service manager: READY/WATCHDOG/STOPPING, the ops listener."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.integration.daemon import Daemon, running_daemon, wait_ready

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


class _ServiceManager:
    """Reads the notify socket like systemd does, all the time, keeping what arrived."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.1)
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                self.received.append(self.sock.recv(4096))
            except TimeoutError:
                continue

    def wait_for(self, text: bytes) -> bytes:
        deadline = time.monotonic() + 30  # a hang guard, not a timing assertion
        while time.monotonic() < deadline:
            found = [d for d in list(self.received) if text in d]
            if found:
                return found[0]
            time.sleep(0.02)
        raise AssertionError(f"no datagram containing {text!r} in {self.received[-5:]}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def _ops_url(daemon: Daemon) -> str:
    deadline = time.monotonic() + 30  # a hang guard, not a timing assertion
    log = daemon.workdir / "daemon.log"
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if '"ops_http_listening"' in line:
                return str(json.loads(line)["url"])
        time.sleep(0.05)
    raise AssertionError("the daemon never logged its ops listener")


async def test_daemon_notifies_systemd_and_serves_health_and_metrics(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    manager = _ServiceManager(path)
    try:
        env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"}
        extra = ["[ops]", "http_enabled = true", "http_port = 0"]
        with running_daemon(extra_config=extra, env=env) as daemon:
            await wait_ready(daemon)
            assert manager.wait_for(b"READY=1").startswith(b"READY=1\nMAINPID=")
            assert manager.received[0].startswith(b"READY=1")  # nothing before readiness
            manager.wait_for(b"WATCHDOG=1")
            url = _ops_url(daemon)
            worker = subprocess.Popen(
                daemon.worker_command(sys.executable, "-c", "import time; time.sleep(600)"),
                stdin=subprocess.DEVNULL,
            )
            try:
                async with httpx2.AsyncClient(timeout=30.0) as client:
                    assert (await client.get(f"{url}/healthz")).status_code == 200
                    # The worker's registration opens a pidfd watch in the liveness actor.
                    with anyio.fail_after(60):  # a hang guard, not a timing assertion
                        while True:
                            metrics = await client.get(f"{url}/metrics")
                            if "fleet_exit_watches 1.0" in metrics.text:
                                break
                            await anyio.sleep(0.05)
                    assert metrics.status_code == 200
                    assert "fleet_gauges_available 1.0" in metrics.text
            finally:
                worker.send_signal(signal.SIGTERM)
                worker.wait(timeout=30)
            daemon.process.send_signal(signal.SIGTERM)
            assert daemon.process.wait(timeout=20) == 0
            manager.wait_for(b"STOPPING=1")
    finally:
        manager.close()


async def test_status_needs_no_token_for_the_owner_and_watch_refreshes() -> None:
    with running_daemon() as daemon:
        await wait_ready(daemon)
        plain = daemon.cli("status", env={"FLEET_SUPERVISOR_TOKEN": ""})
        assert plain.returncode == 0, plain.stderr
        lines = plain.stdout.splitlines()
        assert lines[0].startswith(f"supervisor pid {daemon.process.pid}  socket {daemon.socket}")
        assert "as socket owner (peer_uid)" in lines[0]
        assert any(line.startswith("workers: ") for line in lines)
        assert any(line.startswith("leases: 0 active") for line in lines)
        watched = daemon.cli(
            "status",
            "--watch",
            "--interval",
            "0.01",
            "--count",
            "2",
            "--json",
            env={"FLEET_SUPERVISOR_TOKEN": ""},
        )
        assert watched.returncode == 0, watched.stderr
        frames = [json.loads(line) for line in watched.stdout.splitlines() if line]
        assert len(frames) == 2
        assert all(f["success"] and f["authenticated_by"] == "peer_uid" for f in frames)
        bad = daemon.cli("status", "--watch", "--interval", "0")
        assert bad.returncode == 2
