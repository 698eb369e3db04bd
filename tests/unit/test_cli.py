"""The CLI's own behaviour: usage errors, config errors, launch-config, token create, exit codes."""

from __future__ import annotations

import importlib
import json
import tomllib
from pathlib import Path

import pytest

from supervisor.cli import EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, main
from supervisor.cli.common import EXIT_REFUSED
from supervisor.client.remote import RemoteUnauthenticated
from supervisor.settings.profiles import ProfileBook
from supervisor.version import package_version


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI reads XDG locations; keep every test off the real home directory."""
    for variable in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.setenv(variable, str(tmp_path / variable.lower()))
    monkeypatch.delenv("FLEET_SUPERVISOR_TOKEN", raising=False)


def test_bad_config_value_is_a_usage_error_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "supervisor.toml"
    config.write_text("[heartbeat]\nttl_seconds = -1\n")
    assert main(["--config", str(config), "run"]) == EXIT_USAGE
    assert "heartbeat.ttl_seconds" in capsys.readouterr().err


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == EXIT_USAGE
    assert "invalid choice" in capsys.readouterr().err


def test_apply_needs_exactly_one_fencing_token(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "apply",
                "--registry-fingerprint",
                "a",
                "--scope-fingerprint",
                "b",
                "--candidate-fingerprint",
                "c",
                "--workers",
                "w",
            ]
        )
    assert exit_info.value.code == EXIT_USAGE


def test_launch_config_prints_five_servers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch-config", "--client", "codex", "--", "sh", "--flag"]) == EXIT_OK
    config = json.loads(capsys.readouterr().out)
    assert len(config["mcpServers"]) == 5
    assert config["mcpServers"]["gitea-reviewer"]["args"] == ["--flag"]


def test_launch_config_refuses_an_untrusted_instance_id(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["launch-config", "--client", "codex", "--instance-id", "pid-42", "--", "sh"])
    assert code == EXIT_USAGE
    assert "untrusted" in capsys.readouterr().err


def test_launch_config_needs_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch-config", "--client", "codex"]) == EXIT_USAGE


def test_token_create_bootstraps_the_profiles_file_and_stores_only_a_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profiles = tmp_path / "cfg" / "profiles.toml"
    assert main(["token", "create", "prgs-controller", "--profiles", str(profiles)]) == EXIT_OK
    token = capsys.readouterr().out.strip()
    assert token
    assert token not in profiles.read_text()
    assert profiles.stat().st_mode & 0o777 == 0o600
    assert "prgs-controller" in tomllib.loads(profiles.read_text())["profiles"]
    book = ProfileBook(profiles)
    profile = book.authenticate(token)
    assert profile is not None
    assert profile.name == "prgs-controller"


def test_operator_command_without_a_daemon_exits_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--socket", str(tmp_path / "none.sock"), "status", "--token", "t"])
    assert code == EXIT_UNREACHABLE
    assert "unreachable" in capsys.readouterr().err


def test_version_is_the_installed_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == EXIT_OK
    assert capsys.readouterr().out.strip() == f"fleet-supervisor {package_version()}"
    assert package_version() != "0+unknown"


def test_launch_config_refuses_a_bare_server_name_that_is_not_on_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["launch-config", "--client", "codex", "--", "no-such-mcp-server-here"])
    assert code == EXIT_USAGE
    assert "not on PATH" in capsys.readouterr().err


def test_every_command_of_the_parser_is_dispatched_to_a_function_that_exists() -> None:
    # The command table names modules and functions as strings (imported when a command
    # runs): a misspelt one would only fail when somebody runs that command.
    import argparse
    import inspect

    from supervisor.cli.fleet import FLEET_COMMANDS
    from supervisor.cli.main import _COMMANDS, _command
    from supervisor.cli.parser import build_parser

    for name in _COMMANDS:
        run = _command(name)
        assert run is not None
        assert list(inspect.signature(run).parameters)[:2] == ["args", "settings"], name
    assert set(_COMMANDS) >= FLEET_COMMANDS
    subparsers = next(
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    # The rest are spelled out in _dispatch: run, migrate, namespace-probe, clients.
    assert set(subparsers.choices) - set(_COMMANDS) == {
        "run",
        "migrate",
        "namespace-probe",
        "clients",
    }


def test_a_refusal_for_want_of_a_token_says_how_to_make_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(_args: object) -> int:
        raise RemoteUnauthenticated(
            "this operation needs a profile token", remote_code="unauthenticated"
        )

    # The module, not the ``main`` function supervisor.cli exports under the same name.
    monkeypatch.setattr(importlib.import_module("supervisor.cli.main"), "_dispatch", refuse)
    assert main(["reap", "plan"]) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert "unauthenticated: this operation needs a profile token" in err
    assert "fleet-supervisor token create PROFILE" in err
    assert "FLEET_SUPERVISOR_TOKEN" in err
