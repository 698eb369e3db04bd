"""Wrap then unwrap gives back the original bytes, for every client format and style."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.client_configs.documents import read_entries
from supervisor.client_configs.entries import Wrapper, dash_index, entry_nodes, safe_name
from supervisor.client_configs.locations import ConfigFile
from supervisor.client_configs.rewrite import Selection, rewrite_text
from supervisor.exec.exec_args import VALUE_FLAGS, parse_args
from tests.unit.client_configs.documents import (
    codex_toml,
    expected_path,
    json_config,
    make_path_tree,
)

WRAPPER = Wrapper(
    (
        "/opt/fleet é/.venv/bin/python",
        "-I",
        "-S",
        "/opt/fleet é/supervisor/sidecar/exec_in_place.py",
    ),
    '/run/fleet "x"/supervisor.sock',
)
CONFIGURED = Wrapper(WRAPPER.prefix, WRAPPER.socket, "/etc/fleet/supervisor.toml")
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _file(client: str) -> ConfigFile:
    if client == "codex":
        return ConfigFile("codex", "user", Path("/x/config.toml"), "toml", "mcp_servers")
    key = "servers" if client == "vscode" else "mcpServers"
    return ConfigFile(client, "user", Path("/x/c.json"), "json", key)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A project directory holding the files the generated path words name."""
    project = tmp_path_factory.mktemp("paths") / "project"
    project.mkdir()
    make_path_tree(project)
    return str(project)


def _round_trip(file: ConfigFile, text: str, wrapper: Wrapper, root: str | None = None) -> None:
    wrapped, results = rewrite_text(file, text, "wrap", Selection(), wrapper)
    again, _ = rewrite_text(file, wrapped, "wrap", Selection(), wrapper)
    assert again == wrapped, "wrapping a wrapped file changed it"
    back, _ = rewrite_text(file, wrapped, "unwrap", Selection())
    assert back == text
    assert back.encode("utf-8") == text.encode("utf-8")
    names = [r.name for r in results if r.action == "wrapped" and r.scope == file.scope]
    _check_wrapped(file, text, wrapped, wrapper, names)
    if root is not None:
        _check_paths(file, text, wrapped, root)


def _records(args: list[Any], dash: int) -> dict[int, str]:
    """The ``--as-written INDEX=TEXT`` records before the wrapper's ``--``."""
    found: dict[int, str] = {}
    at = next(i for i, a in enumerate(args) if a.endswith("exec_in_place.py")) + 1
    while at < dash:
        if args[at] == "--as-written":
            index, _, text = args[at + 1].partition("=")
            assert int(index) not in found
            found[int(index)] = text
        at += 2 if args[at] in VALUE_FLAGS else 1
    return found


def _directory(root: str, project: str | None, fields: Mapping[str, Any]) -> str | None:
    """Where the client starts the server, as the README says, for the generated values."""
    if "cwd" not in fields:
        return project
    cwd = fields["cwd"]
    if cwd in (root, f"{root}/sub"):
        return str(cwd)
    return f"{project}/sub" if cwd == "sub" and project else None


def _check_paths(file: ConfigFile, text: str, wrapped: str, root: str) -> None:
    """Each path word that names something where the server starts is written absolute,
    with its original text recorded, unless its token's escapes would not survive."""
    before = read_entries(text, file.fmt, file.key, claude=file.claude)
    after = {(v.scope, v.name): v.fields for v in read_entries(wrapped, file.fmt, file.key)}
    after |= {
        (v.scope, v.name): v.fields
        for v in read_entries(wrapped, file.fmt, file.key, claude=file.claude)
    }
    for view in before:
        fields, new = view.fields, after[(view.scope, view.name)]
        if view.spans is None or new.get("command") == fields.get("command"):
            continue  # not wrapped (not stdio, or not editable)
        argv = [str(fields["command"]), *fields.get("args", [])]
        args = new["args"]
        dash = dash_index(args)
        assert dash is not None
        inner, records = args[dash + 1 :], _records(args, dash)
        scope = view.scope.partition(":")
        project = scope[2] if scope[1] else (str(file.project) if file.project else None)
        directory = _directory(
            root, project if project and os.path.isabs(project) else None, fields
        )
        tokens = [text[n.start : n.end] for n in entry_nodes(view.spans)]
        for index, word in enumerate(argv):
            expected = expected_path(root, directory, word, index)
            if index in records:
                assert (records[index], inner[index]) == (word, expected)
                continue
            assert inner[index] == word
            plain = tokens[index] in (json.dumps(word, ensure_ascii=False), f"'{word}'")
            assert expected is None or not plain, f"{word!r} in {directory} kept as written"
        assert set(records) <= set(range(len(argv)))


