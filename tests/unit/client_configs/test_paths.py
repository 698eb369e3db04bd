"""Wrap makes relative paths absolute where the client's start directory is known."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from supervisor.cli import EXIT_OK, build_parser, main
from supervisor.client_configs.entries import Wrapper
from supervisor.client_configs.locations import ConfigFile
from supervisor.client_configs.rewrite import EntryResult, Selection, rewrite_text
from supervisor.exec.exec_args import parse_args

WRAPPER = Wrapper(("/py", "-I", "-S", "/s/exec_in_place.py"), "/run/s.sock")
SERVER = "import os, sys; print(os.getcwd()); print(sys.argv[0])\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    for name in ("server.py", "bin/srv", "sub/tool.py", "srv/__init__.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(SERVER)
    return root


def _mcp_json(root: Path) -> ConfigFile:
    return ConfigFile("claude_code", "project", root / ".mcp.json", "json", "mcpServers", root)


def _wrap(file: ConfigFile, entry: dict[str, Any]) -> tuple[list[str], EntryResult, str, str]:
    """The wrapped entry's argv after ``--``, its result, and the original and new text."""
    text = json.dumps({"mcpServers": {"s": entry}}, indent=2, ensure_ascii=False)
    new, (result,) = rewrite_text(file, text, "wrap", Selection(), WRAPPER)
    assert rewrite_text(file, new, "unwrap", Selection())[0] == text
    args = json.loads(new)["mcpServers"]["s"]["args"]
    return args[args.index("--") + 1 :], result, text, new


def test_a_project_file_resolves_against_the_project(project: Path) -> None:
    entry = {"command": "./bin/srv", "args": ["./server.py", "sub/tool.py", "server.py", "."]}
    inner, result, _, new = _wrap(_mcp_json(project), entry)
    assert inner == [
        f"{project}/bin/srv",
        f"{project}/server.py",
        f"{project}/sub/tool.py",
        f"{project}/server.py",
        str(project),
    ]
    args = json.loads(new)["mcpServers"]["s"]["args"]
    assert args[args.index("--as-written") + 1] == "0=./bin/srv"
    assert "4=." in args
    assert result.note == ""


def test_words_that_are_not_paths_are_left_alone(project: Path) -> None:
    # A bare command is looked up on PATH; a bare directory is a module or package name.
    (project / "node").write_text("")
    entry = {"command": "node", "args": ["-y", "@scope/pkg", "-m", "srv", "missing/x.py"]}
    inner, result, _, new = _wrap(_mcp_json(project), entry)
    assert inner == ["node", "-y", "@scope/pkg", "-m", "srv", "missing/x.py"]
    assert "--as-written" not in new
    assert result.note == ""


def test_an_absolute_cwd_key_wins_even_in_a_user_file(project: Path, tmp_path: Path) -> None:
    user = ConfigFile("cursor", "user", tmp_path / "mcp.json", "json")
    inner, result, _, _ = _wrap(
        user, {"command": "python", "args": ["tool.py"], "cwd": str(project / "sub")}
    )
    assert inner == ["python", f"{project}/sub/tool.py"]
    assert result.note == ""
    inner, _, _, _ = _wrap(
        _mcp_json(project), {"command": "python", "args": ["server.py"], "cwd": str(project)}
    )
    assert inner == ["python", f"{project}/server.py"]


def test_a_relative_cwd_resolves_against_the_project_first(project: Path) -> None:
    inner, _, _, _ = _wrap(
        _mcp_json(project),
        {"command": "python", "args": ["./tool.py", "../server.py"], "cwd": "sub"},
    )
    assert inner == ["python", f"{project}/sub/tool.py", f"{project}/sub/../server.py"]


@pytest.mark.parametrize(
    ("cwd", "why"),
    [("sub", "its cwd is relative"), ("${workspaceFolder}", "its cwd is not a plain path")],
)
def test_without_a_known_directory_paths_are_kept_and_named(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cwd: str, why: str
) -> None:
    monkeypatch.chdir(project)
    user = ConfigFile("gemini", "user", tmp_path / "settings.json", "json")
    inner, result, _, _ = _wrap(user, {"command": "python", "args": ["./server.py"], "cwd": cwd})
    assert inner == ["python", "./server.py"]
    assert "kept as written (./server.py)" in result.note
    assert why in result.note


