"""launch-config: one instance id, per-worker sessions, commands that work from anywhere."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.cli import main
from supervisor.client_configs.launcher import (
    absolute_path,
    absolute_path_args,
    build_launch_config,
    exec_command,
    resolve_server_command,
)
from supervisor.errors import ConfigError
from supervisor.policy.identity.instance import (
    UntrustedInstanceError,
    assess_instance_identity,
    mint_instance_id,
)
from supervisor.policy.identity.worker_env import NAMESPACES

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
    assert entry["args"] == [
        *("--socket", "/s", "exec", "--client", "codex", "--name", "gitea-merger"),
        *("--namespace", "merger", "--", "srv", "a"),
    ]
    # Identity is derived at run time from the client: nothing baked into the file.
    assert config["client_instance_id"] is None
    for key in ("GITEA_MCP_CLIENT_INSTANCE", "GITEA_MCP_CLIENT_SESSION"):
        assert key not in entry["env"]
    assert entry["env"]["GITEA_MCP_PROFILE"] == "prgs-merger"


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


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A launch directory: a script, a data directory, a package, a symlinked directory."""
    root = tmp_path_factory.mktemp("project")
    (root / "s").mkdir()
    (root / "s" / "server.py").write_text("")
    (root / "data").mkdir()
    (root / "data" / "cfg.json").write_text("{}")
    (root / "my_server").mkdir()
    (root / "my_server" / "__init__.py").write_text("")
    (root / "real" / "deep").mkdir(parents=True)
    (root / "real" / "deep" / "f").write_text("")
    (root / "real" / "g").write_text("")
    # link/.. is real/, not the project root: a textual ".." collapse would lose g.
    (root / "link").symlink_to(root / "real" / "deep")
    return root


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("s/server.py", "{root}/s/server.py"),
        ("./s/server.py", "{root}/s/server.py"),
        ("s//server.py", "{root}/s/server.py"),
        ("data", "{root}/data"),
        ("data/", "{root}/data/"),
        (".", "{root}"),
        ("link/f", "{root}/link/f"),  # the symlink stays in the path
        ("link/../g", "{root}/link/../g"),
        ("--config=data/cfg.json", "--config={root}/data/cfg.json"),
        ("--root=.", "--root={root}"),
        # Not existing relative paths: kept exactly.
        ("s/missing.py", "s/missing.py"),
        ("-v", "-v"),
        ("--stdio", "--stdio"),
        ("--port=8080", "--port=8080"),
        ("--config=data/missing.json", "--config=data/missing.json"),
        ("--=data", "--=data"),
        ("-xdata", "-xdata"),
        ("-", "-"),
        ("", ""),
        ("http://localhost:8080/mcp", "http://localhost:8080/mcp"),
        ("/etc/hosts", "/etc/hosts"),
        ("--config=/etc/hosts", "--config=/etc/hosts"),
        ("my_server.main", "my_server.main"),
        ("print('served')", "print('served')"),
        ("a\x00b", "a\x00b"),
    ],
)
def test_existing_relative_path_arguments_become_absolute(
    project: Path, arg: str, expected: str
) -> None:
    assert absolute_path_args([arg], cwd=str(project)) == [expected.format(root=project)]


def test_the_module_after_dash_m_stays_a_module_name_even_beside_its_package(
    project: Path,
) -> None:
    args = ["-m", "my_server", "my_server", "--data", "data"]
    assert absolute_path_args(args, cwd=str(project)) == [
        "-m",
        "my_server",
        f"{project}/my_server",
        "--data",
        f"{project}/data",
    ]


def test_absolute_path_never_resolves_symlinks(project: Path) -> None:
    assert absolute_path("link", cwd=str(project)) == f"{project}/link"
    assert absolute_path("link/./f", cwd=str(project)) == f"{project}/link/f"
    assert os.path.samefile(absolute_path("link/../g", cwd=str(project)), project / "real" / "g")