def _servers(file: ConfigFile, text: str) -> dict[str, dict[str, object]] | None:
    """The file's top-level server map by the standard parser (None for JSONC)."""
    try:
        document = tomllib.loads(text) if file.fmt == "toml" else json.loads(text)
    except ValueError:
        return None
    servers: dict[str, dict[str, object]] = document.get(file.key) or {}
    return servers


def _check_wrapped(
    file: ConfigFile, text: str, wrapped: str, wrapper: Wrapper, names: list[str]
) -> None:
    before, after = _servers(file, text), _servers(file, wrapped)
    if before is None or after is None:
        return
    for name in names:
        old, new = before[name], after[name]
        args = new["args"]
        assert isinstance(args, list)
        assert new["command"] == wrapper.prefix[0]
        dash = dash_index(args)
        assert dash is not None
        original = old.get("args") or []
        assert isinstance(original, list)
        # A path made absolute is recorded with its original text (see test_paths.py).
        records = _records(args, dash)
        restored = [records.get(i, word) for i, word in enumerate(args[dash + 1 :])]
        assert restored == [old["command"], *original]
        assert all(os.path.isabs(args[dash + 1 + i]) for i in records)
        assert args[args.index("--client") + 1] == file.client
        assert {k: v for k, v in new.items() if k not in ("command", "args")} == {
            k: v for k, v in old.items() if k not in ("command", "args")
        }


@_SETTINGS
@given(st.sampled_from(["claude_desktop", "gemini", "cursor"]), st.data())
def test_mcp_servers_json_round_trips(client: str, data: st.DataObject) -> None:
    text = data.draw(json_config("mcpServers"))
    _round_trip(_file(client), text, data.draw(st.sampled_from([WRAPPER, CONFIGURED])))


@_SETTINGS
@given(json_config("mcpServers", claude=True))
def test_claude_json_with_per_project_maps_round_trips(text: str) -> None:
    file = ConfigFile("claude_code", "user", Path("/h/.claude.json"), "json")
    _round_trip(file, text, WRAPPER)


@_SETTINGS
@given(json_config("servers"))
def test_vscode_servers_json_round_trips(text: str) -> None:
    _round_trip(_file("vscode"), text, WRAPPER)


@_SETTINGS
@given(codex_toml())
def test_codex_toml_round_trips(text: str) -> None:
    _round_trip(_file("codex"), text, CONFIGURED)


def _project_file(client: str, root: str) -> ConfigFile:
    where = {"claude_code": ".mcp.json", "gemini": ".gemini/settings.json"}
    where |= {"cursor": ".cursor/mcp.json", "vscode": ".vscode/mcp.json"}
    key = "servers" if client == "vscode" else "mcpServers"
    return ConfigFile(client, "project", Path(root, where[client]), "json", key, Path(root))


@_SETTINGS
@given(st.sampled_from(["claude_code", "gemini", "cursor", "vscode"]), st.data())
def test_project_json_with_relative_paths_round_trips(
    root: str, client: str, data: st.DataObject
) -> None:
    file = _project_file(client, root)
    text = data.draw(json_config(file.key, root=root))
    _round_trip(file, text, data.draw(st.sampled_from([WRAPPER, CONFIGURED])), root)


