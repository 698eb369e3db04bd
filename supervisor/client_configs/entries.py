"""One server entry: its transport, whether it is wrapped, the edits that wrap or unwrap it."""

# Wrap and unwrap are exact inverses as text. Wrap replaces the command's string token
# with the wrapper's interpreter and inserts, before the first original argument, the
# wrapper's arguments followed by the ORIGINAL command token copied verbatim (its
# quoting and escapes included) and one separator in the array's own style. Unwrap
# puts that token back as the command and deletes exactly the inserted text: the span
# from the first element to the first original argument. An entry with no ``args``
# member gets one, marked by the word ``exec`` right after the wrapper script (the
# wrapper accepts and ignores it), so unwrap knows to remove the member it added.
# A relative path that wrap makes absolute (clients.paths) is written in its token's
# own style, and its original text goes into the wrapper's arguments as
# ``--as-written INDEX=TEXT``; unwrap renders TEXT back in that style. Wrap makes a
# path absolute only when that rendering gives back the original token exactly.

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from supervisor.client_configs.scan import Node
from supervisor.exec.exec_args import AS_WRITTEN, VALUE_FLAGS

__all__ = [
    "ABSENT_MARK",
    "WRAPPER_SCRIPT",
    "Edit",
    "EntrySpans",
    "Wrapper",
    "apply_edits",
    "as_written",
    "dash_index",
    "entry_nodes",
    "is_wrapped",
    "render_like",
    "render_string",
    "safe_name",
    "transport_of",
    "unwrap_edits",
    "unwrapped_command",
    "wrap_edits",
    "wrapper_words",
]

WRAPPER_SCRIPT = "exec_in_place.py"
#: Written after the wrapper script when wrap added the ``args`` member itself.
ABSENT_MARK = "exec"
_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``text[start:end]`` with ``new``."""

    start: int
    end: int
    new: str


@dataclass(frozen=True, slots=True)
class Wrapper:
    """What wrap writes: the fast argv prefix and the daemon's settings."""

    prefix: tuple[str, ...]
    socket: str
    config: str | None = None


@dataclass(frozen=True, slots=True)
class EntrySpans:
    """Where one entry's ``command`` and ``args`` values are in the file text.

    ``args_insert``: where a new ``args`` member goes (after the command) and the text
    before its name; ``args_from``: where an ``args`` member wrap added starts.
    """

    fmt: str  # json | toml
    command: Node
    args: Node | None
    args_insert: int
    args_lead: str
    args_from: int | None


def render_string(value: str, fmt: str) -> str:
    """``value`` as a string token both JSON and TOML read back as ``value``."""
    try:
        value.encode("utf-8")
        text = json.dumps(value, ensure_ascii=False)
    except UnicodeEncodeError:
        text = json.dumps(value)
    # TOML refuses a raw DEL in a basic string; JSON accepts the escape too.
    return text.replace("\x7f", "\\u007f") if fmt == "toml" else text


def _literal_ok(value: str) -> bool:
    """Whether a TOML literal string ('...') can hold ``value``."""
    return "'" not in value and not any((ord(c) < 0x20 and c != "\t") or c == "\x7f" for c in value)


def render_like(value: str, token: str, fmt: str) -> str:
    """``value`` as a string token in ``token``'s style (a TOML literal string stays one)."""
    single = token.startswith("'") and not token.startswith("'''")
    if fmt == "toml" and single and _literal_ok(value):
        return f"'{value}'"
    return render_string(value, fmt)


def safe_name(name: str) -> str:
    return _NAME_CHARS.sub("_", name)[:64] or "server"


