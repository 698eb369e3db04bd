"""The exec wrapper's command line and socket path: the CLI's rules, without the CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from supervisor.exec.exec_args import (
    EXEC_SOCKET_SUFFIX,
    ExecOptions,
    HelpRequested,
    UsageError,
    exec_socket_path,
    parse_args,
    resolve_socket_path,
)
from supervisor.settings.config import default_socket_path, load_settings


def _summary(options: ExecOptions) -> dict[str, object]:
    return {name: getattr(options, name) for name in ExecOptions.__slots__}


DEFAULTS: dict[str, object] = {
    "client": "",
    "command": ("srv",),
    "config": None,
    "name": "srv",
    "namespace": "",
    "parent_death_signal": True,
    "socket": None,
    "timeout": 3.0,
    "ttl": None,
}


@pytest.mark.parametrize(
    ("argv", "env", "changed"),
    [
        (["--", "srv"], {}, {}),
        (["srv"], {}, {}),  # the command without a "--"
        (["exec", "--", "srv"], {}, {}),
        (["exec", "srv"], {}, {}),
        (["--", "srv", "--name", "x", "--"], {}, {"command": ("srv", "--name", "x", "--")}),
        (["srv", "-v", "exec"], {}, {"command": ("srv", "-v", "exec")}),
        (["exec", "--", "exec"], {}, {"command": ("exec",), "name": "exec"}),
        (["exec", "exec"], {}, {"command": ("exec",), "name": "exec"}),
        (
            ["--", "/usr/lib/node/bin/gitea-mcp", "-t"],
            {},
            {
                "command": ("/usr/lib/node/bin/gitea-mcp", "-t"),
                "name": "gitea-mcp",
            },
        ),
        (
            ["--socket", "/s", "--config", "/c", "exec", "--", "srv"],
            {},
            {
                "socket": "/s",
                "config": "/c",
            },
        ),
        (["--socket=/s", "exec", "--config=/c", "--", "srv"], {}, {"socket": "/s", "config": "/c"}),
        (["--socket", "/a", "--socket", "/b", "--", "srv"], {}, {"socket": "/b"}),
        (["--name", "gitea", "--", "srv"], {}, {"name": "gitea"}),
        (["--name=gitea", "srv"], {}, {"name": "gitea"}),
        (["--name", "my server/1", "--", "srv"], {}, {"name": "my_server_1"}),
        (["--name", "", "--", "srv"], {}, {}),
        (["--client", "Claude Code", "--", "srv"], {}, {"client": "Claude_Code"}),
        (["--", "srv"], {"GITEA_MCP_CLIENT": "codex"}, {"client": "codex"}),
        (["--client", "gemini", "--", "srv"], {"GITEA_MCP_CLIENT": "codex"}, {"client": "gemini"}),
        (["--", "srv"], {"GITEA_MCP_CLIENT": "a;b=c"}, {"client": "a_b_c"}),
        (["--client", "x" * 80, "--", "srv"], {}, {"client": "x" * 64}),
        (["--namespace", "author", "--", "srv"], {}, {"namespace": "author", "name": "author"}),
        (["--namespace=reconciler", "srv"], {}, {"namespace": "reconciler", "name": "reconciler"}),
        (
            ["--", "srv"],
            {"GITEA_MCP_PROFILE": "prgs-reviewer"},
            {
                "namespace": "reviewer",
                "name": "reviewer",
            },
        ),
        (["--", "srv"], {"GITEA_MCP_PROFILE": "merger"}, {"namespace": "merger", "name": "merger"}),
        (["--", "srv"], {"GITEA_MCP_PROFILE": "prgs-custom"}, {}),
        # A suffix that only ends in a namespace's letters names no namespace.
        (["--", "srv"], {"GITEA_MCP_PROFILE": "prgs-coauthor"}, {}),
        (
            ["--", "srv"],
            {"GITEA_MCP_PROFILE": "prgs_author"},
            {"namespace": "author", "name": "author"},
        ),
        (["--", "srv"], {"GITEA_MCP_PROFILE": ""}, {}),
        (
            ["--namespace", "author", "--", "srv"],
            {"GITEA_MCP_PROFILE": "prgs-merger"},
            {
                "namespace": "author",
                "name": "author",
            },
        ),
        (
            ["--namespace", "author", "--name", "gitea", "srv"],
            {},
            {
                "namespace": "author",
                "name": "gitea",
            },
        ),
        (["--ttl", "12.5", "--", "srv"], {}, {"ttl": 12.5}),
        (["--ttl=30", "srv"], {}, {"ttl": 30.0}),
        (["--timeout", "0.5", "--", "srv"], {}, {"timeout": 0.5}),
        (["--no-parent-death-signal", "--", "srv"], {}, {"parent_death_signal": False}),
        (["exec", "--no-parent-death-signal", "srv"], {}, {"parent_death_signal": False}),
    ],
)
def test_valid_command_lines(
    argv: list[str], env: dict[str, str], changed: dict[str, object]
) -> None:
    assert _summary(parse_args(argv, env)) == {**DEFAULTS, **changed}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give the server command"),
        (["--"], "give the server command"),
        (["exec"], "give the server command"),
        (["exec", "--"], "give the server command"),
        (["--name", "x"], "give the server command"),
        (["--bogus", "--", "srv"], "unknown option '--bogus'"),
        (["-v", "srv"], "unknown option '-v'"),
        (["--no-parent-death-signal=1", "--", "srv"], "unknown option"),
        (["--name"], "--name needs a value"),
        (["exec", "--socket"], "--socket needs a value"),
        (["--ttl", "soon", "--", "srv"], "--ttl needs a number"),
        (["--ttl", "0", "--", "srv"], "positive"),
        (["--ttl", "-5", "--", "srv"], "positive"),
        (["--ttl", "nan", "--", "srv"], "positive"),
        (["--ttl", "inf", "--", "srv"], "positive"),
        (["--ttl", "1e6", "--", "srv"], "positive"),
        (["--ttl=", "--", "srv"], "--ttl needs a number"),
        (["--timeout", "0", "--", "srv"], "positive"),
        (["--timeout", "x", "--", "srv"], "--timeout needs a number"),
        (["--namespace", "admin", "--", "srv"], "--namespace must be one of"),
        (["--namespace", "Author", "--", "srv"], "--namespace must be one of"),
    ],
)
def test_invalid_command_lines(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_args(argv, {})


def test_the_exec_socket_sits_beside_the_main_one() -> None:
    assert (
        exec_socket_path("/run/fs.sock")
        == "/run/fs.sock" + EXEC_SOCKET_SUFFIX
        == "/run/fs.sock.exec"
    )


# --- the socket path, by the CLI's rules -----------------------------------------------------


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An empty config home, a runtime dir and a home of the test's own."""
    config_home = tmp_path / "config-home"
    config_home.mkdir()
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("HOME", str(home))
    return dict(os.environ)


