"""A newcomer's first session with an installed package (a wheel in a fresh venv, and
``pipx install``), never the checkout: ``run``, ``clients wrap`` on a project's
``.mcp.json``, Claude Code starting the wrapped server, ``status`` showing it while it
runs, ``clients unwrap``."""

# The server is the stubborn stub holding its answer to ``initialize`` until a file
# appears, so the wrapped server is certainly running while ``status`` is asked; then the
# file is made and ``claude mcp list`` must show it connected. The daemon, the client's
# process group and every marked process are stopped by pid at the end.

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from tests.installed_package import Installed, build_wheel, fresh_venv, pipx_install
from tests.offline import require_offline
from tests.realclients.harness import (
    CLIENTS_DIR,
    MARKER_ENV,
    STUBBORN_SERVER,
    client_env,
    kill_all,
    new_marker,
    temp_home,
)
from tests.realclients.test_leftovers import require

pytestmark = pytest.mark.integration

#: A bound on each wait, not a speed figure, kept under pytest's own timeout (120 s) so a
#: failure says what it waited for. The waits that once ran past it were the census
#: keeping the wrapper, seen before its exec, as an observed server (fixed), not load.
_DEADLINE = 60.0


def _wait_for(what: str, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + _DEADLINE
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _cli(
    installed: Installed, env: dict[str, str], cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(installed.command), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@contextmanager
def _daemon(installed: Installed, env: dict[str, str], cwd: Path) -> Iterator[None]:
    log = (cwd / "daemon.log").open("wb")
    process = subprocess.Popen(
        [str(installed.command), "run"], cwd=cwd, env=env, stdout=log, stderr=log
    )
    try:
        _wait_for("the daemon", lambda: _cli(installed, env, cwd, "status").returncode == 0)
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        log.close()


def _wrapped_servers(installed: Installed, env: dict[str, str], cwd: Path) -> int:
    done = _cli(installed, env, cwd, "status", "--json")
    if done.returncode != 0:
        return 0
    servers: dict[str, Any] = json.loads(done.stdout)["servers"]
    return int(servers["by_provenance"]["wrapped"])


@pytest.mark.parametrize("install", [fresh_venv, pipx_install], ids=["wheel-venv", "pipx"])
def test_the_newcomer_path_works_from_an_installed_package(
    install: Callable[[Path, Path], Installed], tmp_path: Path
) -> None:
    require("claude", "stubborn")
    installed = install(tmp_path, build_wheel(tmp_path))
    marker = new_marker()
    with temp_home() as home:
        env = {**client_env(home.home), "XDG_RUNTIME_DIR": str(home.home / "run")}
        env.pop("PYTHONPATH", None)
        (home.home / "run").mkdir(mode=0o700)
        hold = home.home / "answer-now"
        server = {
            "command": sys.executable,
            "args": [str(STUBBORN_SERVER), "--hold-until", str(hold)],
            "env": {MARKER_ENV: marker},
        }
        mcp_json = home.project / ".mcp.json"
        mcp_json.write_text(json.dumps({"mcpServers": {"stub": server}}, indent=2))
        original = mcp_json.read_bytes()
        # Claude Code runs a project's servers once the project is trusted and approved.
        approved = {"enableAllProjectMcpServers": True, "hasTrustDialogAccepted": True}
        claude_json = {"hasCompletedOnboarding": True, "projects": {str(home.project): approved}}
        (home.home / ".claude.json").write_text(json.dumps(claude_json))
        client: subprocess.Popen[bytes] | None = None
        try:
            with _daemon(installed, env, home.project):
                wrap = _cli(installed, env, home.project, "clients", "wrap")
                assert wrap.returncode == 0, wrap.stderr
                entry = json.loads(mcp_json.read_text())["mcpServers"]["stub"]
                words = [entry["command"], *entry["args"]]
                wrapper = words[: words.index("--")]
                assert wrapper[0] == str(installed.python)
                # Every path the wrapper names exists, inside the installation.
                named = [Path(w) for w in wrapper if w.startswith("/") and not w.endswith(".sock")]
                assert named, wrapper
                for path in named:
                    assert path.exists(), path
                    assert path.is_relative_to(installed.root), path
                assert words[words.index("--") + 1 :] == [server["command"], *server["args"]]

                require_offline("claude")
                client = subprocess.Popen(
                    [str(CLIENTS_DIR / "node_modules" / ".bin" / "claude"), "mcp", "list"],
                    cwd=home.project,
                    env={**client_env(home.home), "MCP_TIMEOUT": "60000"},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    process_group=0,
                )
                _wait_for(
                    "status to show the wrapped server",
                    lambda: _wrapped_servers(installed, env, home.project) >= 1,
                )
                shown = _cli(installed, env, home.project, "status")
                assert "wrapped 1" in shown.stdout, shown.stdout
                hold.touch()
                out, _ = client.communicate(timeout=_DEADLINE)
                listed = out.decode()
                assert re.search(r"^stub\b.*\bConnected", listed, re.MULTILINE), listed

                unwrap = _cli(installed, env, home.project, "clients", "unwrap")
                assert unwrap.returncode == 0, unwrap.stderr
                assert json.loads(mcp_json.read_bytes()) == json.loads(original)
        finally:
            if client is not None and client.poll() is None:
                with suppress(ProcessLookupError):
                    os.killpg(client.pid, signal.SIGKILL)
                client.wait(timeout=30)
            if client is not None and client.stdout is not None:
                # Closed on every path: a failed wait left it open for the garbage collector,
                # whose ResourceWarning then failed whichever test ran next.
                client.stdout.close()
            kill_all(marker)