def transport_of(fields: Mapping[str, Any], client: str) -> str:
    kind = fields.get("type")
    if isinstance(kind, str) and kind:
        lowered = kind.lower().replace("_", "-")
        if lowered in ("http", "streamable-http", "streamablehttp"):
            return "http"
        return lowered
    if isinstance(fields.get("command"), str):
        return "stdio"
    if "httpUrl" in fields:
        return "http"
    if "url" in fields or "serverUrl" in fields:
        # Gemini's plain ``url`` is SSE (``httpUrl`` is streamable HTTP).
        return "sse" if client == "gemini" else "http"
    return "unknown"


def is_wrapped(command: object, args: object) -> bool:
    """Whether the entry already runs under ``exec`` (ours, or ``fleet-supervisor exec``)."""
    words = [command, *(args if isinstance(args, list) else [])]
    names = [os.path.basename(w) for w in words if isinstance(w, str)]
    if WRAPPER_SCRIPT in names:
        return True
    return bool(names) and names[0] == "fleet-supervisor" and "exec" in names[1:]


def _script_index(args: Sequence[object]) -> int | None:
    return next((i for i, a in enumerate(args) if os.path.basename(str(a)) == WRAPPER_SCRIPT), None)


def _walk(args: Sequence[object]) -> tuple[int | None, list[tuple[str, object]]]:
    """The wrapper's own ``--`` (after the script, skipping its flags' values, which may
    be "--") and the (flag, value) pairs before it."""
    script = _script_index(args)
    index = 0 if script is None else script + 1
    pairs: list[tuple[str, object]] = []
    while index < len(args):
        arg = args[index]
        if arg == "--":
            return index, pairs
        flag, eq, inline = str(arg).partition("=")
        if arg in VALUE_FLAGS:
            pairs.append((str(arg), args[index + 1] if index + 1 < len(args) else None))
            index += 2
            continue
        if eq and flag in VALUE_FLAGS:
            pairs.append((flag, inline))
        index += 1
    return None, pairs


def dash_index(args: Sequence[object]) -> int | None:
    """Where the wrapper's own ``--`` is: after the script, skipping its flags' values."""
    return _walk(args)[0]


def as_written(args: Sequence[object]) -> dict[int, str] | None:
    """A wrapped entry's ``--as-written`` records: word index after ``--`` -> the text
    wrap replaced there. None when a record does not fit the command it stands before."""
    dash, pairs = _walk(args)
    inner = 0 if dash is None else len(args) - dash - 1
    records: dict[int, str] = {}
    for flag, value in pairs:
        if flag != AS_WRITTEN:
            continue
        number, eq, text = value.partition("=") if isinstance(value, str) else ("", "", "")
        if not (eq and number.isascii() and number.isdigit()):
            return None
        index = int(number)
        if index >= inner or index in records:
            return None
        records[index] = text
    return records


def wrapper_words(
    wrapper: Wrapper,
    *,
    has_args: bool,
    client: str,
    name: str,
    written: Mapping[int, str],
) -> list[str]:
    """The words wrap puts before the server's own command, ``--`` included."""
    words = list(wrapper.prefix[1:])
    if not has_args:
        words.append(ABSENT_MARK)
    if wrapper.config is not None:
        words += ["--config", wrapper.config]
    words += ["--socket", wrapper.socket, "--client", client, "--name", safe_name(name)]
    for index in sorted(written):
        words += [AS_WRITTEN, f"{index}={written[index]}"]
    return [*words, "--"]


def unwrapped_command(args: Sequence[object]) -> list[str] | None:
    """The server's own argv after the wrapper's ``--``; None when there is none."""
    dash = dash_index(args)
    if dash is None:
        return None
    rest = list(args[dash + 1 :])
    if not rest or not all(isinstance(a, str) for a in rest):
        return None
    return [str(a) for a in rest]


def _separator(text: str, array: Node) -> str:
    items = array.items
    if len(items) >= 2:
        between = text[items[0].end : items[1].start]
        if re.fullmatch(r"\s*,\s*", between):
            return between
    lead = text[array.start + 1 : items[0].start]
    if lead.strip() == "" and "\n" in lead:
        return "," + lead
    return ", "


