"""launch-config run by a relative script path prints commands that start from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from supervisor.version import package_version

pytestmark = pytest.mark.integration

# The venv holding the interpreter running the tests, and its console script.
VENV = Path(sys.executable).parent.parent
SCRIPT = Path(sys.executable).parent / "fleet-supervisor"


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
    assert Path(entry["command"]).is_absolute()
    assert entry["command"] == str(SCRIPT)
    socket_index = entry["args"].index("--socket") + 1
    assert Path(entry["args"][socket_index]).is_absolute()
    # The wrapped server command was a relative path too.
    assert entry["args"][entry["args"].index("--") + 1] == str(VENV / "bin" / "python")
    version = _run([entry["command"], "--version"], tmp_path)
    assert version.strip() == f"fleet-supervisor {package_version()}"


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
