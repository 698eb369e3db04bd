"""Hypothesis strategies for MCP client config files, written in many styles."""

# Each strategy draws the file's TEXT, not only its data: indentation (2, 4, tabs,
# compact), CRLF, one-line and multi-line arrays, JSONC comments and trailing commas,
# strings with optional escapes (``\u00e9`` for ``é``, ``\/``), TOML comments, literal
# and basic strings. Round trips are judged on these bytes. Given a ``root`` made by
# make_path_tree, entries also draw relative path words that exist below it (and some
# that only look like paths), and ``cwd`` values and project keys that point there.

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

__all__ = ["codex_toml", "expected_path", "json_config", "make_path_tree", "server_maps"]

# codec="utf-8": no lone surrogates, which no config file can hold.
#: Random words; those made of dots and slashes only ("..", "./") name the directory or
#: its parent, which the explicit path words below ("." and "../") cover with their answer.
_TEXT = st.text(st.characters(codec="utf-8"), max_size=6).filter(
    lambda word: not word or word.strip("./") != ""
)
_WORD = st.text(st.characters(codec="utf-8", exclude_categories=["Cc"]), min_size=1, max_size=6)
_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}

_TREE_FILES = ("server.py", "bin/srv", "é dir/x.js", "sub/tool.py")
#: word -> what it names below root, and below root/sub ("": the directory itself);
#: bare words name a file only as arguments (the command is looked up on PATH).
_NAMES: dict[str, tuple[str | None, str | None]] = {
    "./server.py": ("server.py", None),
    "server.py": ("server.py", None),
    "bin/srv": ("bin/srv", None),
    "./bin//srv": ("bin/srv", None),
    "é dir/x.js": ("é dir/x.js", None),
    "./data/": ("data", None),
    ".": ("", ""),
    "../": ("..", ".."),
    "sub/tool.py": ("sub/tool.py", None),
    "tool.py": (None, "tool.py"),
    "../server.py": (None, "../server.py"),
    # Never paths: a bare directory (as in python -m data), npm words, flags, nothing.
    "data": (None, None),
    "@scope/pkg": (None, None),
    "-y": (None, None),
    "npx": (None, None),
    "missing/x.py": (None, None),
}
_BARE_FILES = frozenset(("server.py", "tool.py"))


def make_path_tree(root: Path) -> None:
    """The files and directories the path words name, below ``root``."""
    for name in _TREE_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "data").mkdir(exist_ok=True)


def expected_path(root: str, directory: str | None, word: str, index: int) -> str | None:
    """What wrap must write for argv word ``index`` started in ``directory``, if not the word."""
    if directory not in (root, f"{root}/sub") or (index == 0 and word in _BARE_FILES):
        return None
    names = _NAMES.get(word, (None, None))
    below = names[0] if directory == root else names[1]
    if below is None:
        return None
    return f"{directory}/{below}" if below else directory


def _u_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


@st.composite
def _json_string(draw: st.DrawFn, value: str) -> str:
    escapes = draw(st.booleans())  # optional escapes in about half the strings
    out = ['"']
    for char in value:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20:
            choices = [_u_escape(char)] + ([_SHORT[char]] if char in _SHORT else [])
            out.append(draw(st.sampled_from(choices)))
        elif char == "/":
            out.append("\\/" if escapes and draw(st.booleans()) else "/")
        else:
            out.append(_u_escape(char) if escapes and draw(st.booleans()) else char)
    return "".join(out) + '"'


@st.composite
def _json_value(draw: st.DrawFn, value: Any, style: dict[str, Any], level: int) -> str:
    if isinstance(value, str):
        return draw(_json_string(value))
    if not isinstance(value, dict | list):
        return json.dumps(value)
    pairs = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
    open_, close = ("{", "}") if isinstance(value, dict) else ("[", "]")
    if not pairs:
        return open_ + draw(st.sampled_from(["", " "])) + close
    parts = []
    for key, item in pairs:
        head = f"{draw(_json_string(key))}{style['colon']}" if key is not None else ""
        parts.append(head + draw(_json_value(item, style, level + 1)))
    indent: str | None = style["indent"]
    if indent is None or draw(st.booleans()):
        comma: str = style["comma"]
        return open_ + comma.join(parts) + (comma.strip() if style["trailing"] else "") + close
    nl: str = style["newline"]
    lines = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        comma = "," if not last or style["trailing"] else ""
        comment = " // note ü" if style["comments"] and draw(st.booleans()) else ""
        lines.append(indent * (level + 1) + part + comma + comment)
    return open_ + nl + nl.join(lines) + nl + indent * level + close


def _word(root: str | None) -> st.SearchStrategy[str]:
    return _TEXT if root is None else st.one_of(_TEXT, st.sampled_from(sorted(_NAMES)))


def _cwd(root: str | None) -> st.SearchStrategy[str]:
    if root is None:
        return _TEXT
    return st.sampled_from([root, root, f"{root}/sub", "sub", "${workspaceFolder}", "~/p", ""])