def entry_nodes(spans: EntrySpans) -> list[Node]:
    """The string nodes of the server's argv: the command, then each argument."""
    return [spans.command, *(spans.args.items if spans.args is not None else [])]


def _put(text: str, node: Node, value: str, fmt: str) -> Edit:
    return Edit(node.start, node.end, render_like(value, text[node.start : node.end], fmt))


def wrap_edits(
    text: str,
    spans: EntrySpans,
    wrapper: Wrapper,
    *,
    client: str,
    name: str,
    absolute: Mapping[int, str] | None = None,
) -> list[Edit]:
    """The edits that make this entry run under ``exec`` (see the module note);
    ``absolute``: argv index -> the absolute path written in place of that word."""
    fmt = spans.fmt
    absolute = absolute or {}
    nodes = entry_nodes(spans)
    written = {index: str(nodes[index].value) for index in absolute}
    words = wrapper_words(
        wrapper, has_args=spans.args is not None, client=client, name=name, written=written
    )
    tokens = [render_string(w, fmt) for w in words]
    command = spans.command
    original = text[command.start : command.end]
    tokens.append(render_like(absolute[0], original, fmt) if 0 in absolute else original)
    edits = [Edit(command.start, command.end, render_string(wrapper.prefix[0], fmt))]
    edits += [_put(text, nodes[i], path, fmt) for i, path in absolute.items() if i > 0]
    args = spans.args
    if args is None:
        joiner = " = " if fmt == "toml" else ": "
        key = "args" if fmt == "toml" else '"args"'
        member = f"{spans.args_lead}{key}{joiner}[{', '.join(tokens)}]"
        edits.append(Edit(spans.args_insert, spans.args_insert, member))
    elif args.items:
        sep = _separator(text, args)
        edits.append(
            Edit(args.items[0].start, args.items[0].start, "".join(t + sep for t in tokens))
        )
    else:
        edits.append(Edit(args.start + 1, args.start + 1, ", ".join(tokens)))
    return edits


def unwrap_edits(text: str, spans: EntrySpans) -> list[Edit] | None:
    """The exact inverse of :func:`wrap_edits`; None when the args hold no ``--`` command."""
    args = spans.args
    if args is None:
        return None
    values = [item.value for item in args.items]
    dash = dash_index(values)
    records = as_written(values)
    if dash is None or records is None:
        return None
    if dash + 1 >= len(values) or not isinstance(values[dash + 1], str):
        return None
    first = dash + 2  # the server's first own argument
    original = args.items[dash + 1]
    restored = text[original.start : original.end]
    if 0 in records:
        restored = render_like(records[0], restored, spans.fmt)
    edits = [Edit(spans.command.start, spans.command.end, restored)]
    edits += [
        _put(text, args.items[dash + 1 + i], old, spans.fmt) for i, old in records.items() if i > 0
    ]
    script = _script_index(values[:dash])
    added = script is not None and script + 1 < dash and values[script + 1] == ABSENT_MARK
    if added and first == len(values) and spans.args_from is not None:
        edits.append(Edit(spans.args_from, args.end, ""))
    elif first < len(values):
        edits.append(Edit(args.items[0].start, args.items[first].start, ""))
    elif args.items[0].start == args.start + 1:
        edits.append(Edit(args.items[0].start, original.end, ""))
    else:
        # Wrap writes right after the "[" of an empty array; space there means another
        # program re-serialized the file (Claude Code does, multi-line): give it "[]".
        edits.append(Edit(args.start + 1, args.end - 1, ""))
    return edits


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with non-overlapping ``edits`` applied (any order given)."""
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    pieces: list[str] = []
    cursor = 0
    for edit in ordered:
        if edit.start < cursor:
            raise ValueError("overlapping edits")
        pieces += [text[cursor : edit.start], edit.new]
        cursor = edit.end
    pieces.append(text[cursor:])
    return "".join(pieces)