def _resolved(argv: list[str], env: dict[str, str]) -> str:
    return resolve_socket_path(parse_args([*argv, "--", "srv"], env), env)


def _config(path: Path, socket_line: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[database]\npath = "db.sqlite3"\n[socket]\n{socket_line}\n', "utf-8")
    return path


@pytest.mark.parametrize(
    "socket_line",
    [
        'path = "/run/fleet/abs.sock"',
        'path = "rel.sock"',
        'path = "sub/dir/rel.sock"',
        'path = "~/home.sock"',
        'path = "~"',
        'path = ""',
        'mode = "0600"',
    ],
)
def test_a_config_file_names_the_same_socket_as_load_settings(
    xdg: dict[str, str], tmp_path: Path, socket_line: str
) -> None:
    config = _config(tmp_path / "etc" / "supervisor.toml", socket_line)
    expected = str(load_settings(config).socket.path)
    assert _resolved(["--config", str(config)], xdg) == expected
    assert _resolved([f"--config={config}"], xdg) == expected


def test_a_relative_config_path_resolves_against_the_current_directory(
    xdg: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(tmp_path / "etc" / "supervisor.toml", 'path = "rel.sock"')
    monkeypatch.chdir(tmp_path)
    expected = str(load_settings("etc/supervisor.toml").socket.path)
    assert expected == str(tmp_path / "etc" / "rel.sock")
    assert _resolved(["--config", "etc/supervisor.toml"], xdg) == expected


def test_a_config_path_under_home_is_expanded(xdg: dict[str, str]) -> None:
    config = _config(Path(xdg["HOME"]) / "cfg" / "supervisor.toml", 'path = "rel.sock"')
    expected = str(load_settings("~/cfg/supervisor.toml").socket.path)
    assert expected == str(config.parent / "rel.sock")
    assert _resolved(["--config", "~/cfg/supervisor.toml"], xdg) == expected


def test_dot_dot_in_a_socket_path_names_the_same_file(xdg: dict[str, str], tmp_path: Path) -> None:
    config = _config(tmp_path / "etc" / "supervisor.toml", 'path = "../run/s.sock"')
    expected = load_settings(config).socket.path
    # load_settings keeps the "..", the wrapper normalizes it: the same file either way.
    assert _resolved(["--config", str(config)], xdg) == os.path.normpath(expected)


def test_without_a_config_the_default_socket_is_used(xdg: dict[str, str]) -> None:
    assert _resolved([], xdg) == str(default_socket_path())
    assert _resolved([], xdg) == os.path.join(xdg["XDG_RUNTIME_DIR"], "fleet-supervisor.sock")


def test_without_a_runtime_dir_the_default_is_per_uid_in_tmp(
    xdg: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for value in (None, "", "relative/runtime"):
        if value is None:
            monkeypatch.delenv("XDG_RUNTIME_DIR")
        else:
            monkeypatch.setenv("XDG_RUNTIME_DIR", value)
        env = dict(os.environ)
        assert _resolved([], env) == str(default_socket_path())
        assert _resolved([], env) == f"/tmp/fleet-supervisor-{os.getuid()}.sock"


def test_the_default_config_file_is_read_when_present(xdg: dict[str, str]) -> None:
    default = Path(xdg["XDG_CONFIG_HOME"]) / "fleet-supervisor" / "supervisor.toml"
    _config(default, 'path = "from-default.sock"')
    expected = str(load_settings(default).socket.path)
    assert expected == str(default.parent / "from-default.sock")
    assert _resolved([], xdg) == expected


def test_socket_wins_over_every_config(xdg: dict[str, str], tmp_path: Path) -> None:
    _config(Path(xdg["XDG_CONFIG_HOME"]) / "fleet-supervisor" / "supervisor.toml", 'path = "/d"')
    config = _config(tmp_path / "supervisor.toml", 'path = "/c"')
    assert _resolved(["--socket", "/given.sock"], xdg) == "/given.sock"
    assert _resolved(["--config", str(config), "--socket", "/given.sock"], xdg) == "/given.sock"
    # A broken config is not even read when --socket names the path.
    assert _resolved(["--config", "/no/such.toml", "--socket", "/g.sock"], xdg) == "/g.sock"
    assert _resolved(["--socket", "~/s.sock"], xdg) == os.path.join(xdg["HOME"], "s.sock")


def test_a_relative_socket_resolves_against_the_current_directory(
    xdg: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    expected = str(load_settings(overrides={"socket.path": "here.sock"}).socket.path)
    assert _resolved(["--socket", "here.sock"], xdg) == expected == str(tmp_path / "here.sock")


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"[socket\npath = 1\n", id="not-toml"),
        pytest.param(b'[socket]\npath = "a"\npath = "b"\n', id="duplicate-key"),
        pytest.param(b"\xff\xfe[socket]\n", id="not-utf8"),
        pytest.param(b"[socket]\npath = 5\n", id="path-not-a-string"),
        pytest.param(b"socket = 3\n", id="socket-not-a-table"),
    ],
)
def test_a_malformed_config_is_a_usage_error(
    xdg: dict[str, str], tmp_path: Path, content: bytes
) -> None:
    config = tmp_path / "bad.toml"
    config.write_bytes(content)
    with pytest.raises(UsageError, match="config"):
        _resolved(["--config", str(config)], xdg)
    with pytest.raises(Exception, match="config"):
        load_settings(config)  # the CLI refuses the same file


@pytest.mark.parametrize("name", ["missing.toml", "a-directory"])
def test_an_unreadable_config_is_a_usage_error(
    xdg: dict[str, str], tmp_path: Path, name: str
) -> None:
    (tmp_path / "a-directory").mkdir()
    with pytest.raises(UsageError, match="cannot read config"):
        _resolved(["--config", str(tmp_path / name)], xdg)


def test_a_broken_default_config_is_a_usage_error_too(xdg: dict[str, str]) -> None:
    default = Path(xdg["XDG_CONFIG_HOME"]) / "fleet-supervisor" / "supervisor.toml"
    default.parent.mkdir(parents=True)
    default.write_bytes(b"[socket\n")
    with pytest.raises(UsageError, match="cannot read config"):
        _resolved([], xdg)


def test_help_among_the_wrapper_flags_only() -> None:
    with pytest.raises(HelpRequested):
        parse_args(["--help"], {})
    with pytest.raises(HelpRequested):
        parse_args(["exec", "--client", "x", "-h", "--", "srv"], {})
    # After the command (or after --) it is the server's own flag.
    assert parse_args(["srv", "--help"], {}).command == ("srv", "--help")
    assert parse_args(["--", "srv", "-h"], {}).command == ("srv", "-h")