def test_a_user_file_notes_only_paths_that_exist_here(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    (project / "@scope" / "pkg").mkdir(parents=True)
    user = ConfigFile("claude_desktop", "user", tmp_path / "c.json", "json")
    entry = {"command": "npx", "args": ["-y", "@scope/pkg", "bin/srv", "gone/x.py", "node"]}
    inner, result, _, _ = _wrap(user, entry)
    assert inner == ["npx", "-y", "@scope/pkg", "bin/srv", "gone/x.py", "node"]
    assert result.note == (
        "relative path(s) kept as written (bin/srv): a user-scope file names no directory "
        "its client starts servers in"
    )
    inner, result, _, _ = _wrap(user, {"command": "npx", "args": ["-y", "@scope/pkg"]})
    assert result.note == ""


def test_claude_per_project_maps_resolve_against_their_project(project: Path) -> None:
    claude = ConfigFile("claude_code", "user", project.parent / ".claude.json", "json")
    text = json.dumps(
        {
            "mcpServers": {"u": {"command": "python", "args": ["./server.py"]}},
            "projects": {
                str(project): {"mcpServers": {"p": {"command": "python", "args": ["./server.py"]}}}
            },
        }
    )
    new, _ = rewrite_text(claude, text, "wrap", Selection(), WRAPPER)
    document = json.loads(new)
    assert document["mcpServers"]["u"]["args"][-1] == "./server.py"
    assert document["projects"][str(project)]["mcpServers"]["p"]["args"][-1] == (
        f"{project}/server.py"
    )
    assert rewrite_text(claude, new, "unwrap", Selection())[0] == text


@pytest.mark.parametrize(
    "token", [r'".\/server.py"', r'"\u002e/server.py"', r'"./server\u002epy"', r'"server.p\u0079"']
)
def test_a_path_whose_escapes_would_not_survive_is_kept(project: Path, token: str) -> None:
    text = '{"mcpServers": {"s": {"command": "python", "args": [' + token + ', "bin/srv"]}}}'
    file = _mcp_json(project)
    new, (result,) = rewrite_text(file, text, "wrap", Selection(), WRAPPER)
    assert json.loads(new)["mcpServers"]["s"]["args"][-2:] == [
        json.loads(token),
        f"{project}/bin/srv",
    ]
    assert new.count("--as-written") == 1
    assert f"kept as written ({token}): unwrap could not give" in result.note
    assert rewrite_text(file, new, "unwrap", Selection())[0] == text


def test_toml_literal_strings_stay_literal(project: Path) -> None:
    file = ConfigFile("codex", "user", project / "config.toml", "toml", "mcp_servers")
    text = (
        "[mcp_servers.s]\ncommand = 'python' # mine\n"
        f"args = ['./server.py', \"sub/tool.py\"]\ncwd = '{project}'\n"
    )
    new, _ = rewrite_text(file, text, "wrap", Selection(), WRAPPER)
    assert f"'{project}/server.py', \"{project}/sub/tool.py\"]" in new
    assert rewrite_text(file, new, "unwrap", Selection())[0] == text


def test_a_record_that_does_not_fit_its_command_is_not_unwrapped(project: Path) -> None:
    args = ["-I", "-S", "/s/exec_in_place.py", "--as-written", "5=x", "--", "python", "/a/s.py"]
    text = json.dumps({"mcpServers": {"s": {"command": "/py", "args": args}}})
    new, (result,) = rewrite_text(_mcp_json(project), text, "unwrap", Selection())
    assert new == text
    assert (result.action, "--as-written" in result.note) == ("skipped", True)


@pytest.mark.parametrize(
    "flags", [["--as-written", "1=./server.py"], ["--as-written=1=./s.py", "--as-written", "0=p"]]
)
def test_the_wrapper_accepts_and_ignores_as_written(flags: list[str]) -> None:
    options = parse_args(["--client", "cursor", *flags, "--", "python", "/p/server.py"], {})
    assert options.command == ("python", "/p/server.py")
    assert options.client == "cursor"
    parsed = build_parser().parse_args(["exec", *flags, "--", "python", "/p/server.py"])
    assert parsed.child == ["--", "python", "/p/server.py"]


@pytest.mark.integration
def test_the_wrapped_server_starts_with_the_absolute_path_from_elsewhere(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.setenv(variable, str(tmp_path / variable.lower()))  # no daemon there
    config = project / ".mcp.json"
    original = json.dumps(
        {"mcpServers": {"s": {"command": sys.executable, "args": ["./server.py"]}}}
    )
    config.write_text(original)
    argv = ["clients", "wrap", "--home", str(tmp_path), "--project", str(project)]
    assert main(argv) == EXIT_OK
    entry = json.loads(config.read_text())["mcpServers"]["s"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [entry["command"], *entry["args"]],
        cwd=elsewhere,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(elsewhere), f"{project}/server.py"]
    assert "daemon_unreachable" in done.stderr
    assert main([*argv[:1], "unwrap", *argv[2:]]) == EXIT_OK
    assert config.read_text() == original
