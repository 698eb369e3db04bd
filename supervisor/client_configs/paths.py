"""Which relative paths in a server's command wrap makes absolute, and against which directory."""

# A client starts a stdio server in the entry's ``cwd`` when it has one, else in its
# own working directory: for a project's file (``.mcp.json``, ``.cursor/mcp.json``,
# a project ``.gemini/settings.json``, ``.vscode/mcp.json``, ``~/.claude.json``'s
# per-project maps) that is the project, for a user's file it is wherever the client
# happens to run. Wrap writes a relative path that names an existing file or directory
# there as an absolute one; where there is no fixed directory it keeps the word and
# says so. A word counts as a path when it holds a "/" (or is "." or ".."), or, as an
# argument (not the command, which the client looks up on PATH), when it names an
# existing regular file, and does not start with "-", "~" or "@"; so ``npx``, ``-y``,
# ``@scope/pkg`` or ``python -m pkg`` with a ``pkg/`` directory beside it are never touched.

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from supervisor.client_configs.entries import EntrySpans, entry_nodes, render_like
from supervisor.client_configs.locations import ConfigFile

__all__ = ["PathPlan", "path_words", "plan_paths", "start_directory"]

_USER_SCOPE = "a user-scope file names no directory its client starts servers in"


@dataclass(frozen=True, slots=True)
class PathPlan:
    """What wrap does with one entry's relative paths."""

    #: argv index (0: the command) -> the absolute path written in its place.
    absolute: Mapping[int, str] = field(default_factory=dict)
    note: str = ""


def start_directory(file: ConfigFile, scope: str, fields: Mapping[str, Any]) -> tuple[str, str]:
    """The directory the client starts this entry's server in, or "" and why it is unknown.

    ``scope``: the entry's own (``project:<path>`` for Claude Code's per-project maps).
    """
    why = _USER_SCOPE
    if scope.startswith("project:"):
        project = scope.partition(":")[2]
        base, why = (project, "") if os.path.isabs(project) else ("", "its project is not absolute")
    else:
        base = str(file.project) if file.project is not None else ""
    if "cwd" not in fields:
        return base, "" if base else why
    cwd = fields["cwd"]
    if not isinstance(cwd, str) or not cwd or cwd.startswith("~") or "$" in cwd or "\0" in cwd:
        return "", "its cwd is not a plain path"
    if os.path.isabs(cwd):
        return cwd, ""
    if not base:
        return "", f"its cwd is relative and {why}"
    return str(PurePosixPath(base) / cwd), ""


def _names_path(word: str, index: int, directory: str) -> bool:
    # "@scope/pkg" is npm's package syntax, never a path to make absolute.
    if not word or "\0" in word or os.path.isabs(word) or word.startswith(("-", "~", "@")):
        return False
    if "://" in word:
        return False
    where = os.path.join(directory, word)
    if "/" in word or word in (".", ".."):
        return os.path.exists(where)
    return index > 0 and os.path.isfile(where)


def path_words(argv: Sequence[str], directory: str) -> dict[int, str]:
    """argv index -> the absolute path, for each relative word naming something in
    ``directory`` (``.`` components dropped, ``..`` kept: symlinks give it its meaning)."""
    return {
        index: str(PurePosixPath(directory) / word)
        for index, word in enumerate(argv)
        if _names_path(word, index, directory)
    }


def _listed(words: Sequence[str]) -> str:
    return ", ".join(words[:3]) + (", ..." if len(words) > 3 else "")


def plan_paths(
    file: ConfigFile, scope: str, fields: Mapping[str, Any], text: str, spans: EntrySpans
) -> PathPlan:
    """Which of the entry's words wrap makes absolute, and the note for those it keeps."""
    nodes = entry_nodes(spans)
    argv = [str(node.value) for node in nodes]
    directory, why = start_directory(file, scope, fields)
    if not directory:
        # Named only when they are paths here, so a package name is never reported.
        kept = [argv[i] for i in path_words(argv, os.getcwd())]
        note = f"relative path(s) kept as written ({_listed(kept)}): {why}" if kept else ""
        return PathPlan({}, note)
    absolute: dict[int, str] = {}
    escaped: list[str] = []
    for index, path in path_words(argv, directory).items():
        token = text[nodes[index].start : nodes[index].end]
        # Unwrap renders the original back in the new token's style: keep the word
        # unless that gives this very token again (not so for e.g. "\/" or "\u002e").
        if render_like(argv[index], render_like(path, token, spans.fmt), spans.fmt) == token:
            absolute[index] = path
        else:
            escaped.append(token)
    note = ""
    if escaped:
        note = (
            f"relative path(s) kept as written ({_listed(escaped)}): unwrap could not give "
            "their escapes back byte for byte"
        )
    return PathPlan(absolute, note)