@_SETTINGS
@given(st.data())
def test_claude_json_with_relative_paths_in_project_maps_round_trips(
    root: str, data: st.DataObject
) -> None:
    file = ConfigFile("claude_code", "user", Path("/h/.claude.json"), "json")
    _round_trip(file, data.draw(json_config(claude=True, root=root)), WRAPPER, root)


@_SETTINGS
@given(st.data())
def test_codex_toml_with_relative_paths_and_cwd_round_trips(root: str, data: st.DataObject) -> None:
    _round_trip(_file("codex"), data.draw(codex_toml(root)), CONFIGURED, root)


def test_a_wrapped_entry_without_args_gets_them_and_loses_them_again() -> None:
    text = '{\n  "mcpServers": {\n    "time": {\n      "command": "uvx"\n    }\n  }\n}\n'
    file = _file("cursor")
    wrapped, _ = rewrite_text(file, wrapped_text := text, "wrap", Selection(), WRAPPER)
    entry = json.loads(wrapped)["mcpServers"]["time"]
    assert entry["args"][-2:] == ["--", "uvx"]
    assert '\n      "args": [' in wrapped, "the new member follows the file's indentation"
    assert rewrite_text(file, wrapped, "unwrap", Selection())[0] == wrapped_text


def test_only_the_selected_server_and_scope_are_touched() -> None:
    text = json.dumps(
        {
            "mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}},
            "projects": {"/p": {"mcpServers": {"a": {"command": "z"}}}},
        },
        indent=2,
    )
    file = ConfigFile("claude_code", "user", Path("/h/.claude.json"), "json")
    new, results = rewrite_text(file, text, "wrap", Selection("a", "project"), WRAPPER)
    document = json.loads(new)
    assert document["mcpServers"] == {"a": {"command": "x"}, "b": {"command": "y"}}
    assert document["projects"]["/p"]["mcpServers"]["a"]["command"] == WRAPPER.prefix[0]
    assert [(r.scope, r.name, r.action) for r in results] == [("project:/p", "a", "wrapped")]


def test_http_entries_are_listed_and_left_alone() -> None:
    text = '{"mcpServers": {"web": {"type": "http", "url": "https://x.test/mcp"}}}'
    new, results = rewrite_text(_file("gemini"), text, "wrap", Selection(), WRAPPER)
    assert new == text
    assert [(r.transport, r.wrappable, r.action) for r in results] == [("http", False, "skipped")]


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=8), st.lists(st.text(min_size=1, max_size=5), max_size=3), st.booleans())
def test_the_wrapper_reads_back_the_original_command(
    name: str, argv: list[str], with_args: bool
) -> None:
    entry: dict[str, object] = {"command": "srv"}
    if with_args or argv:
        entry["args"] = argv
    text = json.dumps({"mcpServers": {name: entry}})
    wrapped, _ = rewrite_text(_file("cursor"), text, "wrap", Selection(), CONFIGURED)
    new = json.loads(wrapped)["mcpServers"][name]
    options = parse_args(new["args"][3:], {})
    assert options.command == ("srv", *argv)
    assert (options.client, options.config) == ("cursor", CONFIGURED.config)
    assert options.name == safe_name(name)


def test_relative_paths_are_kept_and_named_in_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A user-scope file: no directory to resolve against, so named when they exist here.
    for name in ("bin/srv", "x/y.py"):
        (tmp_path / name).parent.mkdir()
        (tmp_path / name).write_text("")
    monkeypatch.chdir(tmp_path)
    text = '{"mcpServers": {"s": {"command": "./bin/srv", "args": ["--root=data", "x/y.py"]}}}'
    new, (result,) = rewrite_text(_file("cursor"), text, "wrap", Selection(), WRAPPER)
    assert json.loads(new)["mcpServers"]["s"]["args"][-3:] == ["./bin/srv", "--root=data", "x/y.py"]
    assert "./bin/srv, x/y.py" in result.note
