"""Where a client's config file keeps its MCP server entries, with their text spans."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from supervisor.client_configs.entries import EntrySpans
from supervisor.client_configs.scan import (
    Node,
    ScanError,
    match_toml_string,
    parse_json,
    scan_toml_array,
)

__all__ = ["DocumentError", "EntryView", "read_entries"]


class DocumentError(ValueError):
    """The file does not parse, or its server map is not a map."""


@dataclass(frozen=True, slots=True)
class EntryView:
    """One server entry: the scope it sits in, its decoded fields, and its spans."""

    scope: str  # user | project | project:<abs path> (Claude Code's per-project maps)
    name: str
    fields: Mapping[str, Any]
    spans: EntrySpans | None
    #: Why the entry cannot be edited in place, when spans is None.
    problem: str = ""


def _line_lead(text: str, position: int) -> str | None:
    """The indentation before ``position`` when only whitespace precedes it on its line."""
    start = text.rfind("\n", 0, position) + 1
    lead = text[start:position]
    return lead if lead.strip() == "" else None


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _json_entry(text: str, scope: str, name: str, node: Node) -> EntryView:
    fields = node.value if isinstance(node.value, dict) else {}
    if node.kind != "object":
        return EntryView(scope, name, {}, None, "the entry is not an object")
    command = node.get("command")
    if command is None or command.kind != "string":
        return EntryView(scope, name, fields, None, "no command string")
    args = node.get("args")
    if args is not None and (args.kind != "array" or any(i.kind != "string" for i in args.items)):
        return EntryView(scope, name, fields, None, "args is not a list of strings")
    keys = [key_start for key, key_start, _ in node.members if key == "command"]
    lead = _line_lead(text, keys[-1])
    args_lead = ", " if lead is None else f",{_newline(text)}{lead}"
    args_from = None
    for index, (_, _, member) in enumerate(node.members):
        if member is args and index > 0:
            args_from = node.members[index - 1][2].end
    spans = EntrySpans("json", command, args, command.end, args_lead, args_from)
    return EntryView(scope, name, fields, spans)


def _json_map(text: str, scope: str, node: Node | None, where: str) -> list[EntryView]:
    if node is None:
        return []
    if node.kind != "object":
        raise DocumentError(f"{where} is not an object")
    return [_json_entry(text, scope, name, value) for name, _, value in node.members]


def _json_entries(text: str, key: str, claude: bool) -> list[EntryView]:
    try:
        root = parse_json(text)
    except ScanError as exc:
        raise DocumentError(str(exc)) from None
    if root.kind != "object":
        raise DocumentError("the document is not an object")
    found = _json_map(text, "user", root.get(key), key)
    projects = root.get("projects") if claude else None
    if projects is not None and projects.kind == "object":
        for path, _, project in projects.members:
            if project.kind == "object":
                where = f"projects.{path}.{key}"
                found += _json_map(text, f"project:{path}", project.get(key), where)
    return found


_HEADER = re.compile(r"^[ \t]*\[(?!\[)([^\n]*?)\][ \t]*(?:#[^\n]*)?\r?$", re.MULTILINE)
_KEY = r"^([ \t]*)(?:{0}|\"{0}\"|'{0}')[ \t]*=[ \t]*"


def _header_path(inner: str) -> tuple[str, ...] | None:
    try:
        table: Any = tomllib.loads(f"[{inner}]")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    while isinstance(table, dict) and len(table) == 1:
        key = next(iter(table))
        path.append(key)
        table = table[key]
    return tuple(path)


def _toml_spans(text: str, start: int, end: int, fields: Mapping[str, Any]) -> EntrySpans | None:
    """The spans of ``command`` and ``args`` inside one ``[mcp_servers.NAME]`` section."""
    section = text[start:end]
    command_at = re.search(_KEY.format("command"), section, re.MULTILINE)
    if command_at is None:
        return None
    position = start + command_at.end()
    match = match_toml_string(text, position)
    if match is None or tomllib.loads(f"v = {match.group()}")["v"] != fields.get("command"):
        return None
    command = Node("string", position, match.end(), fields.get("command"))
    args_at = re.search(_KEY.format("args"), section, re.MULTILINE)
    args = None
    args_from = None
    if args_at is not None:
        try:
            args = scan_toml_array(text, start + args_at.end())
        except ScanError:
            return None
        if args.value != fields.get("args"):
            return None
        line = text.rfind("\n", 0, start + args_at.start())
        args_from = line - 1 if line > 0 and text[line - 1] == "\r" else line
    elif "args" in fields:
        return None
    eol = text.find("\n", command.end)
    eol = len(text) if eol < 0 else eol
    newline = "\n"
    if eol > 0 and text[eol - 1] == "\r":
        eol, newline = eol - 1, "\r\n"
    return EntrySpans("toml", command, args, eol, f"{newline}{command_at.group(1)}", args_from)


def _toml_entries(text: str) -> list[EntryView]:
    # tomlkit (about 1 MB of RSS) loads only when a TOML client config is read.
    import tomlkit.exceptions  # noqa: PLC0415

    try:
        document = tomlkit.parse(text).unwrap()
    except tomlkit.exceptions.TOMLKitError as exc:
        raise DocumentError(str(exc)) from None
    servers = document.get("mcp_servers")
    if servers is None:
        return []
    if not isinstance(servers, dict):
        raise DocumentError("mcp_servers is not a table")
    headers = [(m.start(), m.end(), _header_path(m.group(1))) for m in _HEADER.finditer(text)]
    found = []
    for name, fields in servers.items():
        if not isinstance(fields, dict):
            found.append(EntryView("user", name, {}, None, "the entry is not a table"))
            continue
        spans = None
        for index, (_, head_end, path) in enumerate(headers):
            if path == ("mcp_servers", name) and isinstance(fields.get("command"), str):
                stop = headers[index + 1][0] if index + 1 < len(headers) else len(text)
                spans = _toml_spans(text, head_end, stop, fields)
        problem = "" if spans else "not a plain [mcp_servers.NAME] table with command/args lines"
        if not isinstance(fields.get("command"), str):
            problem = "no command string"
        found.append(EntryView("user", name, fields, spans, problem))
    return found


def read_entries(text: str, fmt: str, key: str, *, claude: bool = False) -> list[EntryView]:
    """Every server entry of one file (``key``: the JSON map's name, e.g. mcpServers)."""
    if fmt == "toml":
        return _toml_entries(text)
    return _json_entries(text, key, claude)