@st.composite
def _entry(draw: st.DrawFn, root: str | None = None) -> dict[str, Any]:
    kind = draw(st.sampled_from(["stdio", "stdio", "stdio", "http", "odd"]))
    fields: dict[str, Any] = {}
    if kind == "http":
        key = draw(st.sampled_from(["url", "httpUrl", "serverUrl"]))
        fields[key] = "https://example.test/" + draw(_TEXT)
        if draw(st.booleans()):
            fields["type"] = draw(st.sampled_from(["http", "sse"]))
    else:
        fields["command"] = draw(_word(root))
        if draw(st.integers(0, 3)):
            fields["args"] = draw(st.lists(_word(root), max_size=4))
        if kind == "odd":
            fields["args"] = [1, "x"]  # not a list of strings: listed, never edited
        if draw(st.booleans()):
            fields["type"] = "stdio"
    if draw(st.booleans()):
        fields["env"] = draw(st.dictionaries(_WORD, _TEXT, max_size=2))
    if draw(st.booleans()):
        fields["cwd"] = draw(_cwd(root))
    if draw(st.booleans()):
        fields["unknownKey"] = draw(st.one_of(st.integers(), st.booleans(), st.none(), _TEXT))
    order = draw(st.permutations(list(fields)))
    return {key: fields[key] for key in order}


def server_maps(root: str | None = None) -> st.SearchStrategy[dict[str, dict[str, Any]]]:
    return st.dictionaries(_TEXT, _entry(root), max_size=4)


@st.composite
def json_config(
    draw: st.DrawFn, key: str = "mcpServers", *, claude: bool = False, root: str | None = None
) -> str:
    """A client's JSON config text with a server map under ``key`` (and Claude's projects)."""
    document: dict[str, Any] = {key: draw(server_maps(root))}
    if claude and draw(st.booleans()):
        keys = _TEXT if root is None else st.sampled_from([root, f"{root}/sub", "rel/p"])
        projects = draw(st.dictionaries(keys, server_maps(root), max_size=2))
        document["projects"] = {
            p: {"mcpServers": m, "allowedTools": []} for p, m in projects.items()
        }
    if draw(st.booleans()):
        document["otherSetting"] = draw(st.one_of(_TEXT, st.integers()))
    order = draw(st.permutations(list(document)))
    document = {k: document[k] for k in order}
    jsonc = draw(st.booleans())
    style: dict[str, Any] = {
        "indent": draw(st.sampled_from([None, "  ", "    ", "\t"])),
        "newline": draw(st.sampled_from(["\n", "\r\n"])),
        "colon": draw(st.sampled_from([": ", ":", " : "])),
        "comma": draw(st.sampled_from([", ", ","])),
        "comments": jsonc,
        "trailing": jsonc and draw(st.booleans()),
    }
    text = draw(_json_value(document, style, 0))
    lead = "// settings\n" if jsonc and draw(st.booleans()) else ""
    newline: str = style["newline"]
    return lead + text + draw(st.sampled_from(["", "\n", newline]))


_BARE = re.compile(r"[A-Za-z0-9_-]+")


@st.composite
def _toml_string(draw: st.DrawFn, value: str) -> str:
    literal_ok = "'" not in value and not any(
        (ord(c) < 0x20 and c != "\t") or c == "\x7f" for c in value
    )
    if literal_ok and draw(st.booleans()):
        return f"'{value}'"
    escapes = draw(st.booleans())
    out = ['"']
    for char in value:
        if char in '"\\':
            out.append("\\" + char)
        elif (ord(char) < 0x20 and char != "\t") or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            escape = f"\\U{ord(char):08x}" if ord(char) > 0xFFFF else f"\\u{ord(char):04x}"
            out.append(escape if escapes and draw(st.booleans()) else char)
    return "".join(out) + '"'


def _toml_key(value: str) -> str:
    if _BARE.fullmatch(value):
        return value
    quoted = value.replace("\\", "\\\\").replace('"', '\\"')
    return (
        '"'
        + re.sub(r"[\x00-\x08\x0a-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", quoted)
        + '"'
    )


@st.composite
def codex_toml(draw: st.DrawFn, root: str | None = None) -> str:
    """``~/.codex/config.toml`` text: comments, tables, arrays in several layouts."""
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    lines = []
    if draw(st.booleans()):
        lines.append("# Codex settings — ü")
    if draw(st.booleans()):
        lines.append(f"model = {draw(_toml_string('o3'))}")
    for name, fields in draw(server_maps(root)).items():
        key = _toml_key(name)
        lines.append(f"[mcp_servers.{key}]" + (" # server" if draw(st.booleans()) else ""))
        env = fields.pop("env", None)
        if isinstance(fields.get("args"), list) and not all(
            isinstance(a, str) for a in fields["args"]
        ):
            fields["args"] = ["x"]
        for field, value in fields.items():
            if value is None:
                continue
            comment = " # why" if draw(st.booleans()) else ""
            if isinstance(value, list):
                items = [draw(_toml_string(v)) for v in value]
                if len(items) > 0 and draw(st.booleans()):
                    size = len(items)
                    notes = draw(
                        st.lists(st.sampled_from(["", " # arg"]), min_size=size, max_size=size)
                    )
                    body = "".join(f"{nl}  {i},{n}" for i, n in zip(items, notes, strict=True))
                    lines.append(f"{field} = [{body}{nl}]{comment}")
                else:
                    lines.append(f"{field} = [{', '.join(items)}]{comment}")
            elif isinstance(value, str):
                lines.append(f"{field} = {draw(_toml_string(value))}{comment}")
            else:
                lines.append(f"{field} = {json.dumps(value)}{comment}")
        if env is not None:
            lines.append(f"[mcp_servers.{key}.env]")
            lines += [f"{_toml_key(k)} = {draw(_toml_string(v))}" for k, v in env.items()]
        if draw(st.booleans()):
            lines.append("")
    return nl.join(lines) + draw(st.sampled_from(["", nl]))
