"""``fleet-supervisor clients``: discovery, writes, refusals, and what bad input leaves alone."""

from __future__ import annotations

import functools
import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import supervisor.client_configs.command as command_module
from supervisor.cli import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, main
from supervisor.client_configs.command import plan_files, write_plans
from supervisor.client_configs.entries import Wrapper
from supervisor.client_configs.files import BACKUP_INFIX
from supervisor.client_configs.launcher import exec_command
from supervisor.client_configs.locations import config_files
from supervisor.client_configs.rewrite import Selection
from tests.unit.client_configs.documents import json_config

CLAUDE = {
    "numStartups": 3,
    "mcpServers": {
        "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"], "env": {}},
        "web": {"type": "http", "url": "https://example.test/mcp"},
    },
    "projects": {"/work/p": {"mcpServers": {"local": {"command": "./srv"}}, "history": []}},
}
CODEX = '# mine\n[mcp_servers.docs]\ncommand = "npx" # pinned\nargs = ["-y", "docs-mcp"]\n'


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.setenv(variable, str(tmp_path / variable.lower()))


def _home(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "home" / "project"
    for directory in (
        project / ".vscode",
        project / ".cursor",
        project / ".gemini",
        home / ".gemini",
        home / ".codex",
        home / ".cursor",
        home / ".config" / "Claude",
    ):
        directory.mkdir(parents=True, exist_ok=True)
    (home / ".claude.json").write_text(json.dumps(CLAUDE, indent=2))
    (home / ".codex" / "config.toml").write_text(CODEX)
    (home / ".gemini" / "settings.json").write_text('{"mcpServers": {"g": {"command": "node"}}}')
    (home / ".config" / "Claude" / "claude_desktop_config.json").write_text(
        '{"mcpServers": {"d": {"command": "python", "args": ["-m", "srv"]}}}'
    )
    (project / ".mcp.json").write_text('{"mcpServers": {"p": {"command": "x"}}}')
    (project / ".cursor" / "mcp.json").write_text('{"mcpServers": {"c": {"command": "x"}}}')
    (project / ".vscode" / "mcp.json").write_text(
        '{\n  // VS Code\n  "servers": {"v": {"type": "stdio", "command": "node", "args": []},},'
        "\n}\n"
    )
    return home, project


def _where(home: Path, project: Path) -> list[str]:
    return ["--home", str(home), "--project", str(project)]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_list_finds_every_client_scope_and_transport(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = _home(tmp_path)
    assert main(["clients", "list", "--json", *_where(home, project)]) == EXIT_OK
    files = json.loads(capsys.readouterr().out)
    found = {
        (f["client"], f["scope"], e["scope"], e["name"], e["transport"])
        for f in files
        for e in f["entries"]
    }
    assert found == {
        ("claude_code", "user", "user", "time", "stdio"),
        ("claude_code", "user", "user", "web", "http"),
        ("claude_code", "user", "project:/work/p", "local", "stdio"),
        ("claude_code", "project", "project", "p", "stdio"),
        ("claude_desktop", "user", "user", "d", "stdio"),
        ("gemini", "user", "user", "g", "stdio"),
        ("codex", "user", "user", "docs", "stdio"),
        ("cursor", "project", "project", "c", "stdio"),
        ("vscode", "project", "project", "v", "stdio"),
    }
    assert all(not e["wrapped"] for f in files for e in f["entries"])


def test_a_malformed_file_is_reported_with_its_path_and_the_parse_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = _home(tmp_path)
    broken = home / ".gemini" / "settings.json"
    broken.write_text('{"mcpServers": {"g": ')
    assert main(["clients", "list", *_where(home, project)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert str(broken) in err
    assert "line 1 column" in err


def test_wrap_writes_a_backup_keeps_the_mode_and_a_second_wrap_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = _home(tmp_path)
    claude = home / ".claude.json"
    claude.chmod(0o600)
    original = claude.read_bytes()
    assert main(["clients", "wrap", "--client", "claude_code", *_where(home, project)]) == EXIT_OK
    entry = json.loads(claude.read_text())["mcpServers"]["time"]
    assert entry["args"][entry["args"].index("--client") + 1] == "claude_code"
    assert entry["args"][-3:] == ["--", "uvx", "mcp-server-time"]
    assert "--instance-id" not in entry["args"], "identity comes from the client at run time"
    assert stat.S_IMODE(claude.stat().st_mode) == 0o600
    (backup,) = home.glob(f".claude.json{BACKUP_INFIX}*.bak")
    assert backup.read_bytes() == original
    assert main(["clients", "wrap", *_where(home, project)]) == EXIT_OK
    before = _tree(home)
    assert main(["clients", "wrap", *_where(home, project)]) == EXIT_OK
    assert _tree(home) == before, "wrapping wrapped entries writes nothing, not even a backup"
    assert main(["clients", "unwrap", *_where(home, project)]) == EXIT_OK
    assert claude.read_bytes() == original
    assert (home / ".codex" / "config.toml").read_text() == CODEX


def test_an_entry_wrapped_with_the_old_sidecar_path_is_wrapped_and_unwraps_byte_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before the rename, wrap wrote <package>/sidecar/exec_in_place.py into client files.
    home, project = _home(tmp_path)
    claude = home / ".claude.json"
    original = claude.read_bytes()
    new_prefix = exec_command()
    assert new_prefix[-1].endswith(os.path.join("supervisor", "exec", "exec_in_place.py"))
    old_script = str(Path(new_prefix[-1]).parents[1] / "sidecar" / "exec_in_place.py")
    with monkeypatch.context() as patched:
        patched.setattr(command_module, "exec_command", lambda: [*new_prefix[:-1], old_script])
        assert main(["clients", "wrap", "--client", "claude_code", *_where(home, project)]) == 0
    old_wrapped = claude.read_bytes()
    assert old_script.encode() in old_wrapped
    capsys.readouterr()
    assert main(["clients", "list", "--json", *_where(home, project)]) == EXIT_OK
    files = json.loads(capsys.readouterr().out)
    claude_entries = [e for f in files if f["path"] == str(claude) for e in f["entries"]]
    assert {e["name"]: e["wrapped"] for e in claude_entries if e["transport"] == "stdio"} == {
        "time": True,
        "local": True,
    }
    assert main(["clients", "wrap", *_where(home, project)]) == EXIT_OK
    assert claude.read_bytes() == old_wrapped, "an old-path entry is not wrapped again"
    assert main(["clients", "unwrap", *_where(home, project)]) == EXIT_OK
    assert claude.read_bytes() == original
    assert main(["clients", "wrap", *_where(home, project)]) == EXIT_OK
    assert new_prefix[-1].encode() in claude.read_bytes(), "a new wrap writes the new path"
    assert old_script.encode() not in claude.read_bytes()


def test_dry_run_prints_a_diff_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = _home(tmp_path)
    before = _tree(home)
    assert main(["clients", "wrap", "--dry-run", *_where(home, project)]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"--- {home / '.claude.json'}" in out
    assert '+      "command": ' in out
    assert _tree(home) == before


def _corrupt(text: str, cut: int, junk: str) -> str:
    return text[: cut % (len(text) + 1)] + junk


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(json_config(), st.integers(0, 10_000), st.sampled_from(["", "{", ",", '"', "]]", "\x00"]))
def test_a_malformed_file_stops_every_write(tmp_path: Path, text: str, cut: int, junk: str) -> None:
    home, project = _home(tmp_path)
    broken = _corrupt(text, cut, junk)
    if broken.rstrip() == text.rstrip():
        return  # only the final newline cut: a generated config is valid (JSONC too)
    try:
        json.loads(broken)
    except ValueError:
        pass
    else:
        return  # still valid JSON: not this test's case
    (project / ".cursor" / "mcp.json").write_text(broken)
    before = _tree(home)
    assert main(["clients", "wrap", *_where(home, project)]) == EXIT_USAGE
    assert _tree(home) == before, "a malformed file anywhere means nothing is written"


def test_a_file_changed_between_read_and_rename_is_refused(tmp_path: Path) -> None:
    home, project = _home(tmp_path)
    target = home / ".gemini" / "settings.json"
    files = [f for f in config_files(home, project) if f.path == target]
    wrapper = Wrapper(("/py", "-I", "-S", "/s/exec_in_place.py"), "/run/s.sock")
    reports = plan_files(files, "wrap", Selection(), wrapper)
    concurrent = b'{"mcpServers": {}, "theme": "changed by gemini"}'

    def someone_else_writes(path: Path) -> None:
        path.write_bytes(concurrent)

    _, refused = write_plans(reports, before_rename=someone_else_writes)
    assert len(refused) == 1
    assert "changed since it was read" in refused[0]
    assert target.read_bytes() == concurrent
    assert sorted(p.name for p in target.parent.iterdir()) == ["settings.json"]


def test_the_cli_exits_1_when_the_file_changed_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = _home(tmp_path)
    target = home / ".codex" / "config.toml"

    def edit(path: Path) -> None:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("# added by codex\n")

    monkeypatch.setattr(
        command_module, "write_plans", functools.partial(write_plans, before_rename=edit)
    )
    assert main(["clients", "wrap", "--client", "codex", *_where(home, project)]) == EXIT_REFUSED
    assert target.read_text() == CODEX + "# added by codex\n"
    assert "changed since it was read" in capsys.readouterr().err


def test_from_backup_restores_the_bytes_and_keeps_the_current_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = _home(tmp_path)
    cursor = project / ".cursor" / "mcp.json"
    original = cursor.read_bytes()
    assert main(["clients", "wrap", "--client", "cursor", *_where(home, project)]) == EXIT_OK
    wrapped = cursor.read_bytes()
    (backup,) = cursor.parent.glob(f"mcp.json{BACKUP_INFIX}*.bak")
    assert main(["clients", "unwrap", "--from-backup", str(backup)]) == EXIT_OK
    assert cursor.read_bytes() == original
    kept = [p for p in cursor.parent.glob("*.bak") if p != backup]
    assert [p.read_bytes() for p in kept] == [wrapped]


@pytest.mark.parametrize(
    "argv",
    [
        ["clients", "list", "--file", "nobody=/x"],
        ["clients", "list", "--file", "gemini"],
        ["clients", "wrap", "--scope", "global"],
        ["clients", "wrap", "--client", "emacs"],
        ["clients", "unwrap", "--from-backup", "/etc/hostname"],
    ],
)
def test_bad_flags_are_usage_errors_that_change_nothing(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = _home(tmp_path)
    before = _tree(home)
    try:
        code = main([*argv, *_where(home, project)] if "--from-backup" not in argv else argv)
    except SystemExit as exit_info:
        code = int(str(exit_info.code))
    assert code == EXIT_USAGE
    assert capsys.readouterr().err
    assert _tree(home) == before


def test_file_overrides_replace_that_clients_discovery(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = _home(tmp_path)
    mine = tmp_path / "elsewhere.json"
    mine.write_text('{"mcpServers": {"only": {"command": "x"}}}')
    argv = ["clients", "list", "--json", "--file", f"gemini={mine}", *_where(home, project)]
    assert main(argv) == EXIT_OK
    files = json.loads(capsys.readouterr().out)
    gemini = [f for f in files if f["client"] == "gemini"]
    assert [(f["path"], [e["name"] for e in f["entries"]]) for f in gemini] == [
        (str(mine), ["only"])
    ]


def test_a_symlinked_config_stays_a_symlink(tmp_path: Path) -> None:
    home, project = _home(tmp_path)
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {"s": {"command": "x"}}}')
    link = home / ".cursor" / "mcp.json"
    link.symlink_to(real)
    assert (
        main(["clients", "wrap", "--client", "cursor", "--scope", "user", *_where(home, project)])
        == EXIT_OK
    )
    assert link.is_symlink()
    assert "exec_in_place.py" in real.read_text()


def test_launch_config_prints_one_generic_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["launch-config", "--client", "cursor", "--server", "my srv", "--", "sh", "-c", "x"])
        == EXIT_OK
    )
    assert json.loads(capsys.readouterr().out) == {"my srv": {"command": "sh", "args": ["-c", "x"]}}
    argv = [
        "--socket",
        "/run/s.sock",
        "launch-config",
        "--client",
        "cursor",
        "--exec",
        "--server",
        "my srv",
        "--",
        "sh",
    ]
    assert main(argv) == EXIT_OK
    entry = json.loads(capsys.readouterr().out)["my srv"]
    assert os.path.basename(entry["args"][2]) == "exec_in_place.py"
    assert entry["args"][3:] == [
        "--socket",
        "/run/s.sock",
        "--client",
        "cursor",
        "--name",
        "my_srv",
        "--",
        "sh",
    ]


def test_namespace_probe_reads_the_clients_own_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = _home(tmp_path)
    argv = ["namespace-probe", "--client", "gemini", "--namespace", "gitea-author", "--json"]
    assert main([*argv, *_where(home, project)]) == 1  # configured elsewhere, not there
    (result,) = json.loads(capsys.readouterr().out)
    assert result["error_type"] == "namespace_not_configured"
    assert str(home / ".gemini" / "settings.json") in json.dumps(result)
    (home / ".gemini" / "settings.json").write_text("{")
    assert main([*argv, *_where(home, project)]) == EXIT_USAGE
    assert "settings.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    "broken",
    [CODEX + "[mcp_servers.docs]\n", "[mcp_servers.x\ncommand = 1\n", 'mcp_servers = "no"\n'],
)
def test_a_malformed_codex_file_stops_every_write(
    tmp_path: Path, broken: str, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = _home(tmp_path)
    (home / ".codex" / "config.toml").write_text(broken)
    before = _tree(home)
    assert main(["clients", "wrap", *_where(home, project)]) == EXIT_USAGE
    assert "config.toml" in capsys.readouterr().err
    assert _tree(home) == before
