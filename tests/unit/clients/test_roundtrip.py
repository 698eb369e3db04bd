"""Wrap then unwrap gives back the original bytes, for every client format and style."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.clients.entries import Wrapper, dash_index, safe_name
from supervisor.clients.locations import ConfigFile
from supervisor.clients.rewrite import Selection, rewrite_text
from supervisor.sidecar.exec_in_place import parse_args
from tests.unit.clients.documents import codex_toml, json_config

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


def _round_trip(file: ConfigFile, text: str, wrapper: Wrapper) -> None:
    wrapped, results = rewrite_text(file, text, "wrap", Selection(), wrapper)
    again, _ = rewrite_text(file, wrapped, "wrap", Selection(), wrapper)
    assert again == wrapped, "wrapping a wrapped file changed it"
    back, _ = rewrite_text(file, wrapped, "unwrap", Selection())
    assert back == text
    assert back.encode("utf-8") == text.encode("utf-8")
    names = [r.name for r in results if r.action == "wrapped" and r.scope == file.scope]
    _check_wrapped(file, text, wrapped, wrapper, names)


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
        assert args[dash + 1 :] == [old["command"], *original]
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


def test_relative_paths_are_kept_and_named_in_a_warning() -> None:
    text = '{"mcpServers": {"s": {"command": "./bin/srv", "args": ["--root=data", "x/y.py"]}}}'
    new, (result,) = rewrite_text(_file("cursor"), text, "wrap", Selection(), WRAPPER)
    assert json.loads(new)["mcpServers"]["s"]["args"][-3:] == ["./bin/srv", "--root=data", "x/y.py"]
    assert "./bin/srv, x/y.py" in result.note
