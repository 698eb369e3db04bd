"""`fleet-supervisor namespace-probe`: real child servers and the real MCP client, offline only."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from supervisor.cli import main

pytestmark = pytest.mark.integration


def write_config(tmp_path: Path, modes: dict[str, str]) -> Path:
    servers = {
        name: {
            "command": sys.executable,
            "args": ["-m", "tests.integration.fake_gitea_mcp"],
            "env": {
                "FAKE_GITEA_MODE": mode,
                "GITEA_MCP_PROFILE": f"prgs-{name}",
                "GITEA_TOKEN": "do-not-print",
            },
        }
        for name, mode in modes.items()
    }
    path = tmp_path / "mcp_config.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def probe(
    capsys: pytest.CaptureFixture[str], config: Path, *names: str
) -> tuple[int, list[dict[str, Any]]]:
    argv = ["namespace-probe", "--config", str(config), "--json", "--timeout", "60"]
    for name in names:
        argv += ["--namespace", name]
    code = main(argv)
    out = capsys.readouterr().out
    assert "do-not-print" not in out
    return code, json.loads(out)


def test_a_working_server_is_healthy_but_never_proof(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"gitea-merger": "ok"})
    code, [result] = probe(capsys, config, "gitea-merger")
    assert code == 0
    assert (result["healthy"], result["required_tool_callable"]) == (True, True)
    assert result["required_tool_registered"] is True
    assert (result["probe_source"], result["ide_namespace_proven"]) == ("offline_spawn", False)
    assert result["blocks_merge_workflow"] is False
    assert result["diagnostics"]["env"] == {"GITEA_MCP_PROFILE": "prgs-gitea-merger"}
    assert result["diagnostics"]["config_path"] == str(config)


def test_eof_failure_missing_tool_and_missing_entry_fail_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path, {"gitea-author": "eof", "gitea-reviewer": "error", "gitea-tools": "missing"}
    )
    code, results = probe(
        capsys, config, "gitea-author", "gitea-reviewer", "gitea-tools", "gitea-merger"
    )
    assert code == 1
    by_name = {r["namespace"]: r for r in results}
    assert by_name["gitea-author"]["error_type"] == "namespace_eof"
    assert by_name["gitea-reviewer"]["error_type"] == "namespace_call_failed"
    assert "authentication failed" in by_name["gitea-reviewer"]["error_message"]
    assert by_name["gitea-tools"]["required_tool"] == "gitea_list_profiles"
    assert by_name["gitea-tools"]["error_type"] == "tool_missing"
    assert by_name["gitea-merger"]["error_type"] == "namespace_not_configured"
    # An offline probe is a diagnostic: even a failed one blocks nothing.
    assert not any(r["blocks_merge_workflow"] for r in results)


def test_an_unreadable_config_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["namespace-probe", "--config", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
