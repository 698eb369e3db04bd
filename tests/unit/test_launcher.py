"""launch-config: one instance id, per-worker sessions, commands that work from anywhere."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from supervisor.errors import ConfigError
from supervisor.launcher import build_launch_config, resolve_server_command
from supervisor.policy.identity import (
    NAMESPACES,
    UntrustedInstanceError,
    assess_instance_identity,
    mint_instance_id,
)

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def test_one_trusted_instance_id_is_shared_by_all_five_namespaces() -> None:
    config = build_launch_config(client_type="codex", command="srv", args=["--x"], now=NOW)
    servers = config["mcpServers"]
    assert sorted(servers) == sorted(f"gitea-{ns}" for ns in NAMESPACES)
    ids = {entry["env"]["GITEA_MCP_CLIENT_INSTANCE"] for entry in servers.values()}
    assert ids == {config["client_instance_id"]}
    assert assess_instance_identity(config["client_instance_id"]).trusted
    assert servers["gitea-author"]["env"]["GITEA_MCP_PROFILE"] == "prgs-author"
    assert servers["gitea-author"]["command"] == "srv"
    assert servers["gitea-author"]["args"] == ["--x"]


def test_two_launches_get_distinct_ids() -> None:
    first = build_launch_config(client_type="codex", command="srv", now=NOW)
    second = build_launch_config(client_type="codex", command="srv", now=NOW)
    assert first["client_instance_id"] != second["client_instance_id"]


def test_each_worker_gets_its_own_session_derived_from_the_launch() -> None:
    config = build_launch_config(client_type="codex", command="srv", session_id="launch-1")
    sessions = [e["env"]["GITEA_MCP_CLIENT_SESSION"] for e in config["mcpServers"].values()]
    assert len(set(sessions)) == len(NAMESPACES)
    assert all(s.startswith("launch-1.") for s in sessions)


def test_a_given_trusted_id_is_reused_and_an_untrusted_one_refused() -> None:
    trusted = mint_instance_id("codex", now=NOW, nonce="n")
    config = build_launch_config(client_type="codex", command="srv", instance_id=trusted)
    assert config["client_instance_id"] == trusted
    for bad in ("legacy-pid-4", "pid-12", "my-own-id", "inst-codex-bad"):
        with pytest.raises(UntrustedInstanceError):
            build_launch_config(client_type="codex", command="srv", instance_id=bad)


def test_exec_wrapper_puts_the_server_command_after_a_double_dash() -> None:
    config = build_launch_config(
        client_type="codex",
        command="srv",
        args=["a"],
        exec_wrapper=["/bin/fleet-supervisor", "--socket", "/s", "exec"],
    )
    entry = config["mcpServers"]["gitea-merger"]
    assert entry["command"] == "/bin/fleet-supervisor"
    assert entry["args"] == ["--socket", "/s", "exec", "--", "srv", "a"]


def test_server_command_paths_become_absolute_and_bare_names_stay_when_on_path(
    tmp_path: Path,
) -> None:
    assert resolve_server_command("bin/srv", cwd="/opt/app") == "/opt/app/bin/srv"
    assert resolve_server_command("./srv", cwd="/opt/app") == "/opt/app/srv"
    assert resolve_server_command("/usr/bin/env", cwd="/elsewhere") == "/usr/bin/env"
    tool = tmp_path / "bin" / "my-server"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert resolve_server_command("my-server", search_path=str(tool.parent)) == "my-server"
    # A relative PATH entry only works from this directory: name the file itself.
    found = resolve_server_command("my-server", cwd=str(tmp_path), search_path="bin")
    assert found == str(tool)


def test_a_bare_server_name_not_on_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not on PATH"):
        resolve_server_command("no-such-server", search_path=str(tmp_path))
