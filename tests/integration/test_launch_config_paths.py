"""launch-config run by a relative script path prints commands that start from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.daemon import Daemon, running_daemon, wait_ready
from tests.integration.test_end_to_end import snapshot, wait_for

pytestmark = pytest.mark.integration

# The venv holding the interpreter running the tests, and its console script.
VENV = Path(sys.executable).parent.parent
SCRIPT = Path(sys.executable).parent / "fleet-supervisor"
WRAPPER = Path(__file__).resolve().parents[2] / "supervisor" / "exec" / "exec_in_place.py"


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _launch_config(tmp_path: Path, *args: str) -> dict[str, Any]:
    """``bin/fleet-supervisor launch-config`` typed from the venv directory, PATH without it."""
    env = {
        **os.environ,
        "PATH": "/usr/bin:/bin",
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
    }
    argv = [os.path.relpath(SCRIPT, VENV), "launch-config", "--client", "codex", *args]
    config: dict[str, Any] = json.loads(_run(argv, VENV, env))
    return config


def _run_elsewhere(entry: dict[str, Any], cwd: Path, *extra: str) -> str:
    """Start an entry the way an MCP client does: its own working directory, no shell."""
    return _run([entry["command"], *entry["args"], *extra], cwd)


def test_exec_form_names_the_sidecar_by_an_absolute_path(tmp_path: Path) -> None:
    assert SCRIPT.is_file()
    config = _launch_config(tmp_path, "--exec", "--", "bin/python", "-c", "print('served')")
    entry = config["mcpServers"]["gitea-author"]
    # The fast form: this venv's interpreter, isolated and without site, runs the wrapper
    # file itself (the console script would add the CLI's and site's start-up to each server).
    assert Path(entry["command"]).parent == Path(sys.executable).parent  # this venv's python
    assert entry["args"][:2] == ["-I", "-S"]
    assert Path(entry["args"][2]).is_absolute()
    assert Path(entry["args"][2]).samefile(WRAPPER)
    socket_index = entry["args"].index("--socket") + 1
    assert Path(entry["args"][socket_index]).is_absolute()
    # The wrapped server command was a relative path too.
    assert entry["args"][entry["args"].index("--") + 1] == str(VENV / "bin" / "python")


def test_plain_form_makes_a_relative_server_path_absolute(tmp_path: Path) -> None:
    config = _launch_config(tmp_path, "--", "bin/python", "-c", "print('served')")
    entry = config["mcpServers"]["gitea-reviewer"]
    assert entry["command"] == str(VENV / "bin" / "python")
    assert _run_elsewhere(entry, tmp_path).strip() == "served"


def test_plain_form_keeps_a_bare_name_found_on_path(tmp_path: Path) -> None:
    config = _launch_config(tmp_path, "--", "sh", "-c", "echo served")
    entry = config["mcpServers"]["gitea-merger"]
    assert entry["command"] == "sh"
    assert _run_elsewhere(entry, tmp_path).strip() == "served"


# A stand-in stdio server: it proves where its relative arguments led by writing
# its pid into the directory it was given, then lives until its client closes stdin.
SERVER = """
import os, pathlib, sys
ready = pathlib.Path(sys.argv[1], "served")
ready.with_suffix(".tmp").write_text(str(os.getpid()))
ready.with_suffix(".tmp").replace(ready)  # whole, never half-written
sys.stdin.read()
"""


def _exec_entry_typed_in(project: Path, daemon: Daemon, tmp_path: Path) -> dict[str, Any]:
    """``launch-config --exec`` typed in ``project``, the daemon's config named relative to it."""
    config = os.path.relpath(daemon.config, project)
    env = {
        **os.environ,
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
    }
    argv = [str(SCRIPT), "--config", config, "launch-config", "--client", "codex", "--exec"]
    argv += ["--", sys.executable, "s/server.py", "out", "--port=8080"]
    entry: dict[str, Any] = json.loads(_run(argv, project, env))["mcpServers"]["gitea-author"]
    args = entry["args"]
    assert args[3 : args.index("--client")] == [
        "--config",
        str(project / config),
        "--socket",
        str(daemon.socket),
    ]
    assert os.path.samefile(args[4], daemon.config)
    assert args[args.index("--") + 1 :] == [
        sys.executable,
        str(project / "s" / "server.py"),
        str(project / "out"),
        "--port=8080",
    ]
    return entry


@pytest.mark.anyio
async def test_exec_form_started_from_another_directory_runs_the_server_on_the_same_daemon(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    (project / "s").mkdir(parents=True)
    (project / "s" / "server.py").write_text(SERVER)
    (project / "out").mkdir()
    with running_daemon(ttl=30.0) as daemon:
        await wait_ready(daemon)
        entry = _exec_entry_typed_in(project, daemon, tmp_path)
        # Started the way an MCP client does: from /, with the printed env, no shell.
        served = project / "out" / "served"
        with subprocess.Popen(
            [entry["command"], *entry["args"]],
            cwd="/",
            env={**os.environ, **entry["env"]},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ) as sidecar:
            try:
                await wait_for(served.exists, what="the server to start")
                child = int(served.read_text())

                def registered() -> bool:
                    workers = snapshot(daemon)["workers"]
                    return [w["status"] for w in workers if w["pid"] == child] == ["active"]

                # Registered on the daemon the carried --config and --socket name.
                await wait_for(registered, what="the registration")
                assert sidecar.stdin is not None
                sidecar.stdin.close()
                assert sidecar.wait(timeout=30) == 0
            finally:
                if sidecar.poll() is None:
                    sidecar.kill()
    assert daemon.process.returncode == 0
