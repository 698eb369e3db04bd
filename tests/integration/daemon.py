"""A real ``fleet-supervisor run`` subprocess on a temporary database, socket and profiles file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from supervisor.client import Client
from supervisor.errors import Unavailable
from supervisor.settings.profile_edits import create_token

SHIPPED_PROFILES = Path(__file__).resolve().parents[2] / "config" / "profiles.toml"
RETIRE = "gitea.worker_registry.retire"


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    socket: Path
    config: Path
    profiles: Path
    token: str
    workdir: Path

    def cli(
        self, *args: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a ``fleet-supervisor`` command against this daemon."""
        return subprocess.run(
            [sys.executable, "-m", "supervisor.cli", "--config", str(self.config), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "FLEET_SUPERVISOR_TOKEN": self.token, **(env or {})},
            check=False,
        )

    def client(self) -> Client:
        return Client(self.socket, token=self.token)

    def worker_command(self, *child: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "supervisor.cli",
            "--config",
            str(self.config),
            "exec",
            "--",
            *child,
        ]


def _grant_retire(path: Path) -> None:
    """The operator edit: give the reconciler profile the retire operation."""
    text = path.read_text()
    marker = "[profiles.prgs-reconciler]"
    head, _, tail = text.partition(marker)
    block, sep, rest = tail.partition("\n[")
    block = block.replace(
        'allowed_operations = ["gitea.read"]', f'allowed_operations = ["gitea.read", "{RETIRE}"]'
    )
    assert RETIRE in block, "shipped reconciler profile changed shape"
    path.write_text(head + marker + block + sep + rest)


async def wait_ready(daemon: Daemon) -> None:
    with anyio.fail_after(30):  # a hang guard, not a timing assertion
        while True:
            if daemon.process.poll() is not None:
                raise RuntimeError(f"daemon exited early with {daemon.process.returncode}")
            try:
                with daemon.client() as client:
                    if client.status().get("success"):
                        return
            except Unavailable:
                pass
            await anyio.sleep(0.05)


@contextmanager
def running_daemon(
    *,
    extra_config: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    unset_env: Sequence[str] = (),
    stderr: int | None = None,
    **settings: Any,
) -> Iterator[Daemon]:
    """``extra_config`` lines are appended to the config file; ``env`` adds to the daemon's
    and ``unset_env`` names variables taken out of it. ``stderr`` (e.g. ``subprocess.PIPE``,
    then read or closed through ``process.stderr``) replaces the daemon.log file."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="fsv-") as tmp:
        workdir = Path(tmp)
        profiles = workdir / "profiles.toml"
        profiles.write_text(SHIPPED_PROFILES.read_text())
        profiles.chmod(0o600)
        _grant_retire(profiles)
        token = create_token(profiles, "prgs-reconciler")
        config = workdir / "supervisor.toml"
        ttl = settings.get("ttl", 2.0)
        config.write_text(
            "\n".join(
                [
                    "[database]",
                    f'path = "{settings.get("database_path") or workdir / "registry.sqlite3"}"',
                    f'url = "{settings.get("database_url") or ""}"',
                    "[supervisor]",
                    'log_level = "info"',
                    f'host_id = "{settings.get("host_id") or ""}"',
                    *settings.get("extra_lines", ()),
                    "[heartbeat]",
                    f"ttl_seconds = {ttl}",
                    "[liveness]",
                    "sweep_interval_seconds = 0.25",
                    "[leases]",
                    "expiry_interval_seconds = 0.25",
                    "[socket]",
                    f'path = "{workdir / "s.sock"}"',
                    "[auth]",
                    f'profiles_path = "{profiles}"',
                    *extra_config,
                    "",
                ]
            )
        )
        log = (workdir / "daemon.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "supervisor.cli", "--config", str(config), "run"],
            stdout=subprocess.DEVNULL,
            stderr=log if stderr is None else stderr,
            env={
                name: value
                for name, value in {**os.environ, **(env or {})}.items()
                if name not in unset_env
            },
        )
        daemon = Daemon(
            process=process,
            socket=workdir / "s.sock",
            config=config,
            profiles=profiles,
            token=token,
            workdir=workdir,
        )
        try:
            yield daemon
        finally:
            # A test may have restarted the daemon: stop the one running now.
            process = daemon.process
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            if process.stderr is not None:
                process.stderr.close()
            log.close()