# Names that exist in the project, spelled several ways, mixed with arbitrary words.
_EXISTING = ["s/server.py", "./s/server.py", "data", "data/", "data/cfg.json", ".", "link/f"]
_WORDS = st.one_of(
    st.sampled_from(_EXISTING),
    st.sampled_from(_EXISTING).map(lambda p: f"--opt={p}"),
    st.sampled_from(["-m", "--", "-", "my_server", "http://x/y", "..", "link/../g"]),
    st.text(max_size=12),
    st.text(max_size=12).map(lambda t: f"--{t}"),
)


def _split_option(arg: str) -> tuple[str, str]:
    """``("--name=", "value")`` for an option with a value, else ``("", arg)``."""
    name, equals, value = arg.partition("=")
    if equals and name.startswith("--") and name != "--":
        return name + equals, value
    return "", arg


def _relative_target(value: str, root: Path) -> bool:
    """The oracle: is ``value`` an existing relative path (flags never are)?"""
    if not value or value.startswith("-") or os.path.isabs(value):
        return False
    try:
        return (root / value).exists()
    except (ValueError, OSError):
        return False


@settings(max_examples=300, deadline=None)
@given(args=st.lists(_WORDS, max_size=6))
def test_rewriting_keeps_non_paths_and_absolutises_existing_paths(
    project: Path, args: list[str]
) -> None:
    result = absolute_path_args(args, cwd=str(project))
    assert len(result) == len(args)
    for index, (arg, out) in enumerate(zip(args, result, strict=True)):
        prefix, value = _split_option(arg)
        if not _relative_target(value, project) or (index > 0 and args[index - 1] == "-m"):
            assert out == arg
            continue
        assert out.startswith(prefix)
        written = out.removeprefix(prefix)
        assert os.path.isabs(written)
        assert os.path.samefile(written, project / value)


def _printed_author_entry(
    capsys: pytest.CaptureFixture[str], *argv: str
) -> dict[str, list[str] | str]:
    assert main(list(argv)) == 0
    entry: dict[str, list[str] | str] = json.loads(capsys.readouterr().out)["mcpServers"][
        "gitea-author"
    ]
    return entry


@pytest.fixture
def in_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A launch directory as the current one; no operator config, sockets under tmp_path."""
    root = tmp_path / "project"
    (root / "s").mkdir(parents=True)
    (root / "s" / "server.py").write_text("")
    (root / "data").mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    return root


def test_exec_wrapper_carries_the_config_and_socket_as_absolute_paths(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = in_project / "data" / "supervisor.toml"
    config.write_text('[exec]\nreap_orphans = true\n[socket]\npath = "fleet.sock"\n')
    entry = _printed_author_entry(
        capsys,
        "--config",
        "data/supervisor.toml",
        "launch-config",
        "--client",
        "codex",
        "--exec",
        "--",
        "python3",
        "s/server.py",
        "--stdio",
    )
    assert [entry["command"], *entry["args"]] == [
        *exec_command(),
        "--config",
        str(config),
        "--socket",
        # Relative in the file means beside the file.
        str(in_project / "data" / "fleet.sock"),
        *("--client", "codex", "--name", "gitea-author", "--namespace", "author"),
        "--",
        "python3",
        str(in_project / "s" / "server.py"),
        "--stdio",
    ]


def test_without_config_the_wrapper_carries_only_the_socket(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = _printed_author_entry(
        capsys, "--socket", "x.sock", "launch-config", "--client", "codex", "--exec", "--", "sh"
    )
    assert [entry["command"], *entry["args"]] == [
        *exec_command(),
        "--socket",
        str(in_project / "x.sock"),
        *("--client", "codex", "--name", "gitea-author", "--namespace", "author"),
        "--",
        "sh",
    ]
    plain = _printed_author_entry(capsys, "launch-config", "--client", "codex", "--", "sh", "data")
    assert [plain["command"], *plain["args"]] == ["sh", str(in_project / "data")]
